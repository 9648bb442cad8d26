"""The scheduler worker on real Redis and Kafka, without the queue or the binder: schedule
requests are published by hand, proposals and outcomes read back from their topics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from services.scheduler import SchedulerWorker, WorkerConfig, read_heartbeats
from shared.messaging.kafka import Topics
from shared.messaging.messages import Outcome, ScheduleBatch
from shared.messaging.proposals import Proposal
from shared.models import Node
from shared.observability.health import HealthServer
from shared.store import ClusterStore, StoreKeys
from tests.builders import make_node, make_pod
from tests.pipeline.kafka_tools import (
    FAST_GROUP,
    TopicReader,
    publish,
    publish_requests,
    schedule_request,
)


def _node(name: str, cpu: str = "4") -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).obj()


@dataclass
class Rig:
    store: ClusterStore
    worker: SchedulerWorker
    proposals: TopicReader
    outcomes: TopicReader
    topics: Topics
    bootstrap: str


@pytest.fixture
async def rig(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    topics: Topics,
    group_id: str,
    kafka_bootstrap: str,
) -> AsyncIterator[Rig]:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    await store.apply([_node("big", "4"), _node("small", "1")])
    config = WorkerConfig(
        key_prefix=redis_prefix,
        topics=topics,
        group_id=group_id,
        seed=1,
        consumer_options=FAST_GROUP,
    )
    worker = SchedulerWorker(redis_client, kafka_bootstrap, config)
    await worker.start()
    proposals = TopicReader(kafka_bootstrap, topics.proposals, Proposal.decode_all)
    outcomes = TopicReader(kafka_bootstrap, topics.outcomes, Outcome.decode_all)
    await proposals.start()
    await outcomes.start()
    try:
        yield Rig(store, worker, proposals, outcomes, topics, kafka_bootstrap)
    finally:
        await proposals.stop()
        await outcomes.stop()
        await worker.stop()


async def test_one_pod_becomes_a_bind_proposal(rig: Rig) -> None:
    pod = make_pod("p").req(cpu="2").obj()
    await rig.store.apply([pod])
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(pod, attempt=3))
    (proposal,) = await rig.proposals.until(lambda items: len(items) >= 1)
    big = await rig.store.get("Node", "", "big")
    assert big is not None
    assert (proposal.kind, proposal.node_name, proposal.uid, proposal.attempt) == (
        "bind",
        "big",
        pod.metadata.uid,
        3,
    )
    assert proposal.node_resource_version == big.metadata.resource_version
    assert proposal.permit == "allow"
    assert rig.worker.view.assumed[pod.metadata.uid].node == "big"


async def test_no_fit_is_an_unschedulable_outcome(rig: Rig) -> None:
    pod = make_pod("huge").req(cpu="8").obj()
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(pod))
    (outcome,) = await rig.outcomes.until(lambda items: len(items) >= 1)
    assert (outcome.result, outcome.unschedulable_plugins) == (
        "unschedulable",
        ("NodeResourcesFit",),
    )
    assert outcome.message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


async def test_the_worker_never_conflicts_with_itself(rig: Rig) -> None:
    first, second = make_pod("a").req(cpu="3").obj(), make_pod("b").req(cpu="3").obj()
    await publish_requests(
        rig.bootstrap, rig.topics.schedule, schedule_request(first), schedule_request(second)
    )
    await rig.proposals.until(lambda items: len(items) >= 1)
    (outcome,) = await rig.outcomes.until(lambda items: len(items) >= 1)
    assert (outcome.pod_key, outcome.result) == ("default/b", "unschedulable")
    assert [p.pod_key for p in rig.proposals.items] == ["default/a"]


async def test_an_attempt_the_store_streams_as_ended_drops_the_assumption(rig: Rig) -> None:
    """The binder refused the proposal (the store recorded and streamed the attempt's end):
    the worker forgets its assumption from its view of the stream; an outcome message alone
    (the queue's, which workers do not read) changes nothing."""
    first, second = make_pod("a").req(cpu="3").obj(), make_pod("b").req(cpu="3").obj()
    await rig.store.apply([first, second])
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(first))
    await rig.proposals.until(lambda items: len(items) >= 1)
    conflict = Outcome("default", first.key, first.metadata.uid, 1, "conflict", message="x")
    await publish(rig.bootstrap, rig.topics.outcomes, [(b"k", conflict.encode())])
    await rig.outcomes.until(lambda items: len(items) >= 1)
    await asyncio.sleep(0.5)
    assert list(rig.worker.view.assumed) == [first.metadata.uid]
    claimed = await rig.store.bindings.claim(first.metadata.uid, 1, "c", first.key)
    assert claimed[0] == "ok"
    for _ in range(100):
        if not rig.worker.view.assumed:
            break
        await asyncio.sleep(0.05)
    assert rig.worker.view.assumed == {}
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(second))
    proposals = await rig.proposals.until(lambda items: len(items) >= 2)
    assert [(p.pod_key, p.node_name) for p in proposals] == [
        ("default/a", "big"),
        ("default/b", "big"),
    ]


