"""The node agent in-process on the real Redis: stages complete and delete pods through the
store (usage given back), a failed node turns Unknown after the grace period and is tainted,
its pods are evicted by the taint rules, owners bring theirs back pending, replicas split the
nodes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from services.agent.config import AgentConfig
from services.agent.partition import owner
from services.agent.service import AgentService
from services.agent.view import AgentView
from shared.lifecycle.node_lifecycle import UNREACHABLE, ready_status
from shared.lifecycle.pressure import PressureConfig
from shared.lifecycle.state import LifecycleState
from shared.models import POD_GROUP_LABEL, NodeCondition, Pod, Taint
from shared.store import Change, ClusterStore
from tests.builders import make_node, make_pod

C = "pod-complete.stage.kwok.x-k8s.io/delay"
D = "pod-delete.stage.kwok.x-k8s.io/delay"


@pytest.fixture
def config(redis_prefix: str) -> AgentConfig:
    return AgentConfig(
        key_prefix=redis_prefix,
        name="agent-0",
        node_monitor_grace_period=1.0,
        heartbeat_seconds=0.2,
        tick_seconds=0.05,
        seed=1,
    )


@pytest.fixture
async def agent(redis_client: Redis, config: AgentConfig) -> AsyncIterator[AgentService]:
    service = AgentService(redis_client, config)
    yield service
    await service.stop()


async def until(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    for _ in range(int(seconds / 0.05)):
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def test_stages_complete_and_delete_pods(agent: AgentService) -> None:
    store, state = agent.store, agent.state
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj()])
    pods = [
        make_pod("done").req(cpu="1").node("n1").annotation(C, "300ms").obj(),
        make_pod("gone").req(cpu="1").node("n1").annotation(D, "300ms").obj(),
        make_pod("runs").req(cpu="1").node("n1").obj(),
        make_pod("bad").req(cpu="1").node("n1").annotation(C, "soon").obj(),
    ]
    await store.apply(pods)
    assert (await store.usage("n1")).requested["cpu"] == 4000
    await agent.start()

    async def two_left() -> bool:
        return (await store.usage("n1")).pods == 2

    await until(two_left)
    await asyncio.sleep(0.5)
    names = {p.metadata.name for p in await pods_of(store)}
    assert names == {"runs", "bad"}  # unannotated and unparseable keep running
    usage = await store.usage("n1")
    assert (usage.pods, usage.requested["cpu"]) == (2, 2000)
    finished = await state.finished()
    assert finished["default/done"]["phase"] == "Succeeded"
    assert "default/gone" not in finished
    assert [e.reason for e in await state.events("default/done")] == ["Completed"]
    assert [e.reason for e in await state.events("default/gone")] == ["Killing"]
    assert agent.counts["completed"] == agent.counts["deleted"] == 1


async def test_stages_due_together_end_in_a_few_round_trips(
    agent: AgentService, monkeypatch: Any
) -> None:
    """Pods whose stages fall due together end together: their deletions in one round
    trip, whatever their number, and one that is gone already is not counted as ended.
    One round trip after another, a few hundred pods ending per second kept the agent (and
    their quota) hundreds of ms behind their end."""
    store = agent.store
    await store.apply([make_node("n1").capacity(cpu="64", pods=64).obj()])
    pods = [
        make_pod(f"p{i}").req(cpu="1").node("n1").annotation(C, "400ms").obj() for i in range(20)
    ]
    pods += [
        make_pod(f"k{i}").req(cpu="1").node("n1").annotation(D, "400ms").obj() for i in range(5)
    ]
    await store.apply(pods)
    calls: list[int] = []
    delete_all = store.delete_all

    async def counted(objects: Any, **options: Any) -> Any:
        calls.append(len(objects))
        if len(objects) == 20:  # one goes away meanwhile (its user deleted it)
            await delete_all([("Pod", "default", "p0", None)])
        return await delete_all(objects, **options)

    monkeypatch.setattr(store, "delete_all", counted)
    await agent.start()

    async def all_gone() -> bool:
        return (await store.usage("n1")).pods == 0

    await until(all_gone)
    assert sorted(calls) == [5, 20]
    finished = await agent.state.finished()
    assert sorted(finished) == sorted(f"default/p{i}" for i in range(1, 20))
    assert agent.counts["completed"] == 19
    assert agent.counts["deleted"] == 5
    assert [e.reason for e in await agent.state.events("default/p1")] == ["Completed"]
    assert await agent.state.events("default/p0") == []


async def test_a_pod_bound_again_runs_its_full_time_again(agent: AgentService) -> None:
    """Quota preemption puts a pod back to waiting with its uid; bound again, its stage
    counts from the new binding, not from the first (which would end it early)."""
    store = agent.store
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj()])
    pod = make_pod("job").req(cpu="1").node("n1").annotation(C, "800ms").obj()
    await store.apply([pod])
    await agent.start()
    await asyncio.sleep(0.4)
    uid = pod.metadata.uid
    await store.delete("Pod", "default", "job", uid=uid)  # back to waiting, same uid
    waiting = replace(pod, spec=replace(pod.spec, node_name=""))
    await store.apply([waiting])
    await asyncio.sleep(0.2)
    rebound_wall = time.time()
    await store.apply([replace(pod, spec=replace(pod.spec, node_name="n1"))])  # bound again
    rebound = asyncio.get_running_loop().time()
    await asyncio.sleep(0.5)  # past the first binding's due time, short of the second's
    assert await store.get_pod("default", "job") is not None
    assert "default/job" not in await agent.state.finished()

    async def finished() -> bool:
        return "default/job" in await agent.state.finished()

    await until(finished)
    assert asyncio.get_running_loop().time() - rebound >= 0.75
    # Its finish record says when the run that finished started: the second binding.
    record = (await agent.state.finished())["default/job"]
    assert rebound_wall <= record["started"] <= rebound_wall + 0.3
    assert record["time"] - record["started"] >= 0.8


async def test_a_failed_node_evicts_by_the_taint_rules(
    agent: AgentService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="services.agent.service")
    store, state = agent.store, agent.state
    await store.apply([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in (1, 2)])
    owned = make_pod("owned").req(cpu="1").node("n1").owner("ReplicaSet", "web").obj()
    bare = make_pod("bare").req(cpu="1").node("n1").obj()
    patient = (
        make_pod("patient")
        .req(cpu="1")
        .node("n1")
        .owner("ReplicaSet", "db")
        .toleration(UNREACHABLE, effect="NoExecute", seconds=2)
        .obj()
    )
    forever = (
        make_pod("forever")
        .req(cpu="1")
        .node("n1")
        .toleration(UNREACHABLE, effect="NoExecute")
        .obj()
    )
    daemon = make_pod("daemon").node("n1").owner("DaemonSet", "agent").obj()
    elsewhere = make_pod("elsewhere").node("n2").obj()
    await store.apply([owned, bare, patient, forever, daemon, elsewhere])
    owned_uid = owned.metadata.uid
    await agent.start()
    await asyncio.sleep(0.5)
    assert ready_status(await store.get_node("n1")) == "True"  # type: ignore[arg-type]
    assert (await store.get_node("n1")).spec.taints == []  # type: ignore[union-attr]

    await state.fail("n1", "unreachable")

    async def unreachable() -> bool:
        node = await store.get_node("n1")
        return node is not None and ready_status(node) == "Unknown"

    await until(unreachable)
    node = await store.get_node("n1")
    assert node is not None
    assert {(t.key, t.effect) for t in node.spec.taints} == {
        (UNREACHABLE, "NoSchedule"),
        (UNREACHABLE, "NoExecute"),
    }

    async def intolerant_gone() -> bool:
        on_n1 = {p.metadata.name for p in await pods_of(store) if p.spec.node_name == "n1"}
        return on_n1 == {"patient", "forever"}

    await until(intolerant_gone, 5.0)
    # The ReplicaSet's pod is back, pending, with a new uid; the bare pod and the DaemonSet's
    # pod are gone.
    back = await store.get_pod("default", "owned")
    assert back is not None
    assert back.spec.node_name == ""
    assert back.metadata.uid != owned_uid
    assert await store.get_pod("default", "bare") is None
    assert await store.get_pod("default", "daemon") is None
    events = await state.events("default/owned")
    assert [e.reason for e in events] == ["Recreated", "TaintManagerEviction"]
    assert events[1].message == (
        "Marking for deletion Pod default/owned: node n1: "
        "taint node.kubernetes.io/unreachable:NoExecute not tolerated"
    )
    # Each eviction is a decision line (INFO, rate limited), with the pod, node and reason.
    decisions = {
        r.pod: (r.node, r.reason, r.getMessage())  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "decision", None) == "eviction"
    }
    assert decisions["default/owned"] == ("n1", "TaintManagerEviction", events[1].message)

    # tolerationSeconds 2: evicted about two seconds after the taint, not before.
    await asyncio.sleep(1.0)
    assert await store.get_pod("default", "patient") is not None

    async def patient_moved() -> bool:
        pod = await store.get_pod("default", "patient")
        return pod is not None and pod.spec.node_name == ""

    await until(patient_moved, 5.0)
    forever_now = await store.get_pod("default", "forever")
    assert forever_now is not None
    assert forever_now.spec.node_name == "n1"  # tolerates it without tolerationSeconds
    assert (await store.get_pod("default", "elsewhere")) is not None
    assert (await store.usage("n1")).pods == 1

    # Recovery: heartbeats resume, Ready, the controller's taints lifted.
    await state.recover("n1")

    async def healthy() -> bool:
        node = await store.get_node("n1")
        return node is not None and ready_status(node) == "True" and not node.spec.taints

    await until(healthy)


async def test_replicas_split_the_nodes(redis_client: Redis, config: AgentConfig) -> None:
    names = [f"n{i}" for i in range(12)]
    store = ClusterStore(redis_client, prefix=config.key_prefix)
    await store.apply([make_node(n).capacity(cpu="1").obj() for n in names])
    a = AgentService(redis_client, config)
    b = AgentService(redis_client, AgentConfig(**{**_fields(config), "name": "agent-1"}))
    try:
        await a.start()
        await b.start()
        await asyncio.sleep(0.6)
        mine_a = {n for n in names if a.owns(n)}
        mine_b = {n for n in names if b.owns(n)}
        assert mine_a | mine_b == set(names)
        assert not mine_a & mine_b
        assert mine_a == {n for n in names if owner(["agent-0", "agent-1"], n) == "agent-0"}
        assert mine_a
        assert mine_b
        await b.stop()
        await asyncio.sleep(0.9)  # b's entry gone at once (clean stop): a takes every node
        assert all(a.owns(n) for n in names)
    finally:
        await a.stop()
        await b.stop()
    beats = await LifecycleState(redis_client, store.keys).heartbeats()
    assert set(beats) == set(names)


async def pods_of(store: ClusterStore) -> list[Pod]:
    return cast(list[Pod], await store.list("Pod"))


def _fields(config: AgentConfig) -> dict[str, Any]:
    return {f: getattr(config, f) for f in config.__dataclass_fields__}


async def test_a_gang_losing_a_member_is_requeued_whole(agent: AgentService) -> None:
    """A NoExecute taint applied by hand (kubectl taint) on n1 evicts the gang's members
    there; the gang's member on n2 is requeued too, and every member comes back pending with
    a new uid (bare pods: the gang, not an owner, brings them back)."""
    store, state = agent.store, agent.state
    await store.apply([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in (1, 2)])
    members = [
        make_pod(f"g-{i}").req(cpu="1").label(POD_GROUP_LABEL, "g").node(node).obj()
        for i, node in enumerate(["n1", "n1", "n2"])
    ]
    loner = make_pod("loner").req(cpu="1").node("n2").obj()
    await store.apply([*members, loner])
    uids = {p.metadata.name: p.metadata.uid for p in members}
    await agent.start()
    node = await store.get_node("n1")
    assert node is not None
    node.spec.taints = [Taint(key="maintenance", effect="NoExecute")]
    await store.apply([node])

    async def requeued() -> bool:
        pods = {p.metadata.name: p for p in await pods_of(store)}
        return all(
            name in pods and not pods[name].spec.node_name and pods[name].metadata.uid != uid
            for name, uid in uids.items()
        )

    await until(requeued)
    assert (await store.get_pod("default", "loner")).spec.node_name == "n2"  # type: ignore[union-attr]
    reasons = [e.reason for e in await state.events("default/g-2")]
    assert reasons == ["Recreated", "GangEviction"]
    assert (await state.events("default/g-2"))[1].message == (
        "Requeueing Pod default/g-2: gang default/g lost member default/g-0 to eviction"
    )
    assert [e.reason for e in await state.events("default/g-0")] == [
        "Recreated",
        "TaintManagerEviction",
    ]
    assert (await store.usage("n1")).pods == 0
    assert (await store.usage("n2")).pods == 1


async def test_node_pressure_evicts_by_rank_and_taints(
    redis_client: Redis, config: AgentConfig
) -> None:
    pressure = PressureConfig.from_kubelet_config(
        {"evictionHard": {"memory.available": "500Mi"}, "evictionPressureTransitionPeriod": "1s"}
    )
    agent = AgentService(redis_client, replace(config, pressure=pressure))
    store, state = agent.store, agent.state
    try:
        await store.apply([make_node("n1").capacity(cpu="8", memory="10Gi", pods=10).obj()])
        hog = (
            make_pod("hog")
            .req(memory="1Gi")
            .owner("ReplicaSet", "hog")
            .annotation("berth.dev/memory-usage", "6Gi")
            .node("n1")
            .obj()
        )
        calm = (
            (make_pod("calm").req(memory="4Gi").annotation("berth.dev/memory-usage", "3900Mi"))
            .node("n1")
            .obj()
        )
        await store.apply([hog, calm])  # 10Gi - 9.9Gi = 140Mi available (< 500Mi)
        await agent.start()

        async def hog_evicted() -> bool:
            pod = await store.get_pod("default", "hog")
            return pod is not None and pod.spec.node_name == ""

        await until(hog_evicted)
        node = await store.get_node("n1")
        assert node is not None
        assert [(c.type, c.status) for c in node.status.conditions if c.type != "Ready"] == [
            ("MemoryPressure", "True")
        ]
        assert {(t.key, t.effect) for t in node.spec.taints} == {
            ("node.kubernetes.io/memory-pressure", "NoSchedule")
        }
        (event, evicted) = await state.events("default/hog")
        assert (event.reason, evicted.reason) == ("Recreated", "Evicted")
        assert evicted.message.startswith(
            "The node was low on resource: memory. Threshold quantity: 524288000, available: "
        )
        assert (await store.get_pod("default", "calm")).spec.node_name == "n1"  # type: ignore[union-attr]

        async def relieved() -> bool:  # after the 1 s transition period
            n1 = await store.get_node("n1")
            return n1 is not None and not n1.spec.taints

        await until(relieved)
    finally:
        await agent.stop()


async def test_full_disruption_evicts_nobody(agent: AgentService) -> None:
    """Every node silent (the agent itself cut off, say): Unknown and NoSchedule, but no
    NoExecute taint and no eviction; one node back, the other's pods go."""
    store, state = agent.store, agent.state
    await store.apply([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in (1, 2)])
    await store.apply([make_pod("p").req(cpu="1").node("n1").obj()])
    await agent.start()
    await state.fail("n1", "unreachable")
    await state.fail("n2", "unreachable")

    async def both_unknown() -> bool:
        nodes = [await store.get_node(n) for n in ("n1", "n2")]
        return all(n is not None and ready_status(n) == "Unknown" for n in nodes)

    await until(both_unknown)
    await asyncio.sleep(0.6)
    n1 = await store.get_node("n1")
    assert n1 is not None
    assert {(t.key, t.effect) for t in n1.spec.taints} == {(UNREACHABLE, "NoSchedule")}
    assert await store.get_pod("default", "p") is not None
    await state.recover("n2")

    async def evicted() -> bool:
        return await store.get_pod("default", "p") is None

    await until(evicted)


