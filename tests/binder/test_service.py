"""The binder service end to end on the real broker (Tansu, or Kafka) and Redis: proposals in,
outcomes out, bindings in the store, garbage to the dead-letter topic, offsets committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import murmur2

from services.binder.service import Arrival, BinderService, OffsetTracker, in_decision_order
from shared.messaging.kafka import (
    DEFAULT_PARTITIONS,
    Topics,
    ensure_topics,
    make_consumer,
    make_producer,
)
from shared.messaging.messages import DeadLetter, Outcome
from shared.messaging.proposals import Proposal
from shared.messaging.wire import pack_batch
from shared.models import POD_GROUP_LABEL, Pod
from shared.store import NodeUsage
from tests.binder.conftest import make_config, proposal
from tests.builders import label_selector, make_node, make_pod, make_pod_group


@pytest.fixture
async def service(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
) -> AsyncIterator[BinderService]:
    config = make_config(
        redis_prefix,
        topics=topics,
        group_id=group_id,
        commit_interval_seconds=0.05,
        consumer_options={"session_timeout_ms": 6000, "heartbeat_interval_ms": 300},
    )
    svc = BinderService(redis_client, kafka_bootstrap, config)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


async def publish(bootstrap: str, topic: str, messages: Sequence[tuple[bytes, bytes]]) -> None:
    producer = make_producer(bootstrap)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send(topic, value=value, key=key)
        await producer.flush()
    finally:
        await producer.stop()


async def publish_proposals(bootstrap: str, topics: Topics, proposals: Sequence[Proposal]) -> None:
    await publish(
        bootstrap, topics.proposals, [(p.node_name.encode(), p.encode()) for p in proposals]
    )


async def read(bootstrap: str, topic: str, count: int, seconds: float = 20) -> list[bytes]:
    """The first `count` messages of `topic` (all partitions)."""
    consumer = make_consumer(bootstrap, [topic], f"reader-{topic}")
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(seconds):
            while len(values) < count:
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    values.extend(r.value for r in records)
    finally:
        await consumer.stop()
    return values


ZONE = "topology.kubernetes.io/zone"


async def read_outcomes(
    bootstrap: str, topic: str, count: int, seconds: float = 20
) -> list[Outcome]:
    """The first `count` outcomes of `topic`: the binder batches them, several per record."""
    consumer = make_consumer(bootstrap, [topic], f"reader-{topic}")
    await consumer.start()
    outcomes: list[Outcome] = []
    try:
        async with asyncio.timeout(seconds):
            while len(outcomes) < count:
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    for record in records:
                        outcomes.extend(Outcome.decode_all(record.value))
    finally:
        await consumer.stop()
    return outcomes


def finals(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.result != "extend"]


async def test_binds_proposals_from_kafka(service: BinderService, kafka_bootstrap: str):
    topics = service.config.topics
    pods = [make_pod(f"p{i}").req(cpu="1").obj() for i in range(12)]
    cluster = [make_node(f"n{i}").capacity(cpu="3", pods=10).obj() for i in range(2)]
    await service.store.apply([*cluster, *pods])
    proposals = [proposal(p, f"n{i % 2}") for i, p in enumerate(pods)]
    await publish_proposals(kafka_bootstrap, topics, proposals)
    outcomes = finals(await read_outcomes(kafka_bootstrap, topics.outcomes, 12))
    assert sorted(o.result for o in outcomes) == ["conflict"] * 6 + ["scheduled"] * 6
    assert {(o.uid, o.attempt) for o in outcomes} == {(p.metadata.uid, 1) for p in pods}
    for i in range(2):
        assert await service.store.usage(f"n{i}") == NodeUsage(3, {"cpu": 3000})
    # The bindings are facts in the store (the queue reads them from its change stream).
    stored = {p.key: p.spec.node_name for p in cast(list[Pod], await service.store.list("Pod"))}
    bound = sorted(key for key, node in stored.items() if node)
    assert bound == sorted(o.pod_key for o in outcomes if o.result == "scheduled")


async def test_a_bad_proposal_of_a_batch_is_dead_lettered_alone(
    service: BinderService, kafka_bootstrap: str
):
    """Workers send a batch per partition: a forged or broken item goes to the dead letters
    by itself (its own bytes, replayable alone) and the record's other proposals bind; the
    record's offset is committed once all of them are done."""
    topics = service.config.topics
    pods = [make_pod(f"p{i}").req(cpu="1").obj() for i in range(3)]
    await service.store.apply([make_node("n1").capacity(cpu="4", pods=10).obj(), *pods])
    bodies = [proposal(p, "n1").to_body() for p in pods]
    bodies[1]["node"] = "Not A Node"
    await publish(kafka_bootstrap, topics.proposals, [(b"n1", pack_batch("proposals", bodies))])
    outcomes = finals(await read_outcomes(kafka_bootstrap, topics.outcomes, 2))
    assert sorted((o.pod_key, o.result) for o in outcomes) == [
        ("default/p0", "scheduled"),
        ("default/p2", "scheduled"),
    ]
    (letter,) = [DeadLetter.decode(v) for v in await read(kafka_bootstrap, topics.dlq, 1)]
    assert "field 'node'" in letter.error
    (alone,) = Proposal.items_of(letter.payload)
    assert alone.body["key"] == "default/p1"
    assert (letter.offset, service.dead_letters) == (0, 1)
    committed = 0
    async with asyncio.timeout(10):
        while committed != 1:  # one record: offset 0 done, so 1 is committed
            await asyncio.sleep(0.05)
            committed = await _committed(service)


