"""scheduler_unschedulable_pods{plugin, profile} from the queue's Redis state: right after
failures, moves, pops, deletions, conflicts, gates, with several profiles, and after a
restart (a new store and gauge read the same Redis)."""

from __future__ import annotations

from dataclasses import replace

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.hints import NODE_ADD
from services.queue.rejections import RejectionGauge, count_rejections
from services.queue.store import QueueStore
from shared.messaging.messages import OutcomeResult, ScheduleRequest
from shared.observability.metrics import BerthMetrics
from tests.queue.builders import outcome, record

T = "default"
FIT = "NodeResourcesFit"
PROFILE = "default-scheduler"


async def counts(store: QueueStore) -> dict[tuple[str, str], int]:
    found = await count_rejections(
        store.redis, store.keys, await store.tenants(), store.config.scheduler_names
    )
    return {labels: n for labels, n in found.items() if n}


async def fail(
    store: QueueStore,
    request: ScheduleRequest,
    *plugins: str,
    result: OutcomeResult = "unschedulable",
    **kw: object,
) -> str:
    [effect] = await store.record_outcomes([outcome(request, result, plugins, **kw)])
    return effect


async def test_parked_pods_count_for_each_plugin_that_rejected_them(store: QueueStore) -> None:
    await store.add([record("a"), record("b"), record("c")])
    a, b, c = await store.pop(T, 3)
    assert await fail(store, a, FIT) == "unschedulable"
    assert await fail(store, b, FIT) == "unschedulable"
    assert await fail(store, c, "NodeAffinity", FIT, pending_plugins=("DynamicResources",))
    assert await counts(store) == {
        (FIT, PROFILE): 3,
        ("NodeAffinity", PROFILE): 1,
        ("DynamicResources", PROFILE): 1,
    }


async def test_a_move_to_active_and_a_pop_leave_the_count(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("a"), record("b")])
    a, b = await store.pop(T, 2)
    await fail(store, a, FIT)
    clock.advance(5)  # a's backoff (1 s) is over, b's (1 s from now) is not
    await fail(store, b, FIT)
    moved = await store.move_all(NODE_ADD)
    assert (moved.to_active, moved.to_backoff) == (1, 1)
    # b backs off after its failure: upstream counts it until it is popped again.
    assert await counts(store) == {(FIT, PROFILE): 1}
    clock.advance(5)
    assert await store.flush_backoff_completed() == 1
    assert await counts(store) == {}
    assert len(await store.pop(T, 5)) == 2
    assert await counts(store) == {}


async def test_a_deleted_pod_leaves_the_count(store: QueueStore) -> None:
    await store.add([record("a"), rec_b := record("b")])
    a, b = await store.pop(T, 2)
    await fail(store, a, FIT)
    await fail(store, b, FIT, "TaintToleration")
    assert await counts(store) == {(FIT, PROFILE): 2, ("TaintToleration", PROFILE): 1}
    assert await store.delete([rec_b]) == 1
    assert await counts(store) == {(FIT, PROFILE): 1}


async def test_a_failure_after_a_move_request_backs_off_and_counts(store: QueueStore) -> None:
    await store.add([record("a")])
    [a] = await store.pop(T, 1)
    await store.move_all(NODE_ADD)  # a move request while `a` is in flight
    assert await fail(store, a, "NodePorts") == "backoff"
    assert await counts(store) == {("NodePorts", PROFILE): 1}


async def test_conflicts_count_for_no_plugin(store: QueueStore, clock: ManualClock) -> None:
    await store.add([record("a")])
    [a] = await store.pop(T, 1)
    assert await fail(store, a, FIT) == "unschedulable"
    clock.advance(5)  # past its backoff: the move sends it to active
    await store.move_all(NODE_ADD)
    [a] = await store.pop(T, 1)
    # The binder refused the node: back to active, then (a second time) to backoff.
    assert await fail(store, a, result="conflict") == "active"
    assert await counts(store) == {}
    [a] = await store.pop(T, 1)
    assert await fail(store, a, result="conflict") == "backoff"
    assert await counts(store) == {}


async def test_a_gated_pod_counts_for_its_gate(store: QueueStore) -> None:
    gated = record("g", gates=["example.com/wait"], uid="uid-g", rv=1)
    await store.add([gated, record("free")])
    assert await counts(store) == {("SchedulingGates", PROFILE): 1}
    await store.update([record("g", uid="uid-g", rv=2)])  # gates removed: to active
    assert await counts(store) == {}


async def test_each_profile_counts_its_own_pods(
    redis_client: aioredis.Redis, queue_config: QueueConfig, clock: ManualClock
) -> None:
    config = replace(queue_config, scheduler_names=frozenset({PROFILE, "batch"}))
    store = QueueStore(redis_client, config, clock)
    await store.add([record("a"), record("b", scheduler="batch"), record("c", scheduler="batch")])
    requests = await store.pop(T, 3)
    for request in requests:
        await fail(store, request, FIT)
    await store.add([record("g", scheduler="batch", gates=["x"])])
    assert await counts(store) == {
        (FIT, PROFILE): 1,
        (FIT, "batch"): 2,
        ("SchedulingGates", "batch"): 1,
    }


async def test_tenants_add_up(store: QueueStore) -> None:
    await store.add([record("a", "team-a"), record("b", "team-b")])
    for tenant in ("team-a", "team-b"):
        [request] = await store.pop(tenant, 1)
        await fail(store, request, FIT)
    assert await counts(store) == {(FIT, PROFILE): 2}


async def test_after_a_restart_the_gauge_reads_the_same_and_drops_what_left(
    redis_client: aioredis.Redis, store: QueueStore, queue_config: QueueConfig, clock: ManualClock
) -> None:
    await store.add([record("a"), rec_b := record("b")])
    a, b = await store.pop(T, 2)
    await fail(store, a, FIT)
    await fail(store, b, "NodeAffinity")

    def gauge_values(metrics: BerthMetrics) -> dict[tuple[str, str], float]:
        return {
            (s.labels["plugin"], s.labels["profile"]): s.value
            for family in metrics.registry.collect()
            if family.name == "scheduler_unschedulable_pods"
            for s in family.samples
        }

    # A new replica: a new store object and registry over the same Redis.
    restarted = QueueStore(redis_client, queue_config, clock)
    metrics = BerthMetrics(CollectorRegistry())
    gauge = RejectionGauge(metrics.unschedulable_pods)
    gauge.set(await count_rejections(restarted.redis, restarted.keys, await restarted.tenants()))
    assert gauge_values(metrics) == {(FIT, PROFILE): 1.0, ("NodeAffinity", PROFILE): 1.0}
    await store.delete([rec_b])
    gauge.set(await count_rejections(restarted.redis, restarted.keys, await restarted.tenants()))
    assert gauge_values(metrics) == {(FIT, PROFILE): 1.0, ("NodeAffinity", PROFILE): 0.0}
