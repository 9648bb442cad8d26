"""The binding feed of /api/stats: schedule requests (each pod's first-enqueue time) and
"scheduled" outcomes (when it was bound: the record's timestamp) read from the broker, outside
any consumer group, into a shared.observability.stats.BindingLog.

On start it seeks both topics to `lookback` seconds ago (ListOffsets by timestamp; a broker
that cannot answer that is read from the beginning, records older than the lookback skipped),
so a dashboard that starts late still shows the last minute."""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from shared.messaging.kafka import Topics, assign_all, make_reader, message_verifier, refusal
from shared.messaging.messages import Outcome, ScheduleBatch
from shared.messaging.wire import MessageError
from shared.observability.stats import DEFAULT_HORIZON_SECONDS, BindingLog
from shared.runtime.retry import Backoff, Retry
from shared.runtime.security import KafkaSecurity
from shared.runtime.tasks import finish

log = logging.getLogger(__name__)


class BindingFeed:
    def __init__(
        self,
        bootstrap: str,
        topics: Topics,
        security: KafkaSecurity | None = None,
        *,
        lookback: float = DEFAULT_HORIZON_SECONDS,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.security = security
        self.verifier = message_verifier(security, topics)
        """Messages without a valid authenticator do not count (None: none checked)."""
        self.lookback = lookback
        self.log = BindingLog(since=time.time())
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._skip_before_ms = 0

    async def start(self) -> None:
        consumer = make_reader(
            self.bootstrap, security=self.security, max_partition_fetch_bytes=16 * 1024 * 1024
        )
        await consumer.start()
        try:
            assigned = await assign_all(consumer, [self.topics.schedule, self.topics.outcomes])
            start_ms = int((time.time() - self.lookback) * 1000)
            self._skip_before_ms = start_ms
            try:
                offsets = await consumer.offsets_for_times(dict.fromkeys(assigned, start_ms))
            except (KafkaError, ValueError) as exc:
                log.info("offsets by time unavailable (%s): reading from the beginning", exc)
                await consumer.seek_to_beginning(*assigned)
            else:
                for tp, found in offsets.items():
                    if found is None:
                        await consumer.seek_to_end(tp)
                    else:
                        consumer.seek(tp, found.offset)
        except BaseException:
            await consumer.stop()
            raise
        self.log.since = start_ms / 1000
        self._consumer = consumer
        self._task = asyncio.create_task(self._read(), name="dashboard-binding-feed")

    async def _read(self) -> None:
        assert self._consumer is not None
        retry = Retry("dashboard: reading the binding feed", log, Backoff(initial=0.5, maximum=5.0))
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=500, max_records=20_000)
                retry.succeeded()
            except KafkaError as exc:
                await retry.pause(exc)
                continue
            for tp, records in batches.items():
                for record in records:
                    if record.timestamp < self._skip_before_ms or record.value is None:
                        continue
                    if refusal(self.verifier, record):
                        continue  # forged: the queue dead-letters it, the feed ignores it
                    try:
                        if tp.topic == self.topics.schedule:
                            for request in ScheduleBatch.decode(record.value).requests:
                                self.log.enqueued(request.uid, request.initial_attempt_timestamp)
                        else:
                            for outcome in Outcome.decode_all(record.value, lenient=True):
                                if outcome.result == "scheduled":
                                    self.log.bound(outcome.uid, record.timestamp / 1000)
                    except MessageError:
                        continue
            self.log.prune(time.time())

    async def stop(self) -> None:
        if self._task is not None:
            await finish(self._task, 0.0)  # it only waits on the broker: cancel at once
        if self._consumer is not None:
            await self._consumer.stop()
