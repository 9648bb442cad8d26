"""CacheSync: keeps a ClusterCache fresh from the store, for a worker or a binder.

Load a snapshot (every object and the stream position, read atomically), then follow the
store's change stream from that position. A new snapshot replaces the cache's contents when
the stream was trimmed past its position, and when the owner asks (`reload(reason)`: a
conflict showed the cache counting short of the store). Redis trouble pauses the loop
(growing pauses, each logged with its reason: shared.runtime.retry) and it resumes from where the
cache is, or from a new snapshot when the store came back behind the cache (it lost writes).

`lock` (optional) is held while a batch is applied, for owners that run cycles in a thread
while the event loop goes on; `on_advance` is called after every batch and reload.

`linger_seconds`: after a batch smaller than `count`, wait that long (or until someone waits
for the view: `hurry()`, which the cache's own `wait_for` calls) before reading the stream
again. A follower that reads as soon as anything is there reads one or two changes per XREAD
while the cluster changes a thousand times a second: each read costs the follower and Redis
about as much as the changes it brings, paid again by every follower. Lingering, it reads
them by the dozen; nobody who needs the view fresher waits longer for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from scheduling.cache.cache import ClusterCache
from shared.runtime.retry import Retry
from shared.runtime.tasks import finish
from shared.store import BodiesSkipped, ClusterStore, StreamGapError

log = logging.getLogger(__name__)

_DELETED = BodiesSkipped(deleted=True)
"""A ClusterCache drops a deleted object by its key and uid: the body is not decoded."""


class CacheSync:
    """See the module docstring."""

    def __init__(
        self,
        store: ClusterStore,
        cache: ClusterCache,
        *,
        block_ms: int = 500,
        count: int = 2000,
        lock: asyncio.Lock | None = None,
        on_advance: Callable[[], None] | None = None,
        name: str = "cache-sync",
        linger_seconds: float = 0.0,
    ) -> None:
        self.store = store
        self.cache = cache
        self._block_ms = block_ms
        self._count = count
        self._lock = lock if lock is not None else asyncio.Lock()
        self._on_advance = on_advance or (lambda: None)
        self._name = name
        self._linger = linger_seconds
        self._hurry = asyncio.Event()
        cache.on_wait = self.hurry
        self._stopping = asyncio.Event()
        self._interrupt = asyncio.Event()
        """Ends the follower's current pass: on stop, and to reload."""
        self._reload_reason = ""
        self._task: asyncio.Task[None] | None = None
        self.reloads = 0
        """Snapshots loaded after the first (trimmed stream, or asked for)."""

    async def start(self) -> None:
        """Load the snapshot (returns once the cache has it), then follow in the background."""
        self.cache.load(await self.store.load_snapshot())
        self._on_advance()
        self._stopping.clear()
        self._interrupt.clear()
        self._task = asyncio.create_task(self._follow(), name=self._name)

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    def hurry(self) -> None:
        """Someone waits for the view: read the stream now, not after the linger."""
        self._hurry.set()

    def reload(self, reason: str) -> bool:
        """Ask for a new snapshot (False when one is already asked for)."""
        if self._reload_reason:
            return False
        self._reload_reason = reason
        self._interrupt.set()
        return True

    async def stop(self) -> None:
        """Stop following (within about one XREAD block)."""
        self._stopping.set()
        self._interrupt.set()
        self._hurry.set()
        if self._task is not None:
            await finish(self._task, self._block_ms / 1000 + 2.0)
            self._task = None

    async def _follow(self) -> None:
        retry = Retry(f"{self._name}: following the change stream", log)
        reload_reason = ""
        while not self._stopping.is_set():
            try:
                if retry.failures:
                    # Back after an outage: a Redis that came back with less than it had
                    # (a failover to a replica behind, a crash that lost its last writes)
                    # would number new changes with versions the cache has seen already.
                    stored = await self.store.resource_version()
                    if stored < self.cache.resource_version:
                        reload_reason = (
                            f"the store is at resourceVersion {stored}, behind the cache "
                            f"({self.cache.resource_version}): it lost writes"
                        )
                if reload_reason:
                    log.warning("%s: reloading the snapshot (%s)", self._name, reload_reason)
                    await self._reload()
                    reload_reason = ""
                    retry.succeeded()
                async for changes in self.store.follow_batches(
                    self.cache.resource_version,
                    block_ms=self._block_ms,
                    count=self._count,
                    stop=self._interrupt,
                    previous=self.cache.previous,
                    skip=_DELETED,
                ):
                    async with self._lock:
                        self.cache.apply(changes)
                    self._on_advance()
                    retry.succeeded()
                    if len(changes) < self._count and self._linger > 0:
                        await self._linger_a_while()
                if self._reload_reason and not self._stopping.is_set():
                    reload_reason = self._reload_reason
                retry.succeeded()
            except StreamGapError as exc:
                reload_reason = str(exc)
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                # Redis went away for a moment: retry from where the cache is.
                await retry.pause(exc, self._stopping)

    async def _linger_a_while(self) -> None:
        if self._hurry.is_set() or self._interrupt.is_set():
            self._hurry.clear()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), self._linger)
        self._hurry.clear()

    async def _reload(self) -> None:
        # In place: the frameworks keep their handle, and the pods this scheduler assumed
        # and that are not bound yet stay assumed (ClusterCache.load keeps them).
        snapshot = await self.store.load_snapshot()
        async with self._lock:
            self.cache.load(snapshot)
        self.reloads += 1
        self._reload_reason = ""
        if not self._stopping.is_set():
            self._interrupt.clear()
        self._on_advance()
