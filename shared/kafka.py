"""Kafka topics and client defaults shared by the berth services (aiokafka).

Everything here works on the embedded Tansu broker and on Apache Kafka: no idempotent
producer, no transactions, consumer lag from `highwater` (Tansu's end_offsets is wrong).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError

# aiokafka headers: a list of (name, value) pairs.
Headers = list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Topics:
    """Topic names; tests use `suffixed()` so that each test has its own topics.

    Kafka carries work only: cluster facts (pods, nodes, PodGroups) travel once, on the
    store's change stream (shared.store), which the queue and the views follow."""

    schedule: str = "berth.schedule"
    """Schedule requests from the queue to the scheduler workers."""
    proposals: str = "berth.proposals"
    """Worker proposals to the binder, keyed by node name."""
    outcomes: str = "berth.outcomes"
    """Attempt outcomes back to the queue, keyed by pod uid."""
    dlq: str = "berth.dlq"
    """Messages that could not be decoded or were invalid, with the error."""

    def suffixed(self, suffix: str) -> Topics:
        return Topics(**{f.name: f"{getattr(self, f.name)}.{suffix}" for f in fields(self)})

    def all(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


DEFAULT_PARTITIONS = 8


async def ensure_topics(
    bootstrap: str,
    topics: Iterable[str] | Mapping[str, int],
    *,
    partitions: int = DEFAULT_PARTITIONS,
    attempts: int = 20,
) -> None:
    """Create the topics that do not exist yet (partition count per topic if a mapping)."""
    wanted = dict(topics) if isinstance(topics, Mapping) else dict.fromkeys(topics, partitions)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    for attempt in range(attempts):
        try:
            await admin.start()
            break
        except KafkaConnectionError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.1)
    try:
        existing = set(await admin.list_topics())
        missing = [
            NewTopic(name=name, num_partitions=count, replication_factor=1)
            for name, count in wanted.items()
            if name not in existing
        ]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another replica won the race
                await admin.create_topics(missing)
    finally:
        await admin.close()


def make_producer(bootstrap: str, **overrides: Any) -> AIOKafkaProducer:
    """A producer tuned for batched publishing (call `await producer.start()`)."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all",
        "linger_ms": 2,
        "max_batch_size": 512 * 1024,
        "max_request_size": 8 * 1024 * 1024,
        "request_timeout_ms": 15_000,
    }
    options.update(overrides)
    return AIOKafkaProducer(**options)


def make_consumer(
    bootstrap: str, topics: Sequence[str], group_id: str, **overrides: Any
) -> AIOKafkaConsumer:
    """A group consumer with manual commits (commit after processing: at-least-once)."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": 5000,
        "fetch_max_bytes": 64 * 1024 * 1024,
        "max_partition_fetch_bytes": 16 * 1024 * 1024,
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 1_000,
    }
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)


async def consumer_lag(consumer: AIOKafkaConsumer) -> int:
    """Messages not yet consumed over the assigned partitions (from highwater marks)."""
    total = 0
    for tp in consumer.assignment():
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        total += max(0, highwater - await consumer.position(tp))
    return total


async def assign_all(
    consumer: AIOKafkaConsumer, topics: Sequence[str], *, attempts: int = 100
) -> list[TopicPartition]:
    """Assign (no group) every partition of `topics` to a started consumer, waiting for their
    metadata; returns them (seek afterwards: to the beginning, or to the end)."""
    assigned: list[TopicPartition] = []
    for topic in topics:
        partitions = consumer.partitions_for_topic(topic)
        for _ in range(attempts):
            if partitions:
                break
            await consumer.topics()  # refreshes the cluster metadata
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                await asyncio.sleep(0.05)
        assigned += [TopicPartition(topic, p) for p in sorted(partitions or ())]
    consumer.assign(assigned)
    return assigned


FETCH_MAX_WAIT_MS = 20
"""How long a fetch may wait at the broker for records. The embedded broker answers a fetch
only when this runs out, not when a record arrives: at the client's default (500 ms) a
proposal waited ~130 ms (p50) before the binder saw it; at 20 ms, ~4 ms, for ~50 idle
fetches a second."""
