"""When quota admission runs a round: after store events (at most every quota_round_interval;
events that come faster wait for one deferred round), and, with waitForPodsReady, on a tick
when a timeout or a backoff comes due in a quiet cluster. A round writes every waiting pod's
reason at most every quota_reasons_interval: one that did not leaves a round for later
(`reasons_due`), so the last reasons written are the current ones once the cluster is quiet.
One thing at a time: the store events of a batch and a round never interleave (`lock`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from services.queue.config import QueueConfig
from services.queue.quota.admission import Admission
from services.queue.quota.workload import Verdict
from shared.runtime.retry import Retry

log = logging.getLogger("berth.queue")


class QuotaRounds:
    """Runs `admission`'s rounds and hands each verdict to `settle` (ungate, then explain
    and write the reasons)."""

    def __init__(
        self,
        admission: Admission,
        config: QueueConfig,
        settle: Callable[[Verdict], Awaitable[None]],
    ) -> None:
        self.admission = admission
        self.config = config
        self._settle = settle
        self.lock = asyncio.Lock()
        """Held by the service while it applies a batch of store events, and by every round."""
        self.rounds = 0
        self._last_round = 0.0
        self._last_tick = time.time()
        self._deferred: asyncio.Task[None] | None = None
        self._reasons: asyncio.Task[None] | None = None
        """The round that writes the reasons when they are due (`_reasons_later`)."""

    async def after_events(self) -> None:
        """Under `lock`, after a batch: a round now, or one deferred to the interval's end."""
        if not self.admission.dirty:
            return
        wait = self._last_round + self.config.quota_round_interval - time.monotonic()
        if wait <= 0:
            await self._round()
        elif self._deferred is None:
            self._deferred = asyncio.create_task(self._later(wait), name="queue-quota-round")

    async def tick(self) -> int:
        """A round when waitForPodsReady has work with no cluster change: a workload waiting
        for its pods (the round times it out) or a backoff that ran out (the round may admit
        it again). Returns 1 when a round ran."""
        now = time.time()
        due = self.admission.readiness.due(self.admission.admitted, self._last_tick, now)
        self._last_tick = now
        if not (due or self.admission.dirty):
            return 0
        async with self.lock:
            await self._round()
        return 1

    async def stop(self) -> None:
        for task in (self._deferred, self._reasons):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._deferred = self._reasons = None

    async def _round(self) -> None:
        self._last_round = time.monotonic()
        # `settle` ungates the admitted pods before the reasons are worked out
        # (`Admission.explain`, O(backlog)): their quota is held from admission on.
        await self._settle(await self.admission.admit_pods())
        self.rounds += 1
        self._reasons_later()

    def _reasons_later(self) -> None:
        """A round when the reasons are due, if the last round did not write them."""
        due = self.admission.reasons_due()
        if due is not None and self._reasons is None:
            wait = max(0.0, due - time.monotonic())
            self._reasons = asyncio.create_task(self._reasons_round(wait), name="queue-reasons")

    async def _reasons_round(self, wait: float) -> None:
        try:
            await asyncio.sleep(wait)
            async with self.lock:
                if self.admission.stale:
                    try:
                        await self._round()
                    except (RedisError, OSError) as exc:  # the next round writes them
                        log.warning("queue: quota reasons round failed: %s", exc)
        finally:
            self._reasons = None
        self._reasons_later()

    async def _later(self, wait: float) -> None:
        """The round that events deferred; Redis trouble is retried, with backoff, until a
        round goes through."""
        retry = Retry("queue: deferred quota round", log)
        try:
            while True:
                await asyncio.sleep(wait)
                async with self.lock:
                    try:
                        if self.admission.dirty:
                            await self._round()
                        break
                    except (RedisError, OSError) as exc:
                        wait = retry.failed(exc)
        finally:
            # Also after a bug (logged by the task's exception handler): the next event
            # defers a new round instead of waiting on this one forever.
            self._deferred = None
        # No wake-up of the dispatcher here: `settle` wakes it when the round admitted pods;
        # one that admitted none has nothing for it (the wake-up made an empty pop round).
