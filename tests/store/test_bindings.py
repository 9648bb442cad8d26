"""Check-and-reserve, bind, unreserve, nominations, gangs and expiry: the Lua scripts against
the session's real Redis, including races between concurrent callers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from shared.models import HostPort, Pod, Toleration
from shared.store import (
    ClusterStore,
    NodeUsage,
    PodCharge,
    ReserveRequest,
    ReserveStatus,
)
from tests.builders import PodBuilder, label_selector, make_node, make_pod

NOW = 1_000.0


def request(
    pod: Pod,
    node: str = "n1",
    attempt: int = 1,
    *,
    check: Sequence[tuple[str, int]] | None = None,
    **kw,
) -> ReserveRequest:
    charge = PodCharge.of(pod)
    if check is None:
        check = sorted(charge.requests.items())
    return ReserveRequest(
        pod_key=pod.key,
        uid=pod.metadata.uid,
        attempt=attempt,
        node=node,
        priority=pod.spec.priority or 0,
        charge=charge,
        check=check,
        tolerations=pod.spec.tolerations,
        **kw,
    )


async def _setup(store: ClusterStore, *pods: Pod, cpu: str = "4", pods_max: int = 110) -> None:
    await store.apply([make_node("n1").capacity(cpu=cpu, pods=pods_max).obj(), *pods])


async def test_reserve_then_bind(store: ClusterStore):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    result = await store.bindings.reserve(request(pod), NOW)
    assert result.status is ReserveStatus.OK
    assert result.store_resource_version == 3  # the reservation's own stream entry
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert await store.bindings.attempt_of(pod.metadata.uid) == (1, "r")
    got = await store.get_pod("default", "p")
    assert got is not None
    assert got.spec.node_name == ""  # reserved, not bound

    bound = await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")
    assert bound.status == "ok"
    assert bound.resource_version == 4
    got = await store.get_pod("default", "p")
    assert got is not None
    assert got.spec.node_name == "n1"
    assert got.metadata.resource_version == 4
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert await store.bindings.attempt_of(pod.metadata.uid) == (1, "b")
    # bound at most once
    again = await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")
    assert again.status == "lost"
    assert await store.resource_version() == 4


@pytest.mark.parametrize(
    ("node", "pod", "reasons"),
    [
        pytest.param(
            make_node("n1").capacity(cpu="1", pods=10),
            make_pod("p").req(cpu="2", memory="1Gi"),
            ("Insufficient cpu", "Insufficient memory"),
            id="resources",
        ),
        pytest.param(
            make_node("n1").capacity(cpu="4", pods=0),
            make_pod("p"),
            ("Too many pods",),
            id="pods",
        ),
        pytest.param(
            make_node("n1").capacity(pods=10).unschedulable(),
            make_pod("p"),
            ("node(s) were unschedulable",),
            id="unschedulable",
        ),
        pytest.param(
            make_node("n1").capacity(pods=10).taint("gpu", "yes", "NoSchedule"),
            make_pod("p").toleration("gpu", "no", effect="NoSchedule"),
            ("node(s) had untolerated taint {gpu: yes}",),
            id="taint",
        ),
        pytest.param(
            make_node("n1").capacity(pods=10).taint("gpu", "yes", "NoExecute"),
            make_pod("p").toleration("gpu", operator="Exists"),
            (),
            id="taint-tolerated-exists",
        ),
        pytest.param(
            make_node("n1").capacity(pods=10).taint("gpu", "yes", "PreferNoSchedule"),
            make_pod("p"),
            (),
            id="prefer-no-schedule-ignored",
        ),
        pytest.param(
            make_node("n1").capacity(pods=10).unschedulable(),
            make_pod("p").toleration("node.kubernetes.io/unschedulable", operator="Exists"),
            (),
            id="unschedulable-tolerated",
        ),
        pytest.param(
            make_node("n1").capacity({"example.com/gpu": 1}, pods=10),
            make_pod("p").req({"example.com/gpu": 2}),
            ("Insufficient example.com/gpu",),
            id="extended-resource",
        ),
    ],
)
async def test_node_local_checks(store: ClusterStore, node, pod, reasons):
    the_pod = pod.obj()
    await store.apply([node.obj(), the_pod])
    result = await store.bindings.reserve(request(the_pod), NOW)
    if reasons:
        assert result.status is ReserveStatus.CONFLICT
        assert result.reasons == reasons
        assert await store.usage("n1") == NodeUsage()
        assert await store.bindings.attempt_of(the_pod.metadata.uid) == (1, "c")
    else:
        assert result.status is ReserveStatus.OK


async def test_host_ports_conflict_with_reserved_pods(store: ClusterStore):
    a = make_pod("a").host_port(80, host_ip="10.0.0.1").obj()
    b = make_pod("b").host_port(80, host_ip="10.0.0.2").obj()
    c = make_pod("c").host_port(80).obj()
    await _setup(store, a, b, c)
    assert (await store.bindings.reserve(request(a), NOW)).status is ReserveStatus.OK
    assert (await store.bindings.reserve(request(b), NOW)).status is ReserveStatus.OK
    result = await store.bindings.reserve(request(c), NOW)
    assert result.reasons == ("node(s) didn't have free ports for the requested pod ports",)
    await store.bindings.unreserve(a.key, a.metadata.uid, 1)
    await store.bindings.unreserve(b.key, b.metadata.uid, 1)
    assert (await store.bindings.reserve(request(c, attempt=2), NOW)).status is ReserveStatus.OK


async def test_missing_node_and_changed_versions(store: ClusterStore):
    pod = make_pod("p").obj()
    await _setup(store, pod)
    missing = await store.bindings.reserve(request(pod, node="nope"), NOW)
    assert missing.reasons == ('node "nope" not found',)
    changed = await store.bindings.reserve(request(pod, attempt=2, node_resource_version=99), NOW)
    assert (changed.status, changed.resource_version) == (ReserveStatus.NODE_CHANGED, 1)
    changed = await store.bindings.reserve(request(pod, attempt=2, pod_resource_version=99), NOW)
    assert (changed.status, changed.resource_version) == (ReserveStatus.POD_CHANGED, 2)
    # neither was recorded: the caller re-checks and calls again for the same attempt
    ok = await store.bindings.reserve(
        request(pod, attempt=2, node_resource_version=1, pod_resource_version=2), NOW
    )
    assert ok.status is ReserveStatus.OK


async def test_duplicates_and_stale_attempts_change_nothing(store: ClusterStore):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    assert (await store.bindings.reserve(request(pod, attempt=3), NOW)).status is ReserveStatus.OK
    rv = await store.resource_version()
    dup = await store.bindings.reserve(request(pod, attempt=3), NOW)
    assert (dup.status, dup.seen_state, dup.node) == (ReserveStatus.DUPLICATE, "r", "n1")
    stale = await store.bindings.reserve(request(pod, attempt=2), NOW)
    assert (stale.status, stale.seen_attempt) == (ReserveStatus.STALE, 3)
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert await store.resource_version() == rv
    assert not await store.bindings.unreserve(pod.key, pod.metadata.uid, 2)
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})


async def test_a_newer_attempt_replaces_an_abandoned_reservation(store: ClusterStore):
    pod = make_pod("p").req(cpu="3").obj()
    await _setup(store, pod)
    assert (await store.bindings.reserve(request(pod, attempt=1), NOW)).status is ReserveStatus.OK
    # attempt 1's binder vanished; the queue dispatched attempt 2, which lands on the same node
    assert (await store.bindings.reserve(request(pod, attempt=2), NOW)).status is ReserveStatus.OK
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 3000})
    assert (await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")).status == "lost"
    assert (await store.bindings.bind(pod.key, pod.metadata.uid, 2, "n1")).status == "ok"


async def test_concurrent_reservations_never_overcommit(store: ClusterStore):
    pods = [make_pod(f"p{i}").req(cpu="300m").obj() for i in range(60)]
    await _setup(store, *pods, cpu="4", pods_max=100)  # room for 13 such pods
    results = await asyncio.gather(*(store.bindings.reserve(request(p), NOW) for p in pods))
    ok = [p for p, r in zip(pods, results, strict=True) if r.status is ReserveStatus.OK]
    assert len(ok) == 13
    assert {r.reasons for r in results if r.status is ReserveStatus.CONFLICT} == {
        ("Insufficient cpu",)
    }
    binds = await asyncio.gather(
        *(store.bindings.bind(p.key, p.metadata.uid, 1, "n1") for p in ok),
        *(store.bindings.bind(p.key, p.metadata.uid, 1, "n1") for p in ok),
    )
    assert sorted(b.status for b in binds) == ["lost"] * 13 + ["ok"] * 13
    assert await store.usage("n1") == NodeUsage(13, {"cpu": 3900})


async def test_pod_slots_are_counted_under_concurrency(store: ClusterStore):
    pods = [make_pod(f"p{i}").obj() for i in range(30)]
    await _setup(store, *pods, pods_max=7)
    results = await asyncio.gather(*(store.bindings.reserve(request(p), NOW) for p in pods))
    assert sum(r.status is ReserveStatus.OK for r in results) == 7


async def test_deleting_a_reserved_pod_releases_it(store: ClusterStore):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    await store.bindings.reserve(request(pod), NOW)
    await store.delete("Pod", "default", "p")
    assert await store.usage("n1") == NodeUsage()
    assert (await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")).status == "lost"
    gone = await store.bindings.reserve(request(pod, attempt=2), NOW)
    assert gone.status is ReserveStatus.GONE


async def test_nominated_pods_of_higher_priority_count(store: ClusterStore):
    high = make_pod("high").priority(100).req(cpu="3").obj()
    low = make_pod("low").priority(10).req(cpu="2").obj()
    higher = make_pod("higher").priority(200).req(cpu="2").obj()
    await _setup(store, high, low, higher)
    rv = await store.bindings.nominate(high.key, high.metadata.uid, "n1", 100, PodCharge.of(high))
    assert rv is not None
    got = await store.get_pod("default", "high")
    assert got is not None
    assert got.status.nominated_node_name == "n1"
    assert (
        await store.bindings.nominate(high.key, high.metadata.uid, "n1", 100, PodCharge.of(high))
        is None
    )

    blocked = await store.bindings.reserve(request(low), NOW)
    assert blocked.reasons == ("Insufficient cpu",)
    # a pod of higher priority than the nominated one ignores the nomination
    assert (await store.bindings.reserve(request(higher), NOW)).status is ReserveStatus.OK
    await store.bindings.unreserve(higher.key, higher.metadata.uid, 1)
    # the nominated pod itself is not counted twice
    assert (await store.bindings.reserve(request(high), NOW)).status is ReserveStatus.OK
    assert (await store.bindings.bind(high.key, high.metadata.uid, 1, "n1")).status == "ok"
    got = await store.get_pod("default", "high")
    assert got is not None
    assert (got.spec.node_name, got.status.nominated_node_name) == ("n1", "")
    assert await store.redis.hlen(store.keys.nominated("n1")) == 0


async def test_expired_reservations_are_released(store: ClusterStore):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    await store.bindings.reserve(request(pod, ttl_seconds=5), NOW)
    assert await store.bindings.expire(NOW + 4) == ()
    released = await store.bindings.expire(NOW + 6)
    assert [(r.pod_key, r.attempt) for r in released] == [("default/p", 1)]
    assert await store.usage("n1") == NodeUsage()
    assert await store.bindings.attempt_of(pod.metadata.uid) == (1, "x")


def gang_pod(name: str, group: str = "g") -> Pod:
    return make_pod(name).label("scheduling.x-k8s.io/pod-group", group).req(cpu="1").obj()


async def test_gang_waits_until_min_member_then_permits(store: ClusterStore):
    pods = [gang_pod(f"m{i}") for i in range(4)]
    await _setup(store, *pods)
    decisions = []
    for pod in pods[:3]:
        result = await store.bindings.reserve(request(pod, gang="default/g", min_member=3), NOW)
        decisions.append((result.gang, result.gang_generation))
    assert decisions == [("wait", 0), ("wait", 0), ("permit", 0)]
    for pod in pods[:3]:
        assert (await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")).status == "ok"
    # all reserved members bound: a new generation; bound members count for late joiners
    state = await store.bindings.gang_state("default/g")
    assert (state.generation, state.state, state.members) == (1, "w", frozenset())
    late = await store.bindings.reserve(request(pods[3], gang="default/g", min_member=3), NOW)
    assert (late.gang, late.gang_generation) == ("permit", 1)


async def test_gang_reject_releases_every_reserved_member(store: ClusterStore):
    pods = [gang_pod(f"m{i}") for i in range(2)]
    await _setup(store, *pods)
    for pod in pods:
        result = await store.bindings.reserve(request(pod, gang="default/g", min_member=3), NOW)
        assert result.gang == "wait"
    assert await store.usage("n1") == NodeUsage(2, {"cpu": 2000})
    rejected = await store.bindings.gang_reject("default/g", 0)
    assert rejected.status == "rejected"
    assert sorted(r.pod_key for r in rejected.released) == ["default/m0", "default/m1"]
    assert await store.usage("n1") == NodeUsage()
    assert (await store.bindings.gang_reject("default/g", 0)).status == "stale"
    for pod in pods:
        assert await store.bindings.attempt_of(pod.metadata.uid) == (1, "u")
    state = await store.bindings.gang_state("default/g")
    assert (state.generation, state.members) == (1, frozenset())


async def test_gang_reject_is_too_late_once_permitted(store: ClusterStore):
    pods = [gang_pod(f"m{i}") for i in range(2)]
    await _setup(store, *pods)
    for pod in pods:
        await store.bindings.reserve(request(pod, gang="default/g", min_member=2), NOW)
    assert (await store.bindings.gang_reject("default/g", 0)).status == "permitted"
    assert await store.usage("n1") == NodeUsage(2, {"cpu": 2000})


async def test_pod_tolerations_pass_through(store: ClusterStore):
    pod = make_pod("p").obj()
    pod.spec.tolerations = [Toleration(operator="Exists")]
    await store.apply([make_node("n1").capacity(pods=5).taint("a", "b", "NoExecute").obj(), pod])
    assert (await store.bindings.reserve(request(pod), NOW)).status is ReserveStatus.OK


async def test_a_conflict_carries_the_nodes_usage_and_the_store_version(store: ClusterStore):
    a = make_pod("a").req(cpu="1").host_port(9100).obj()
    b = make_pod("b").namespace("other").req(cpu="2").host_port(9100).obj()
    await _setup(store, a, b)
    assert (await store.bindings.reserve(request(a), NOW)).status is ReserveStatus.OK
    result = await store.bindings.reserve(request(b), NOW)
    assert result.status is ReserveStatus.CONFLICT
    assert result.reasons == ("node(s) didn't have free ports for the requested pod ports",)
    assert result.store_resource_version == int(await store.redis.get(store.keys.rv) or 0)
    assert result.usage == await store.usage("n1")
    assert result.usage == NodeUsage(1, {"cpu": 1000}, {HostPort("TCP", 9100, "0.0.0.0"): 1})


async def test_a_reserved_preemptor_counts_once_not_also_as_nominated(store: ClusterStore):
    """Once the nominated preemptor holds a reservation, its nomination no longer counts:
    before, the node looked full by its request twice until the bind."""
    high = make_pod("high").priority(100).req(cpu="2").obj()
    low = make_pod("low").priority(10).req(cpu="2").obj()
    await _setup(store, high, low)
    await store.bindings.nominate(high.key, high.metadata.uid, "n1", 100, PodCharge.of(high))
    assert (await store.bindings.reserve(request(high), NOW)).status is ReserveStatus.OK
    assert (await store.bindings.reserve(request(low), NOW)).status is ReserveStatus.OK


@pytest.mark.parametrize(
    ("checks", "reasons"),
    [
        pytest.param("utpf", ("node(s) were unschedulable",), id="all-enabled-cordon-first"),
        pytest.param(
            "tpf", ("node(s) had untolerated taint {dedicated: gpu}",), id="no-node-unschedulable"
        ),
        pytest.param(
            "pf", ("node(s) didn't have free ports for the requested pod ports",), id="no-taints"
        ),
        pytest.param("f", ("Too many pods",), id="no-node-ports"),
        pytest.param("", (), id="all-disabled"),
    ],
)
async def test_only_the_profiles_node_filters_are_checked(
    store: ClusterStore, checks: str, reasons: tuple[str, ...]
):
    """A profile that disables NodeUnschedulable, TaintToleration, NodePorts or
    NodeResourcesFit gets no such check from check-and-reserve either (the worker's
    framework skipped it, so the binder must not refuse what the worker proposed)."""
    holder = make_pod("holder").host_port(80).node("n1").obj()
    pod = make_pod("p").host_port(80).obj()
    node = make_node("n1").capacity(cpu="4", pods=1).taint("dedicated", "gpu").unschedulable()
    await store.apply([node.obj(), holder, pod])
    result = await store.bindings.reserve(request(pod, check=(), node_checks=checks), NOW)
    if reasons:
        assert (result.status, result.reasons) == (ReserveStatus.CONFLICT, reasons)
    else:
        assert result.status is ReserveStatus.OK


async def _anti_affinity_count(store: ClusterStore) -> int:
    return int(await store.redis.get(store.keys.anti_affinity("default")) or 0)


async def test_bind_at_once_binds_with_one_change_and_no_reservation(store: ClusterStore):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    before = await store.resource_version()
    result = await store.bindings.reserve(request(pod, bind_at_once=True), NOW)
    assert result.status is ReserveStatus.BOUND_AT_ONCE
    assert result.store_resource_version == before + 1  # the binding's entry, and no other
    assert await store.resource_version() == before + 1
    got = await store.get_pod("default", "p")
    assert got is not None
    assert got.spec.node_name == "n1"
    assert got.metadata.resource_version == before + 1
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert await store.bindings.attempt_of(pod.metadata.uid) == (1, "b")
    assert await store.redis.zcard(store.keys.reservations) == 0
    # The attempt is done: its duplicate changes nothing, and a bind of it finds nothing.
    again = await store.bindings.reserve(request(pod, bind_at_once=True), NOW)
    assert again.status is ReserveStatus.DUPLICATE
    assert (await store.bindings.bind(pod.key, pod.metadata.uid, 1, "n1")).status == "lost"
    assert await store.resource_version() == before + 1


async def test_bind_at_once_still_checks_the_node(store: ClusterStore):
    pod = make_pod("p").req(cpu="8").obj()
    await _setup(store, pod)
    result = await store.bindings.reserve(request(pod, bind_at_once=True), NOW)
    assert result.status is ReserveStatus.CONFLICT
    assert result.reasons == ("Insufficient cpu",)
    assert await store.usage("n1") == NodeUsage()


async def test_anti_affinity_pods_are_counted_and_stop_binding_at_once(store: ClusterStore):
    """While a pod with required anti-affinity is reserved or bound anywhere, a pod asking to
    bind at once gets a plain reservation (its binder must check it against that pod); the
    count follows reservations, bindings, applies with nodeName and deletions."""

    def anti(name: str) -> PodBuilder:
        return make_pod(name).label("app", "db").pod_affinity_in("app", ["db"], "zone", anti=True)

    guarded = anti("anti").req(cpu="1").obj()
    plain = make_pod("plain").req(cpu="1").obj()
    later = make_pod("later").req(cpu="1").obj()
    await _setup(store, guarded, plain, later)
    assert PodCharge.of(guarded).anti_affinity
    assert not PodCharge.of(plain).anti_affinity

    assert (await store.bindings.reserve(request(guarded), NOW)).status is ReserveStatus.OK
    assert await _anti_affinity_count(store) == 1
    asked = await store.bindings.reserve(request(plain, bind_at_once=True), NOW)
    assert asked.status is ReserveStatus.OK  # reserved only: the binder checks it
    got = await store.get_pod("default", "plain")
    assert got is not None
    assert got.spec.node_name == ""

    # Bound, the anti-affinity pod still counts; deleted, it no longer does.
    assert (await store.bindings.bind(guarded.key, guarded.metadata.uid, 1, "n1")).status == "ok"
    assert await _anti_affinity_count(store) == 1
    assert await store.delete("Pod", "default", "anti") is not None
    assert await _anti_affinity_count(store) == 0
    done = await store.bindings.reserve(request(later, bind_at_once=True), NOW)
    assert done.status is ReserveStatus.BOUND_AT_ONCE

    # Applied already bound (spec.nodeName), then re-applied, then released by unreserve.
    running = anti("running").node("n1").obj()
    await store.apply([running])
    assert await _anti_affinity_count(store) == 1
    await store.apply([running])
    assert await _anti_affinity_count(store) == 1
    assert await store.delete("Pod", "default", "running") is not None
    waiting = anti("waiting").obj()
    await store.apply([waiting])
    assert (await store.bindings.reserve(request(waiting), NOW)).status is ReserveStatus.OK
    assert await _anti_affinity_count(store) == 1
    await store.bindings.unreserve(waiting.key, waiting.metadata.uid, 1, "c")
    assert await _anti_affinity_count(store) == 0


async def test_anti_affinity_repels_binding_at_once_only_in_the_namespaces_it_can_match(
    store: ClusterStore,
):
    """Tenant a's pods repel each other: tenant b's pods still bind at once beside them; a
    term with a namespaceSelector (any namespace) stops binding at once everywhere."""
    guard = make_pod("guard").namespace("a").label("app", "db")
    guard.pod_affinity_in("app", ["db"], "zone", anti=True).req(cpu="1")
    a_plain = make_pod("plain").namespace("a").req(cpu="1").obj()
    b_plain = make_pod("plain").namespace("b").req(cpu="1").obj()
    await _setup(store, guard.obj(), a_plain, b_plain)
    assert PodCharge.of(guard.obj()).anti_affinity == ("a",)
    assert (await store.bindings.reserve(request(guard.obj()), NOW)).status is ReserveStatus.OK
    a_result = await store.bindings.reserve(request(a_plain, bind_at_once=True), NOW)
    b_result = await store.bindings.reserve(request(b_plain, bind_at_once=True), NOW)
    assert a_result.status is ReserveStatus.OK  # reserved: its binder checks it
    assert b_result.status is ReserveStatus.BOUND_AT_ONCE

    wide = make_pod("wide").namespace("c").label("app", "db")
    wide.pod_affinity(
        "zone", label_selector({"app": "db"}), anti=True, namespace_selector=(label_selector({}))
    )
    late = make_pod("late").namespace("b").req(cpu="1").obj()
    await store.apply([wide.obj(), late])
    assert PodCharge.of(wide.obj()).anti_affinity == ("*",)
    assert (await store.bindings.reserve(request(wide.obj()), NOW)).status is ReserveStatus.OK
    late_result = await store.bindings.reserve(request(late, bind_at_once=True), NOW)
    assert late_result.status is ReserveStatus.OK


async def test_a_bound_pod_is_reported_bound_to_its_node_by_a_later_attempt(store: ClusterStore):
    """Whether bound by nodeName at creation, at once, or from a reservation: a later attempt
    learns where (check-and-reserve reads the pod's charge)."""
    running = make_pod("running").req(cpu="1").node("n1").obj()
    at_once = make_pod("at-once").req(cpu="1").obj()
    reserved = make_pod("reserved").req(cpu="1").obj()
    await _setup(store, running, at_once, reserved)
    await store.apply([make_node("n2").capacity(cpu="4", pods=110).obj()])
    first = await store.bindings.reserve(request(at_once, "n2", bind_at_once=True), NOW)
    assert first.status is ReserveStatus.BOUND_AT_ONCE
    assert (await store.bindings.reserve(request(reserved, "n2"), NOW)).status is ReserveStatus.OK
    assert (await store.bindings.bind(reserved.key, reserved.metadata.uid, 1, "n2")).status == "ok"
    for pod, node in ((running, "n1"), (at_once, "n2"), (reserved, "n2")):
        later = await store.bindings.reserve(request(pod, "n1", attempt=5), NOW)
        assert (later.status, later.node) == (ReserveStatus.BOUND, node), pod.key


async def test_an_abandoned_reservation_superseded_by_a_binding_at_once_leaves_no_expiry(
    store: ClusterStore,
):
    pod = make_pod("p").req(cpu="1").obj()
    await _setup(store, pod)
    assert (await store.bindings.reserve(request(pod), NOW)).status is ReserveStatus.OK
    assert await store.redis.zcard(store.keys.reservations) == 1
    again = await store.bindings.reserve(request(pod, attempt=2, bind_at_once=True), NOW)
    assert again.status is ReserveStatus.BOUND_AT_ONCE
    assert await store.redis.zcard(store.keys.reservations) == 0
    assert await store.bindings.expire(NOW + 10_000) == ()
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 1000})


async def test_a_node_whose_pods_all_left_keeps_its_usage_in_the_snapshot(store: ClusterStore):
    """A node is listed for the snapshot with its first pod and stays listed (usage at zero
    pods too), so the pods that come back are counted."""
    first = make_pod("first").req(cpu="1").obj()
    second = make_pod("second").req(cpu="2").obj()
    await _setup(store, first, second)
    bound = await store.bindings.reserve(request(first, bind_at_once=True), NOW)
    assert bound.status is ReserveStatus.BOUND_AT_ONCE
    assert (await store.load_snapshot()).usage["n1"] == NodeUsage(1, {"cpu": 1000})
    assert await store.delete("Pod", "default", "first") is not None
    assert (await store.load_snapshot()).usage["n1"] == NodeUsage()
    again = await store.bindings.reserve(request(second, bind_at_once=True), NOW)
    assert again.status is ReserveStatus.BOUND_AT_ONCE
    assert (await store.load_snapshot()).usage["n1"] == NodeUsage(1, {"cpu": 2000})