async def test_a_stage_survives_its_replica(redis_client: Redis, config: AgentConfig) -> None:
    """A pod on a node of replica b completes through replica a when b dies before its time
    comes (b's membership outlives it by the member TTL, past the pod's due time: a must keep
    the timer, not drop it)."""
    store = ClusterStore(redis_client, prefix=config.key_prefix)
    names = [f"n{i}" for i in range(8)]
    b_name = "agent-1"
    theirs = next(n for n in names if owner(["agent-0", b_name], n) == b_name)
    await store.apply([make_node(n).capacity(cpu="1").obj() for n in names])
    await store.apply([make_pod("job").node(theirs).annotation(C, "5s").obj()])
    # Heartbeats of 2 s: b stays a member 6 s after its last one, past the pod's 5 s; b dies
    # once both have heard of each other (~2 s), with ~3 s of slack before the pod's time on
    # a loaded machine (1.3 s was not always enough under a second test run).
    slow = replace(config, heartbeat_seconds=2.0, node_monitor_grace_period=20.0)
    a = AgentService(redis_client, slow)
    b = AgentService(redis_client, replace(slow, name=b_name))
    try:
        await a.start()
        await b.start()

        async def both_heard() -> bool:  # a beat each after both started
            return b.owns(theirs) and not a.owns(theirs)

        await until(both_heard, 4.0)
        b._stop.set()  # b dies: its loops end, its membership entry stays until the TTL
        for task in b._tasks:
            await task
        assert b.counts["completed"] == 0  # died before the pod's time

        async def completed() -> bool:
            return await store.get_pod("default", "job") is None

        await until(completed, 15.0)
        assert a.counts["completed"] == 1
        assert b.counts["completed"] == 0
    finally:
        await a.stop()
        await b.stop()


