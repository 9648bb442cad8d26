"""Keeps a ClusterView fresh: load a snapshot, then follow the store's change stream (a new
snapshot when the stream was trimmed past the view's position)."""

from __future__ import annotations

import asyncio
import logging

from scheduling.cache.view import ClusterView
from shared.store import ClusterStore, StreamGapError
from shared.tasks import finish

log = logging.getLogger(__name__)


class ViewSync:
    def __init__(
        self, store: ClusterStore, view: ClusterView, *, block_ms: int = 500, count: int = 2000
    ) -> None:
        self.store = store
        self.view = view
        self._block_ms = block_ms
        self._count = count
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the snapshot (returns once the view has it), then follow in the background."""
        self.view.load(await self.store.load_snapshot())
        self._stop.clear()
        self._task = asyncio.create_task(self._follow(), name="binder-view-sync")

    async def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                async for batch in self.store.follow_batches(
                    self.view.resource_version,
                    block_ms=self._block_ms,
                    count=self._count,
                    stop=self._stop,
                    previous=self.view.previous,
                ):
                    self.view.apply(batch)
            except StreamGapError as exc:
                log.warning("%s: reloading the snapshot", exc)
                self.view.load(await self.store.load_snapshot())
            except Exception:  # Redis went away for a moment: retry from where the view is
                log.exception("following the change stream failed")
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Stop following (within about one XREAD block)."""
        self._stop.set()
        if self._task is not None:
            await finish(self._task, self._block_ms / 1000 + 2.0)
            self._task = None
