"""Small Kafka helpers for the pipeline tests: read a whole topic, publish schedule requests."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer

from shared.messaging.kafka import assign_all, make_producer
from shared.messaging.messages import ScheduleBatch, ScheduleRequest
from shared.models import Pod, encode, priority_of

FAST_GROUP = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 300}
"""Consumer options for tests: group failover in ~2 s (~1.5 x session_timeout_ms)."""

T = TypeVar("T")


def schedule_request(pod: Pod, attempt: int = 1, tenant: str = "") -> ScheduleRequest:
    now = time.time()
    return ScheduleRequest(
        tenant=tenant or pod.metadata.namespace,
        pod_key=pod.key,
        uid=pod.metadata.uid,
        attempt=attempt,
        scheduling_cycle=attempt,
        priority=priority_of(pod),
        timestamp=now,
        initial_attempt_timestamp=now,
        lease_expires_at=now + 30,
        nominated_node_name=pod.status.nominated_node_name,
        pod=encode(pod),
    )


async def publish(bootstrap: str, topic: str, items: Sequence[tuple[bytes, bytes]]) -> None:
    producer = make_producer(bootstrap)
    await producer.start()
    try:
        for key, value in items:
            await producer.send(topic, value=value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def publish_requests(bootstrap: str, topic: str, *requests: ScheduleRequest) -> None:
    batch = ScheduleBatch(tuple(requests))
    await publish(bootstrap, topic, [(requests[0].uid.encode(), batch.encode())])


class TopicReader:
    """Reads every message of a topic from the beginning (no group); `decode` gives a
    record's messages (a batch record holds several)."""

    def __init__(self, bootstrap: str, topic: str, decode: Callable[[bytes], list[T]]) -> None:
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
        )
        self._topic = topic
        self._decode: Callable[[bytes], list[Any]] = decode
        self.items: list[Any] = []
        self.records = 0
        """Records read (a batch record holds several items)."""

    async def start(self) -> None:
        await self._consumer.start()
        try:
            await self._assign()
        except BaseException:
            await self._consumer.stop()
            raise

    async def _assign(self) -> None:
        assigned = await assign_all(self._consumer, [self._topic])
        await self._consumer.seek_to_beginning(*assigned)

    async def stop(self) -> None:
        await self._consumer.stop()

    async def until(
        self, predicate: Callable[[list[Any]], bool], seconds: float = 20.0
    ) -> list[Any]:
        """Read until `predicate(items)` holds; TimeoutError otherwise."""
        deadline = time.monotonic() + seconds
        while not predicate(self.items):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self._topic}: {len(self.items)} items, condition unmet")
            batches = await self._consumer.getmany(timeout_ms=100)
            for records in batches.values():
                for record in records:
                    self.records += 1
                    self.items.extend(self._decode(record.value))
        return self.items
