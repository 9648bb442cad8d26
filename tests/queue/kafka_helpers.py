"""Kafka helpers for queue service tests: produce messages, read a topic from the start."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from shared.messaging.kafka import make_producer
from shared.messaging.message_auth import Signer
from shared.messaging.messages import DeadLetter, ScheduleBatch, ScheduleRequest, decode_message

# Fast group failover for tests (~1.5 x session_timeout_ms).
CONSUMER_OPTIONS = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 300}


async def produce(
    bootstrap: str,
    topic: str,
    messages: Sequence[tuple[bytes | None, bytes]],
    signer: Signer | None = None,
) -> None:
    """Send `messages`, each with `signer`'s authenticator when one is given."""
    producer = make_producer(bootstrap, linger_ms=5, signer=signer)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send(topic, value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


class TopicReader:
    """Reads every partition of a topic from offset 0 (no consumer group)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        self.values: list[bytes] = []

    async def __aenter__(self) -> TopicReader:
        await self.consumer.start()
        partitions = self.consumer.partitions_for_topic(self.topic)
        for _ in range(50):
            if partitions:
                break
            await asyncio.sleep(0.1)
            await self.consumer.topics()
            partitions = self.consumer.partitions_for_topic(self.topic)
        assert partitions, f"topic {self.topic} has no partitions"
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(tps)
        await self.consumer.seek_to_beginning(*tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self) -> None:
        fetched = await self.consumer.getmany(timeout_ms=50)
        for records in fetched.values():
            self.values.extend(r.value for r in records if r.value is not None)

    async def wait_until(self, done: Callable[[], bool], within: float = 20.0) -> None:
        deadline = time.monotonic() + within
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out reading {self.topic}: {len(self.values)} messages")
            await self.poll()

    def requests(self) -> list[ScheduleRequest]:
        out: list[ScheduleRequest] = []
        for value in self.values:
            out.extend(ScheduleBatch.decode(value).requests)
        return out

    def dead_letters(self) -> list[DeadLetter]:
        letters = [decode_message(v) for v in self.values]
        return [m for m in letters if isinstance(m, DeadLetter)]