async def test_a_node_applied_with_conditions(agent: AgentService) -> None:
    """`berth apply` of a Node with Ready False: not-ready taints at once (the condition is
    the kubelet's word, the agent leaves it), its intolerant pod evicted; applied again
    without conditions, the taints are lifted. MemoryPressure True adds its NoSchedule taint."""
    store = agent.store
    await store.apply([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in (1, 2)])
    await store.apply([make_pod("p").req(cpu="1").node("n1").obj()])
    await agent.start()
    down = make_node("n1").capacity(cpu="4", pods=10).obj()
    down.status.conditions = [
        NodeCondition(type="Ready", status="False", reason="ContainerRuntimeDown"),
        NodeCondition(type="MemoryPressure", status="True"),
    ]
    await store.apply([down])

    async def tainted() -> bool:
        node = await store.get_node("n1")
        return node is not None and {(t.key, t.effect) for t in node.spec.taints} == {
            ("node.kubernetes.io/not-ready", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        }

    await until(tainted)

    async def evicted() -> bool:
        return await store.get_pod("default", "p") is None

    await until(evicted)
    node = await store.get_node("n1")
    assert node is not None
    assert ready_status(node) == "False"  # not overwritten by the heartbeat
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj()])

    async def clear() -> bool:
        node = await store.get_node("n1")
        return node is not None and not node.spec.taints

    await until(clear)