async def _committed(service: BinderService) -> int:
    """The sum of the binder group's committed offsets on the proposals topic."""
    consumer = service._consumer
    assert consumer is not None
    total = 0
    for tp in consumer.assignment():
        total += await consumer.committed(tp) or 0
    return total


async def test_garbage_goes_to_the_dead_letter_topic(service: BinderService, kafka_bootstrap: str):
    topics = service.config.topics
    pod = make_pod("p").obj()
    await service.store.apply([make_node("n1").capacity(pods=10).obj(), pod])
    wrong_type = Outcome("t", "default/p", "u", 1, "scheduled").encode()
    await publish(
        kafka_bootstrap,
        topics.proposals,
        [(b"n1", b"\xc1 not msgpack"), (b"n1", wrong_type), (b"n1", proposal(pod, "n1").encode())],
    )
    letters = [DeadLetter.decode(v) for v in await read(kafka_bootstrap, topics.dlq, 2)]
    assert [(d.service, d.topic, d.key, d.offset) for d in letters] == [
        ("binder", topics.proposals, b"n1", 0),
        ("binder", topics.proposals, b"n1", 1),
    ]
    assert "undecodable" in letters[0].error
    assert "expected a message of type 'proposal' or 'proposals', got 'outcome'" in letters[1].error
    assert letters[1].payload == wrong_type
    (outcome,) = finals(await read_outcomes(kafka_bootstrap, topics.outcomes, 1))
    assert outcome.result == "scheduled"
    assert service.dead_letters == 2


async def test_duplicate_messages_bind_once(service: BinderService, kafka_bootstrap: str):
    topics = service.config.topics
    pod = make_pod("p").req(cpu="1").obj()
    await service.store.apply([make_node("n1").capacity(cpu="4", pods=10).obj(), pod])
    message = proposal(pod, "n1", 3)
    await publish_proposals(kafka_bootstrap, topics, [message, message, proposal(pod, "n1", 2)])
    await read_outcomes(kafka_bootstrap, topics.outcomes, 1)
    await asyncio.sleep(0.5)
    outcomes = finals(await read_outcomes(kafka_bootstrap, topics.outcomes, 1, seconds=2))
    assert {(o.result, o.node_name, o.attempt) for o in outcomes} == {("scheduled", "n1", 3)}
    assert await service.store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    stored = await service.store.get_pod("default", "p")
    assert stored is not None
    assert stored.spec.node_name == "n1"


async def test_gang_through_kafka(service: BinderService, kafka_bootstrap: str):
    topics = service.config.topics
    members = [make_pod(f"m{i}").label(POD_GROUP_LABEL, "g").req(cpu="1").obj() for i in range(3)]
    cluster = [make_node(f"n{i}").capacity(cpu="2", pods=10).obj() for i in range(3)]
    await service.store.apply([*cluster, make_pod_group("g", 3), *members])
    await publish_proposals(
        kafka_bootstrap, topics, [proposal(m, f"n{i}") for i, m in enumerate(members)]
    )
    values = await read_outcomes(kafka_bootstrap, topics.outcomes, 5)  # 2 extends + 3 scheduled
    assert sorted(o.result for o in values) == [
        "extend",
        "extend",
        "scheduled",
        "scheduled",
        "scheduled",
    ]


async def test_offsets_are_committed_after_processing(
    service: BinderService, kafka_bootstrap: str, group_id: str
):
    topics = service.config.topics
    pods = [make_pod(f"p{i}").obj() for i in range(5)]
    await service.store.apply([make_node("n1").capacity(pods=10).obj(), *pods])
    await publish_proposals(kafka_bootstrap, topics, [proposal(p, "n1") for p in pods])
    await read_outcomes(kafka_bootstrap, topics.outcomes, 5)
    probe = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group_id)
    await probe.start()
    try:
        committed: dict[int, Any] = {}
        async with asyncio.timeout(10):
            while sum(v or 0 for v in committed.values()) < 5:
                await asyncio.sleep(0.1)
                for partition in probe.partitions_for_topic(topics.proposals) or ():
                    tp = TopicPartition(topics.proposals, partition)
                    committed[partition] = await probe.committed(tp)
        assert sum(v or 0 for v in committed.values()) == 5
    finally:
        await probe.stop()


