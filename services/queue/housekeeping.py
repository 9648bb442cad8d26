"""The queue's timers: backoff flush, the unschedulable leftover flush, lease expiry and (with
waitForPodsReady) the quota readiness tick.

Each runs on its own interval until the replica stops; a failed round is retried with backoff
(and logged by `Retry`), a round that moved pods wakes the dispatch loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from services.queue.config import QueueConfig
from services.queue.store import MoveResult, QueueStore
from shared.observability.metrics import BerthMetrics
from shared.runtime.retry import Retry

log = logging.getLogger("berth.queue")

READY_TICK_SECONDS = 1.0
"""How often waitForPodsReady's timeouts and backoffs are looked at with no cluster change."""


def count_incoming(prom: BerthMetrics, moved: MoveResult, event: str) -> None:
    """scheduler_queue_incoming_pods_total for pods a move sent to active or backoff."""
    if moved.to_active:
        prom.incoming_pods.labels(queue="active", event=event).inc(moved.to_active)
    if moved.to_backoff:
        prom.incoming_pods.labels(queue="backoff", event=event).inc(moved.to_backoff)


class Housekeeping:
    """The periodic moves of one queue replica (it shares the replica's counters and events)."""

    def __init__(
        self,
        store: QueueStore,
        config: QueueConfig,
        counts: Counter[str],
        prom: BerthMetrics,
        *,
        stopping: asyncio.Event,
        work: asyncio.Event,
        quota_tick: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.counts = counts
        self.prom = prom
        self._stopping = stopping
        self._work = work
        self._quota_tick = quota_tick
        """A quota round when waitForPodsReady has something due (None: not configured)."""

    def loops(self) -> dict[str, Coroutine[Any, Any, None]]:
        """Task name -> the loop to run, one per timer."""
        loops = {
            "queue-flush-backoff": self._every(
                self.config.backoff_flush_interval, self.flush_backoff
            ),
            "queue-flush-leftover": self._every(
                self.config.leftover_flush_interval, self.flush_leftover
            ),
            "queue-leases": self._every(self.config.lease_check_interval, self.expire_leases),
        }
        if self._quota_tick is not None:
            loops["queue-quota-ready"] = self._every(READY_TICK_SECONDS, self._quota_tick)
        return loops

    async def _every(self, interval: float, action: Callable[[], Awaitable[int]]) -> None:
        retry = Retry(f"queue: periodic {getattr(action, '__name__', action)}", log)
        pause = interval
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            if self._stopping.is_set():
                return
            try:
                if await action():
                    self._work.set()
                retry.succeeded()
                pause = interval
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                pause = max(interval, retry.failed(exc))

    async def flush_backoff(self) -> int:
        moved = await self.store.flush_backoff_completed()
        self.counts["backoff_completed"] += moved
        if moved:
            self.prom.incoming_pods.labels(queue="active", event="BackoffComplete").inc(moved)
        return moved

    async def flush_leftover(self) -> int:
        result = await self.store.flush_unschedulable_leftover()
        self.counts["unschedulable_timeout"] += result.moved
        count_incoming(self.prom, result, "UnschedulableTimeout")
        return result.moved

    async def expire_leases(self) -> int:
        expired = await self.store.expire_leases()
        self.counts["redispatched"] += expired
        if expired:
            self.prom.expired_leases.inc(expired)
        return expired