async def test_pods_of_a_deleted_node_are_collected(agent: AgentService) -> None:
    """PodGC: `berth delete node n1` leaves its pods bound to nothing; after the quarantine
    (the grace period) they are deleted, the owned one comes back pending."""
    store, state = agent.store, agent.state
    await store.apply([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in (1, 2)])
    owned = make_pod("owned").req(cpu="1").node("n1").owner("ReplicaSet", "web").obj()
    await store.apply([owned, make_pod("bare").req(cpu="1").node("n1").obj()])
    await agent.start()
    assert await store.delete("Node", "", "n1") is not None

    async def collected() -> bool:
        pod = await store.get_pod("default", "owned")
        return pod is not None and pod.metadata.uid != owned.metadata.uid

    await until(collected)
    assert (await store.get_pod("default", "owned")).spec.node_name == ""  # type: ignore[union-attr]
    assert await store.get_pod("default", "bare") is None
    assert [e.reason for e in await state.events("default/bare")] == ["DeletionByPodGC"]
    assert (await store.usage("n1")).pods == 0


async def test_a_stage_fires_when_due_not_at_the_next_tick(
    redis_client: Redis, config: AgentConfig
) -> None:
    """KWOK's delays are the pods' run times (Kueue's harness measures by them): a stage
    fires when it falls due, however long the tick, and a sooner stage planned while the
    stage loop sleeps wakes it."""
    slow = AgentService(redis_client, replace(config, tick_seconds=3.0))
    store = slow.store
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj()])
    await store.apply([make_pod("first").req(cpu="1").node("n1").annotation(C, "150ms").obj()])
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        await slow.start()

        async def finished(key: str) -> bool:
            return key in await slow.state.finished()

        await until(lambda: finished("default/first"))
        first = loop.time() - started
        # Planned while the stage loop sleeps toward the tick (nothing else is due).
        await store.apply([make_pod("second").req(cpu="1").node("n1").annotation(C, "100ms").obj()])
        applied = loop.time()
        await until(lambda: finished("default/second"))
        second = loop.time() - applied
    finally:
        await slow.stop()
    assert 0.15 <= first < 1.0, first
    assert 0.1 <= second < 1.0, second


def test_the_agents_view_drops_a_pod_put_back_to_waiting_without_its_body() -> None:
    """The agent follows with pending pods' bodies skipped (BodiesSkipped): a bound pod put
    back to waiting (quota reclaim) comes as a change with no object, and must still go."""
    pod = make_pod("job").req(cpu="1").node("n1").obj()
    view = AgentView()
    bound = Change(5, "put", "Pod", pod.key, pod.metadata.uid, pod, node_name="n1")
    assert view.apply(bound) == [pod]
    assert view.pods_on("n1") == [pod]
    waiting = Change(6, "put", "Pod", pod.key, pod.metadata.uid, None)
    assert view.apply(waiting) == []
    assert view.pods_on("n1") == []
    assert pod.key not in view.pods
    gone = Change(7, "delete", "Pod", pod.key, pod.metadata.uid, None)
    assert view.apply(gone) == []