def test_offset_tracker_commits_below_the_lowest_unfinished():
    tracker = OffsetTracker()
    tp = TopicPartition("t", 0)
    for offset in (5, 6, 7):
        tracker.started(tp, offset)
    tracker.finished(tp, 6)
    assert tracker.committable() == {tp: 5}
    tracker.finished(tp, 5)
    assert tracker.committable() == {tp: 7}
    tracker.mark_committed({tp: 7})
    assert tracker.committable() == {}
    tracker.finished(tp, 7)
    assert tracker.committable() == {tp: 8}
    tracker.forget([tp])
    assert tracker.committable() == {}


def test_offset_tracker_waits_for_every_proposal_of_a_batch_record():
    tracker = OffsetTracker()
    tp = TopicPartition("t", 0)
    tracker.started(tp, 3, items=3)
    tracker.started(tp, 4)
    tracker.finished(tp, 4)
    tracker.finished(tp, 3)
    tracker.finished(tp, 3)
    assert tracker.committable() == {tp: 3}
    tracker.finished(tp, 3)
    assert tracker.committable() == {tp: 5}
    tracker.started(tp, 5, items=0)  # dead-lettered whole: nothing to wait for
    assert tracker.committable() == {tp: 6}


def partition_of(key: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """aiokafka's default partitioner."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def zone_nodes(zones: Sequence[str], per_zone: int) -> dict[str, list[str]]:
    """Node names per zone: a zone's nodes share a partition, no two zones do."""
    out: dict[str, list[str]] = {}
    used: set[int] = set()
    for zone in zones:
        candidates = [f"{zone}{i}" for i in range(1000)]
        partition = next(partition_of(c) for c in candidates if partition_of(c) not in used)
        used.add(partition)
        out[zone] = [c for c in candidates if partition_of(c) == partition][:per_zone]
    return out


async def test_proposals_are_checked_in_the_order_the_worker_decided_them(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
):
    """A worker spread 12 pods over three zones round-robin (maxSkew 1), each on a node of
    its own: each proposal is valid counting the ones before it. A zone's nodes share a
    partition; checked partition by partition (the 4 pods of zone a first), most would
    conflict."""
    zones = ("a", "b", "c")
    names = zone_nodes(zones, 4)
    cluster = [
        make_node(name).capacity(cpu="16", pods=50).label(ZONE, zone).obj()
        for zone in zones
        for name in names[zone]
    ]
    selector = label_selector({"app": "web"})
    pods = [
        make_pod(f"web-{i:02}")
        .label("app", "web")
        .spread_constraint(1, ZONE, "DoNotSchedule", selector)
        .obj()
        for i in range(12)
    ]
    config = make_config(
        redis_prefix,
        topics=topics,
        group_id=group_id,
        consumer_options={"session_timeout_ms": 6000, "heartbeat_interval_ms": 300},
    )
    service = BinderService(redis_client, kafka_bootstrap, config)
    await service.store.apply([*cluster, *pods])
    await ensure_topics(kafka_bootstrap, [topics.proposals, topics.outcomes])
    decided = [
        proposal(pod, names[zones[i % 3]][i // 3], sequence=i + 1) for i, pod in enumerate(pods)
    ]
    await publish_proposals(kafka_bootstrap, topics, decided)  # before the binder reads
    await service.start()
    try:
        outcomes = finals(await read_outcomes(kafka_bootstrap, topics.outcomes, 12))
    finally:
        await service.stop()
    assert [o.result for o in outcomes] == ["scheduled"] * 12


def arrival(partition: int, offset: int, timestamp: int, sequence: int) -> Arrival:
    p = Proposal("t", f"default/p{partition}-{offset}", "u", 1, "n", sequence=sequence)
    return Arrival(TopicPartition("t", partition), offset, timestamp, p, [])


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        pytest.param(
            [[(0, 10, 1), (1, 12, 3)], [(0, 11, 2), (1, 12, 4)]],
            [(0, 0), (1, 0), (0, 1), (1, 1)],
            id="by-timestamp-then-sequence",
        ),
        pytest.param(
            [[(0, 5, 9), (1, 5, 10)], [(0, 5, 1)]],
            [(1, 0), (0, 0), (0, 1)],
            id="sequence-breaks-ties",
        ),
        pytest.param(
            [[(0, 20, 2), (1, 10, 1)]],
            [(0, 0), (0, 1)],
            id="a-partition-keeps-its-order",
        ),
    ],
)
def test_in_decision_order(runs, expected):
    """runs: per partition, (offset, timestamp, sequence); expected: (partition, offset)."""
    arrivals = [
        [arrival(partition, offset, ts, seq) for offset, ts, seq in run]
        for partition, run in enumerate(runs)
    ]
    merged = in_decision_order(arrivals)
    assert [(a.tp.partition, a.offset) for a in merged] == expected