async def test_a_pod_bound_meanwhile_is_reported_scheduled(rig: Rig) -> None:
    pod = make_pod("p").req(cpu="1").node("small").obj()
    await rig.store.apply([pod])
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(pod, attempt=2))
    (outcome,) = await rig.outcomes.until(lambda items: len(items) >= 1)
    assert (outcome.result, outcome.node_name, outcome.attempt) == ("scheduled", "small", 2)


async def test_nodes_added_after_start_are_seen_and_heartbeats_tell_the_position(
    rig: Rig, redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    await rig.store.apply([_node("late", "16")])
    pod = make_pod("p").req(cpu="8").obj()
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(pod))
    (proposal,) = await rig.proposals.until(lambda items: len(items) >= 1)
    assert proposal.node_name == "late"
    # An entry that is not a heartbeat (another version's, a stray write) is left out.
    await redis_client.hset(StoreKeys(redis_prefix, "default").workers, "stray", b"\x93junk")
    target = await rig.store.resource_version()
    for _ in range(200):
        beats = await read_heartbeats(redis_client, redis_prefix)
        beat = beats[rig.worker.config.worker_id]
        if beat.resource_version >= target and beat.proposals:
            break
        await asyncio.sleep(0.05)
    assert list(beats) == [rig.worker.config.worker_id]
    assert (beat.resource_version, beat.proposals, beat.pods) == (target, 1, 1)
    assert beat.nodes == len(rig.worker.view.nodes)


async def test_undecodable_messages_go_to_the_dead_letter_topic(rig: Rig) -> None:
    await publish(rig.bootstrap, rig.topics.schedule, [(b"k", b"\x93garbage")])
    pod = make_pod("p").obj()
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(pod))
    await rig.proposals.until(lambda items: len(items) >= 1)
    assert rig.worker.stats.dead_letters == 1


async def _http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # Connection: close, or an HTTP/1.1 server keeps the connection open and read() waits.
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode(errors="replace")
    writer.close()
    await writer.wait_closed()
    return int(response.split()[1]), response


async def test_run_serves_readiness_and_metrics(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    topics: Topics,
    group_id: str,
    kafka_bootstrap: str,
) -> None:
    config = WorkerConfig(
        key_prefix=redis_prefix, topics=topics, group_id=group_id, consumer_options=FAST_GROUP
    )
    health = HealthServer(port=0, host="127.0.0.1")
    await health.start()
    stop = asyncio.Event()
    worker = SchedulerWorker(redis_client, kafka_bootstrap, config)
    running = asyncio.create_task(worker.run(stop, health))
    try:
        for _ in range(200):
            if health.ready:
                break
            await asyncio.sleep(0.05)
        assert (await _http_get(health.port, "/readyz"))[0] == 200
        pod = make_pod("huge").req(cpu="64").obj()
        await publish_requests(kafka_bootstrap, topics.schedule, schedule_request(pod))
        for _ in range(200):
            if worker.stats.outcomes:
                break
            await asyncio.sleep(0.05)
        status, body = await _http_get(health.port, "/metrics")
        assert status == 200
        assert (
            'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"}'
            in body
        )
    finally:
        stop.set()
        await running
        await health.stop()
    assert not health.ready


