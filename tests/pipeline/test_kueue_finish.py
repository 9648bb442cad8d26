"""The Kueue harness ending workloads as Kueue's runner does (`finish_due`), on the real
Redis: a workload due whose pod is bound completes as the agent's pod-complete stage would
complete it (a completion record, an event, the pod gone from the store); one whose pod is
not bound yet waits for it."""

from __future__ import annotations

import msgpack
from redis.asyncio import Redis

from cli.bench.kueue import UNBOUND_RETRY_S, finish_due, pod_of
from cli.bench.kueue_config import parse_generator, plan_of
from cli.bench.kueue_tracker import Tracker, uid_of
from shared.lifecycle.state import LifecycleState
from shared.models.evolve import evolve
from shared.store import ClusterStore
from tests.builders import make_node
from tests.cli.test_kueue_bench_config import ROOT


async def test_a_due_workload_ends_once_its_pod_is_bound(
    redis_client: Redis, redis_prefix: str
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    state = LifecycleState(redis_client, store.keys)
    plan = plan_of(parse_generator((ROOT / "small" / "generator.yaml").read_text()))
    tracker = Tracker(plan, scale=1.0, started=100.0, finish_after_admission=True)
    first, second = [w for w in plan.workloads if w.class_name == "small"][:2]
    await store.apply([make_node("n1").capacity(cpu="64", pods=100).obj()])
    bound = evolve(pod_of(first, stage=False), spec=evolve(pod_of(first).spec, node_name="n1"))
    await store.apply([bound, pod_of(second, stage=False)])
    keys = [f"{w.queue}/{w.name}" for w in (first, second)]
    tracker.created(first, 100.0)
    tracker.created(second, 100.0)
    tracker.observe({k: msgpack.packb({"at": 101.0}) for k in keys}, 101.0)
    started = {uid_of(first): 101.05}

    assert await finish_due(store, state, tracker, started, 101.1) == 0  # not due yet
    assert await finish_due(store, state, tracker, started, 101.2) == 1
    assert await store.get_pod(first.queue, first.name) is None
    assert tracker.finished == 1  # finished as it ended, not read back
    assert tracker.records[keys[0]].finished_ms == tracker.ms(101.2)
    assert tracker.records[keys[0]].periods == [(tracker.ms(101.0), tracker.ms(101.2))]
    assert tracker.finishing == set()
    record = (await state.finished())[keys[0]]
    assert (record["uid"], record["time"], record["started"]) == (uid_of(first), 101.2, 101.05)
    assert [e.reason for e in await state.events(keys[0])] == ["Completed"]
    # the second is due too, but its pod is not bound: it stays, and is due again shortly
    assert await store.get_pod(second.queue, second.name) is not None
    assert await redis_client.hget(state.keys.finished, keys[1]) is None
    assert tracker.next_due() == 101.2 + UNBOUND_RETRY_S

    await store.apply(
        [evolve(pod_of(second, stage=False), spec=evolve(pod_of(second).spec, node_name="n1"))]
    )
    # the observer's binding of the second is from before this admission (an earlier life)
    assert await finish_due(store, state, tracker, {uid_of(second): 100.5}, 101.3) == 1
    assert await store.get_pod(second.queue, second.name) is None
    assert tracker.finished == 2
    record = (await state.finished())[keys[1]]
    assert record["uid"] == uid_of(second)
    assert "started" not in record  # the observer saw no start: none is claimed
    assert tracker.due == []
