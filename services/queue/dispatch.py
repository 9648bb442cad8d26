"""The queue's dispatcher: pops leased pods per tenant, interleaves the tenants' batches by
weighted round-robin, and publishes them to `berth.schedule` in a window of unacknowledged
sends (a round popped ahead while the current one is published)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaProducer

from services.queue.config import QueueConfig
from services.queue.store import QueueStore
from services.queue.tenants import WeightedRoundRobin
from services.queue.wire import EncodedBatch
from shared.messaging.kafka import Headers
from shared.messaging.messages import ScheduleBatch
from shared.observability.tracing import tracing_enabled
from shared.runtime.retry import Retry

log = logging.getLogger(__name__)

HeadersHook = Callable[[ScheduleBatch, Mapping[str, float]], Headers]
"""A batch's trace headers, given when its pods were last put back (QueueReads.requeued_at)."""

# Publishes not yet acknowledged before the dispatcher waits for some of them (a window, not
# stop-and-wait: publishing goes on while the broker acknowledges earlier ones).
_MAX_OUTSTANDING = 64


@dataclass(slots=True)
class _Round:
    """One dispatch round: its messages in weighted round-robin order."""

    messages: list[EncodedBatch]
    pods: int
    full: bool = False
    """Some tenant gave all it was asked for: it may have more to pop at once."""


class Dispatcher:
    """Pops and publishes the queue's rounds; `producer` is set once the service started."""

    def __init__(
        self,
        store: QueueStore,
        config: QueueConfig,
        metrics: Counter[str],
        *,
        stopping: asyncio.Event,
        work: asyncio.Event,
        headers_hook: HeadersHook | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.metrics = metrics
        self.stopping = stopping
        self.work = work
        """Set when there may be pods to dispatch (the loop waits on it when idle)."""
        self.headers_hook = headers_hook
        self.producer: AIOKafkaProducer | None = None
        self._outstanding: set[asyncio.Future[Any]] = set()
        self._room = asyncio.Event()
        self._wrr = WeightedRoundRobin(config.weight)

    async def loop(self) -> None:
        # The next round is popped while this one is published, so Redis pops while Python
        # and the broker publish (in pop order: one loop publishes its rounds in sequence).
        prefetched: asyncio.Task[_Round] | None = None
        # Pods popped by a round that failed stay leased: they come back when it expires.
        retry = Retry("queue: dispatching", log)
        try:
            while not self.stopping.is_set():
                try:
                    popping, prefetched = prefetched, None
                    current = await (popping or self._popping())
                    if current.full and not self.stopping.is_set():
                        prefetched = asyncio.create_task(self._popping())
                    await self._publish_round(current)
                    retry.succeeded()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 (Retry logs it)
                    # A round popped ahead (if any) is published after the pause.
                    self.metrics["dispatch_errors"] += 1
                    await retry.pause(exc, self.stopping)
                    continue
                if prefetched is None:
                    # The round took every pod it could (none, or fewer than each tenant was
                    # asked for): the next pops once something may have changed that, i.e.
                    # `work` was set since the round began (`_popping`), at once if it was.
                    # A round popped ahead after every round with pods found only what was
                    # activated meanwhile: under quota admission, which lets pods in a few at
                    # a time, mostly nothing, for a command per known tenant.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.work.wait(), self.config.dispatch_idle_interval)
            if prefetched is not None:
                # Stopping: the pods it leased are published, not left to their leases.
                await self._publish_round(await prefetched)
                prefetched = None
        finally:
            if prefetched is not None:
                prefetched.cancel()
        await self.drain()

    async def dispatch_round(self) -> int:
        """Pop a WRR round across tenants and publish it; returns the pods dispatched."""
        current = await self._pop_round()
        await self._publish_round(current)
        return current.pods

    def _popping(self) -> Coroutine[Any, Any, _Round]:
        """A pop round; `work` is cleared as it begins, not after it came back empty: a
        pod activated while it ran (after Redis answered it) sets `work` again, and the
        loop pops once more instead of waiting dispatch_idle_interval for it. Clearing after
        an empty round lost that wake-up: with one loop (ordered mode) every time, with two
        when both were out popping. A set is only cleared by a pop that begins after it, and
        that pop reads what the activation before it wrote."""
        self.work.clear()
        return self._pop_round()

    async def _pop_round(self) -> _Round:
        self.metrics["pop_rounds"] += 1
        tenants = await self.store.tenants_to_pop()
        if not tenants:
            return _Round([], 0)
        wanted = [(t, self.config.dispatch_batch * self.config.weight(t)) for t in tenants]
        popped = await self.store.pop_batches(wanted, self.config.message_batch)
        batches = {
            tenant: messages
            for (tenant, _), messages in zip(wanted, popped, strict=True)
            if messages
        }
        counts = [sum(m.count for m in messages) for messages in popped]
        full = any(n >= want for (_, want), n in zip(wanted, counts, strict=True))
        return _Round([m for _, m in self._wrr.interleave(batches)], sum(counts), full)

    async def _publish_round(self, current: _Round) -> None:
        for message in current.messages:
            await self._publish(message)
        self.metrics["dispatched"] += current.pods

    async def _publish(self, message: EncodedBatch) -> None:
        assert self.producer is not None
        headers = None
        if self.headers_hook is not None:
            # The hook wants objects: only then is the payload decoded.
            batch = ScheduleBatch.decode(message.payload)
            retried = [r.pod_key for r in batch.requests if r.attempt > 1]
            requeued = (
                await self.store.requeued_at(message.tenant, retried)
                if retried and tracing_enabled()
                else {}
            )
            headers = self.headers_hook(batch, requeued)
        future = await self.producer.send(
            self.config.topics.schedule, message.payload, key=message.key, headers=headers
        )
        self._outstanding.add(future)
        future.add_done_callback(functools.partial(self._published, message.count))
        self.metrics["schedule_messages"] += 1
        while len(self._outstanding) > _MAX_OUTSTANDING:
            self._room.clear()
            await self._room.wait()

    def _published(self, count: int, future: asyncio.Future[Any]) -> None:
        self._outstanding.discard(future)
        if len(self._outstanding) <= _MAX_OUTSTANDING:
            self._room.set()
        if future.cancelled() or future.exception() is not None:
            # The pods stay leased: they come back when the lease expires.
            log.error(
                "queue: publish failed: %s", None if future.cancelled() else future.exception()
            )
            self.metrics["publish_errors"] += 1
        else:
            self.metrics["published"] += count

    async def drain(self) -> None:
        """Wait for every publish not yet acknowledged."""
        if self._outstanding:
            await asyncio.gather(*list(self._outstanding), return_exceptions=True)
