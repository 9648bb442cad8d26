"""List, then watch, one kind from the API server into the store (client-go's Reflector).

- **Start and 410.** A reflector always starts with a list: every listed object is put (the
  sink skips what the store already holds unchanged) and whatever the store holds that the
  list lacks is deleted. It then watches from the list's resourceVersion. A watch answered
  with 410 Gone (the server compacted its history past our position) lists again. So neither
  a restart of the adapter nor a long disconnection loses an event, and none is applied twice
  (see `services.adapter.sink`).
- **Bookmarks.** Watches ask for BOOKMARK events; they move our position without an object,
  so a quiet kind resumes from a recent version instead of hitting 410 after a reconnect.
- **Errors.** Any other API error (401, 403, 429, 5xx, a lagging cache's "too large
  resource version"), on a list or a watch, or a lost connection to the API or to Redis, is
  retried with exponential backoff and jitter, logging the reason, and never sooner than the
  server's Retry-After; the position is kept, so the retry resumes the watch. A watch that
  sends nothing for the client's read timeout (longer than the bookmark interval) counts as
  a lost connection.
- **Redis lost data.** The reflector remembers the store's epoch (`StoreSink.epoch`) of its
  last list; before each watch, and whenever the adapter's check finds the epoch changed
  (`resync`), it lists again instead of resuming from memory: a Redis that came back with
  less (failover, a lost AOF tail, a flush) gets every object back.
- **Kinds the server does not serve.** A list answered 404 means the kind's CRD is not
  installed (PodGroups without the scheduler-plugins CRD, the usual case): there are none,
  so the store holds none, the kind counts as synced, and it is listed again every
  ABSENT_RECHECK_SECONDS, logged once when found missing and once when served again (not
  an error with a traceback every backoff, forever).
- **Binder races.** A pod the API shows bound while berth's binder is still finishing that
  binding in the store is put again shortly (the sink answers "retry"), unless a newer event
  for it arrived meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from redis.exceptions import RedisError

from services.adapter.sink import StoreSink, key_of
from shared.kube.client import KubeApi, KubeApiError, KubeUnavailableError
from shared.runtime.retry import Backoff, Retry

log = logging.getLogger(__name__)

RETRY_SECONDS = 0.05
WATCH_BATCH = 256
"""Watch events applied to the store together, at most."""
RETRY_MAX_SECONDS = 2.0
ABSENT_RECHECK_SECONDS = 60.0


class Reflector:
    def __init__(
        self,
        api: KubeApi,
        kind: str,
        sink: StoreSink,
        *,
        backoff: Backoff | None = None,
        watch_timeout_seconds: int = 300,
    ) -> None:
        self.api = api
        self.kind = kind
        self.sink = sink
        self.retry = Retry(
            f"adapter: {kind} list/watch",
            log,
            backoff if backoff is not None else Backoff(0.5, 30.0),
        )
        self.watch_timeout_seconds = watch_timeout_seconds
        self.version = ""
        """The resourceVersion the next watch starts after ("": list first)."""
        self.synced = asyncio.Event()
        """Set once the first list is in the store (or the kind is known not served)."""
        self.absent = False
        """The server answered 404 to the last list: the kind is not served."""
        self.relists = 0
        self.epoch = ""
        """The store's epoch when this reflector last listed."""
        self._resync = False
        self._watching: asyncio.Task[None] | None = None
        self.last_pause = 0.0
        self._latest: dict[str, str] = {}
        """Store key -> the resourceVersion of the newest event seen for it (retries of an
        older event are dropped)."""
        self._retries: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        try:
            while True:
                try:
                    if self.version and await self.sink.epoch() != self.epoch:
                        log.warning("%s: the store lost data (Redis epoch changed)", self.kind)
                        self.version = ""
                    if not self.version:
                        await self.relist()
                    await self._watch_until_resync()
                    self.retry.succeeded()
                except KubeApiError as e:
                    if e.code == 410:
                        log.info("%s watch expired (%s): listing again", self.kind, e.message)
                        self.version = ""
                        continue
                    if e.code == 404:
                        if self.version:  # its watch: the list tells whether it is served
                            self.version = ""
                            await asyncio.sleep(RETRY_SECONDS)
                        else:
                            await self._not_served(e)
                        continue
                    await self._pause(e, e.retry_after)
                except KubeUnavailableError as e:
                    await self._pause(e, None)
                except RedisError as e:
                    # The event being applied was not recorded as done (`version` moves only
                    # after it): the next watch starts before it and brings it again.
                    await self._pause(e, None)
        finally:
            for task in self._retries:
                task.cancel()

    async def _pause(self, error: Exception, retry_after: float | None) -> None:
        """The backoff's pause, but never shorter than the server's Retry-After."""
        pause = self.retry.failed(error)
        if retry_after is not None and retry_after > pause:
            log.info("%s: the server asks to retry after %.1fs", self.kind, retry_after)
            pause = retry_after
        self.last_pause = pause
        await asyncio.sleep(pause)

    def resync(self) -> None:
        """List again now (the store lost data): the current watch is ended."""
        self.version = ""
        self._resync = True
        if self._watching is not None:
            self._watching.cancel()

    async def _watch_until_resync(self) -> None:
        self._resync = False
        self._watching = asyncio.create_task(self.watch())
        try:
            await self._watching
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self._resync or (task is not None and task.cancelling()):
                raise
            log.warning("%s: listing again (the store lost data)", self.kind)
            self.version = ""
        finally:
            if not self._watching.done():
                self._watching.cancel()
                with contextlib.suppress(BaseException):
                    await self._watching
            self._watching = None

    async def _not_served(self, e: KubeApiError) -> None:
        if not self.absent:
            log.warning(
                "%s is not served by the API server (%s; is its CRD installed?): "
                "following none; checking again every %.0fs",
                self.kind,
                e.message,
                ABSENT_RECHECK_SECONDS,
            )
            self.absent = True
        gone = await self.sink.forget_missing(self.kind, [])
        if gone:
            log.info("%s: %d deleted from the store (the kind is not served)", self.kind, gone)
        self.retry.backoff.reset()
        self.synced.set()
        await asyncio.sleep(ABSENT_RECHECK_SECONDS)

    async def relist(self) -> None:
        epoch = await self.sink.epoch()
        items, version = await self.api.list(self.kind)
        if self.absent:
            log.warning("%s is served now: following it", self.kind)
            self.absent = False
        present: list[str] = []
        for body in items:
            key = key_of(self.kind, body)
            present.append(key)
            self._latest[key] = self._version_of(body)
        for body, answer in zip(items, await self.sink.put_many(self.kind, items), strict=True):
            if answer == "retry":
                self._retry_later(body)
        gone = await self.sink.forget_missing(self.kind, present)
        self.relists += 1
        log.info(
            "%s listed: %d objects at resourceVersion %s, %d deleted meanwhile",
            self.kind,
            len(items),
            version,
            gone,
        )
        self.version = version
        self.epoch = epoch
        self.synced.set()

    async def watch(self) -> None:
        """Follow the watch, applying its events in batches: what arrived while the last
        batch was written (up to WATCH_BATCH) goes to the store together, one record read
        and one apply script for a run of additions and updates, so a burst of pods reaches
        the store (and the queue) as one batch, not one write each. Deletions and BOOKMARKs
        keep their place in the order; `version` moves only after what precedes it is
        written."""
        events: asyncio.Queue[tuple[str, dict[str, Any]] | BaseException | None] = asyncio.Queue(
            maxsize=2 * WATCH_BATCH
        )

        async def read() -> None:
            try:
                async for event in self.api.watch(
                    self.kind, self.version, timeout_seconds=self.watch_timeout_seconds
                ):
                    await events.put(event)
                await events.put(None)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 (handed over in order, raised by the applier)
                await events.put(e)

        reader = asyncio.create_task(read(), name=f"adapter-watch-read-{self.kind}")
        try:
            while True:
                batch = [await events.get()]
                while len(batch) < WATCH_BATCH and not events.empty():
                    batch.append(events.get_nowait())
                if not await self._apply(batch):
                    return
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _apply(self, batch: list[tuple[str, dict[str, Any]] | BaseException | None]) -> bool:
        """Apply a batch of watch items in order; False once the stream ended."""
        run: list[tuple[str, dict[str, Any]]] = []
        for item in batch:
            if item is None or isinstance(item, BaseException):
                await self._flush(run)
                if item is None:
                    return False
                raise item
            self.retry.succeeded()
            event_type, body = item
            if event_type in ("ADDED", "MODIFIED"):
                run.append(item)
                continue
            await self._flush(run)
            version = self._version_of(body)
            if event_type == "BOOKMARK":
                self.version = version or self.version
                continue
            key = key_of(self.kind, body)
            self._latest[key] = version
            if event_type == "DELETED":
                await self.sink.delete(self.kind, body)
                del self._latest[key]  # a retry still pending for it stops
            else:
                log.warning("%s: ignoring a %r watch event", self.kind, event_type)
            self.version = version or self.version
        await self._flush(run)
        return True

    async def _flush(self, run: list[tuple[str, dict[str, Any]]]) -> None:
        """Put a run of additions and updates; the last event of an object wins."""
        if not run:
            return
        last: dict[str, dict[str, Any]] = {}
        for _, body in run:
            key = key_of(self.kind, body)
            self._latest[key] = self._version_of(body)
            last.pop(key, None)
            last[key] = body
        bodies = list(last.values())
        for body, answer in zip(bodies, await self.sink.put_batch(self.kind, bodies), strict=True):
            if answer == "retry":
                self._retry_later(body)
        self.version = self._version_of(run[-1][1]) or self.version
        run.clear()

    def _retry_later(self, body: dict[str, Any]) -> None:
        task = asyncio.create_task(self._retry(body))
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    async def _retry(self, body: dict[str, Any]) -> None:
        key, version = key_of(self.kind, body), self._version_of(body)
        backoff = Backoff(initial=RETRY_SECONDS, maximum=RETRY_MAX_SECONDS)
        while self._latest.get(key) == version:
            await asyncio.sleep(backoff.next())
            if self._latest.get(key) != version:
                return
            with contextlib.suppress(KubeApiError, KubeUnavailableError):
                if await self.sink.put(self.kind, body) != "retry":
                    return

    @staticmethod
    def _version_of(body: dict[str, Any]) -> str:
        return str((body.get("metadata") or {}).get("resourceVersion") or "")