async def test_stop_ends_the_stream_follower_without_cancelling_it(rig: Rig) -> None:
    """Cancelling a task blocked in redis-py's XREAD can hang it for good: the follower
    (and the heartbeat loop, which writes to Redis) are told to stop instead."""
    loops = {t.get_name(): t for t in rig.worker._tasks}
    follower, housekeeping = rig.worker.sync.task, loops["worker-housekeeping"]
    assert follower is not None
    assert follower.get_name() == "worker-follow"
    await asyncio.sleep(0.2)  # the follower is blocked in XREAD by now
    await asyncio.wait_for(rig.worker.stop(), 10)
    assert [follower.done(), housekeeping.done()] == [True, True]
    assert [follower.cancelled(), housekeeping.cancelled()] == [False, False]
    assert not rig.worker.failed.is_set()


async def test_a_reload_keeps_the_pods_the_worker_proposed(rig: Rig) -> None:
    """A trimmed stream makes the worker reload its snapshot: pods it proposed and that are
    not bound yet stay assumed, so it does not offer their room to the next pod."""
    first, second = make_pod("a").req(cpu="3").obj(), make_pod("b").req(cpu="3").obj()
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(first))
    await rig.proposals.until(lambda items: len(items) >= 1)
    assert rig.worker.sync.reload("test")
    for _ in range(200):
        if rig.worker.sync.reloads == 1:
            break
        await asyncio.sleep(0.02)
    assert rig.worker.sync.reloads == 1
    assert set(rig.worker.view.assumed) == {first.metadata.uid}
    await publish_requests(rig.bootstrap, rig.topics.schedule, schedule_request(second))
    (outcome,) = await rig.outcomes.until(lambda items: len(items) >= 1)
    assert (outcome.pod_key, outcome.result) == ("default/b", "unschedulable")
    assert [p.pod_key for p in rig.proposals.items] == ["default/a"]


async def test_a_batch_of_pods_is_proposed_in_decision_order(rig: Rig) -> None:
    """The proposals of one schedule batch leave together (a record per partition), each
    numbered in the order the worker decided it: the binder merges partitions by it."""
    pods = [make_pod(f"q{i}").req(cpu="500m").obj() for i in range(4)]
    await rig.store.apply(pods)
    await publish_requests(
        rig.bootstrap, rig.topics.schedule, *(schedule_request(p, attempt=1) for p in pods)
    )
    proposals = await rig.proposals.until(lambda items: len(items) >= 4)
    assert {p.pod_key: p.sequence for p in proposals} == {p.key: i + 1 for i, p in enumerate(pods)}
    assert rig.worker.stats.proposals == 4


async def test_small_schedule_records_of_one_fetch_are_proposed_together(rig: Rig) -> None:
    """Eight schedule records of one pod each (many tenants, a pod or two each), fetched
    together: their proposals leave in one record per proposals partition (two nodes: at
    most two), not one record per schedule record."""
    pods = [make_pod(f"s{i}").req(cpu="100m").obj() for i in range(8)]
    await rig.store.apply(pods)
    # One key: one partition, appended as one batch, so one fetch takes all eight.
    records = [(b"tenants", ScheduleBatch((schedule_request(p),)).encode()) for p in pods]
    await publish(rig.bootstrap, rig.topics.schedule, records)
    proposals = await rig.proposals.until(lambda items: len(items) >= 8)
    assert {p.pod_key for p in proposals} == {p.key for p in pods}
    assert rig.proposals.records <= 2
