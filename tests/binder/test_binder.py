"""The binding cycle against the session's real Redis: check-and-reserve, cross-node checks,
idempotency, preemption. (Gangs: test_gangs.py; Kafka: test_service.py.)"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from shared.config import load_config
from shared.models import Pod, PodDisruptionBudget
from shared.observability.metrics import BerthMetrics
from shared.store import NodeUsage, PodCharge, ReserveRequest, ReserveStatus
from tests.binder.conftest import Harness, make_harness, proposal
from tests.builders import label_selector, make_node, make_pdb, make_pod

ZONE = "topology.kubernetes.io/zone"


def last_result(harness: Harness) -> str:
    return harness.recorder.outcomes[-1].result


def node(name: str, zone: str = "a", cpu: str = "4", pods: int = 110):
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=pods).label(ZONE, zone)


async def test_bind(harness: Harness):
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await harness.run(proposal(pod, "n1"))
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.node_name, outcome.uid, outcome.attempt) == (
        "scheduled",
        "n1",
        pod.metadata.uid,
        1,
    )
    stored = await harness.store.get_pod("default", "p")
    assert stored is not None
    assert stored.spec.node_name == "n1"
    assert await harness.store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert harness.binder.stats["bound"] == 1


@pytest.mark.parametrize(
    ("the_node", "the_pod", "message"),
    [
        pytest.param(node("n1", cpu="1"), make_pod("p").req(cpu="2"), "Insufficient cpu", id="cpu"),
        pytest.param(node("n1", pods=0), make_pod("p"), "Too many pods", id="pods"),
        pytest.param(
            node("n1").taint("dedicated", "gpu"),
            make_pod("p"),
            "node(s) had untolerated taint {dedicated: gpu}",
            id="taint",
        ),
        pytest.param(
            node("n1").unschedulable(), make_pod("p"), "node(s) were unschedulable", id="cordon"
        ),
    ],
)
async def test_node_local_conflicts(harness: Harness, the_node, the_pod, message):
    pod = the_pod.obj()
    await harness.store.apply([the_node.obj(), pod])
    await harness.run(proposal(pod, "n1"))
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.message) == ("conflict", message)
    assert await harness.store.usage("n1") == NodeUsage()


async def test_missing_node_is_a_conflict(harness: Harness):
    pod = make_pod("p").obj()
    await harness.store.apply([pod])
    await harness.run(proposal(pod, "ghost"))
    assert [(o.result, o.message) for o in harness.recorder.outcomes] == [
        ("conflict", 'node "ghost" not found')
    ]


async def test_many_concurrent_proposals_never_overcommit(harness: Harness):
    pods = [make_pod(f"p{i:02}").req(cpu="500m").obj() for i in range(40)]
    await harness.store.apply([node("n1", cpu="4").obj(), *pods])  # room for 8
    await harness.run(*(proposal(p, "n1") for p in pods))
    results = harness.recorder.results()
    scheduled = sorted(k for k, r in results.items() if r == ["scheduled"])
    assert len(scheduled) == 8
    # proposals for one node reserve in arrival order: the first eight win
    assert scheduled == [f"default/p{i:02}" for i in range(8)]
    assert all(r == ["conflict"] for k, r in results.items() if k not in scheduled)
    assert await harness.store.usage("n1") == NodeUsage(8, {"cpu": 4000})


async def test_proposals_for_one_node_do_not_wait_for_each_others_replies(harness: Harness):
    """Proposals for one node queue their check-and-reserve calls in arrival order, each
    without waiting for the reply to the one before (the batcher keeps the order in Redis):
    a burst for one node is a few pipelines, not one round trip per proposal."""
    pods = [make_pod(f"p{i:02}").req(cpu="500m").obj() for i in range(40)]
    await harness.store.apply([node("n1", cpu="4").obj(), *pods])  # room for 8
    batcher = harness.binder.bindings.batcher
    before = batcher.batches
    await harness.run(*(proposal(p, "n1") for p in pods))
    assert batcher.batches - before <= 3
    scheduled = sorted(k for k, r in harness.recorder.results().items() if r == ["scheduled"])
    assert scheduled == [f"default/p{i:02}" for i in range(8)]  # still in arrival order


async def test_two_binders_racing_never_overcommit(
    harness: Harness, redis_client: aioredis.Redis, redis_prefix: str
):
    other = await make_harness(redis_client, redis_prefix)
    try:
        pods = [make_pod(f"p{i}").req(cpu="1").obj() for i in range(30)]
        await harness.store.apply([node("n1", cpu="5").obj(), *pods])
        await asyncio.gather(
            harness.run(*(proposal(p, "n1") for p in pods[::2])),
            other.run(*(proposal(p, "n1") for p in pods[1::2])),
        )
        outcomes = harness.recorder.final() + other.recorder.final()
        assert len(outcomes) == 30
        assert sum(o.result == "scheduled" for o in outcomes) == 5
        assert await harness.store.usage("n1") == NodeUsage(5, {"cpu": 5000})
        bound = [p for p in await harness.store.list("Pod") if isinstance(p, Pod)]
        assert sum(bool(p.spec.node_name) for p in bound) == 5
    finally:
        await other.binder.close()
        await other.sync.stop()


async def test_duplicates_and_stale_attempts_change_nothing(harness: Harness):
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), node("n2").obj(), pod])
    # the same attempt twice at once: one binding cycle
    await harness.run(proposal(pod, "n1", 2), proposal(pod, "n1", 2))
    rv = await harness.store.resource_version()
    assert harness.recorder.results() == {"default/p": ["scheduled"]}
    # redelivered later (even to another node): the outcome again, nothing else
    await harness.run(proposal(pod, "n2", 2))
    # an older attempt: nothing at all
    await harness.run(proposal(pod, "n2", 1))
    assert harness.recorder.results() == {"default/p": ["scheduled", "scheduled"]}
    assert [o.node_name for o in harness.recorder.final()] == ["n1", "n1"]
    assert await harness.store.resource_version() == rv
    assert await harness.store.usage("n1") == NodeUsage(1, {"cpu": 1000})
    assert await harness.store.usage("n2") == NodeUsage()


async def test_a_newer_attempt_of_a_bound_pod_does_not_bind_it_twice(harness: Harness):
    pod = make_pod("p").obj()
    await harness.store.apply([node("n1").obj(), node("n2").obj(), pod])
    await harness.run(proposal(pod, "n1", 1))
    await harness.run(proposal(pod, "n2", 2))
    assert [(o.result, o.node_name) for o in harness.recorder.final()] == [
        ("scheduled", "n1"),
        ("scheduled", "n1"),
    ]
    assert await harness.store.usage("n2") == NodeUsage()


async def test_conflicting_attempt_is_recorded(harness: Harness):
    pod = make_pod("p").req(cpu="8").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await harness.run(proposal(pod, "n1", 1), proposal(pod, "n1", 1))
    assert harness.recorder.results() == {"default/p": ["conflict"]}
    assert await harness.store.bindings.attempt_of(pod.metadata.uid) == (1, "c")


async def test_pod_changed_since_scheduled(harness: Harness):
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    scheduled_as = proposal(pod, "n1")
    await harness.store.apply([make_pod("p").req(cpu="3").obj()])
    await harness.run(scheduled_as)
    assert [(o.result, o.message) for o in harness.recorder.outcomes] == [
        ("conflict", "the pod changed since it was scheduled")
    ]


async def test_deleted_pod_is_not_bound(harness: Harness):
    pod = make_pod("p").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await harness.store.delete("Pod", "default", "p")
    await harness.run(proposal(pod, "n1"))
    assert [o.result for o in harness.recorder.outcomes] == ["error"]
    assert await harness.store.usage("n1") == NodeUsage()


@pytest.mark.parametrize(
    ("new_labels", "want"),
    [
        pytest.param({ZONE: "a", "disk": "ssd"}, "scheduled", id="irrelevant-change"),
        pytest.param({ZONE: "b"}, "conflict", id="affinity-broken"),
    ],
)
async def test_node_changed_since_the_worker_saw_it(harness: Harness, new_labels, want):
    pod = make_pod("p").node_affinity_in(ZONE, ["a"]).obj()
    n1 = node("n1").obj()
    await harness.store.apply([n1, pod])
    seen = 1  # the node's resourceVersion in the worker's snapshot
    changed = node("n1").obj()
    changed.metadata.labels = new_labels
    await harness.store.apply([changed])
    await harness.run(proposal(pod, "n1", node_resource_version=seen))
    (outcome,) = harness.recorder.outcomes
    assert outcome.result == want
    if want == "conflict":
        assert outcome.unschedulable_plugins == ("NodeAffinity",)


def anti(name: str, app: str = "db") -> Pod:
    selector = label_selector({"app": app})
    return make_pod(name).label("app", app).pod_affinity(ZONE, selector, anti=True).obj()


async def test_required_anti_affinity_against_bound_pods(harness: Harness):
    bound = make_pod("existing").label("app", "db").node("n1").obj()
    pod = anti("new")
    await harness.store.apply([node("n1").obj(), node("n2").obj(), node("n3", "b").obj()])
    await harness.store.apply([bound, pod])
    await harness.run(proposal(pod, "n2"))
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.unschedulable_plugins) == ("conflict", ("InterPodAffinity",))
    assert outcome.message == "node(s) didn't match pod anti-affinity rules"
    assert await harness.store.usage("n2") == NodeUsage()
    await harness.run(proposal(pod, "n3", 2))
    assert harness.recorder.outcomes[-1].result == "scheduled"


async def test_proposals_in_flight_see_each_other(harness: Harness):
    """Two pods that repel each other, proposed at once to one zone: one wins."""
    a, b = anti("a"), anti("b")
    await harness.store.apply([node("n1").obj(), node("n2").obj(), a, b])
    await harness.run(proposal(a, "n1"), proposal(b, "n2"))
    assert sorted(o.result for o in harness.recorder.outcomes) == ["conflict", "scheduled"]


async def test_topology_spread_do_not_schedule(harness: Harness):
    def spread(name: str) -> Pod:
        return (
            make_pod(name)
            .label("app", "web")
            .spread_constraint(1, ZONE, "DoNotSchedule", label_selector({"app": "web"}))
            .obj()
        )

    nodes = [node("a1").obj(), node("b1", "b").obj()]
    first, second, third = spread("w1"), spread("w2"), spread("w3")
    await harness.store.apply([*nodes, first, second, third])
    await harness.run(proposal(first, "a1"))
    await harness.run(proposal(second, "a1"))  # zone a 2, zone b 0: skew 2 > 1
    await harness.run(proposal(third, "b1"))
    assert [(o.pod_key, o.result) for o in harness.recorder.final()] == [
        ("default/w1", "scheduled"),
        ("default/w2", "conflict"),
        ("default/w3", "scheduled"),
    ]
    assert harness.recorder.final()[1].unschedulable_plugins == ("PodTopologySpread",)


async def test_adopts_a_reservation_nobody_drives(harness: Harness):
    """A binder reserved, then died before committing the proposal: the redelivered proposal
    is a duplicate whose reservation this binder takes through Permit and Bind."""
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    request = ReserveRequest(
        pod.key, pod.metadata.uid, 4, "n1", 0, PodCharge.of(pod), (("cpu", 1000),)
    )
    assert (await harness.store.bindings.reserve(request, 0.0)).status is ReserveStatus.OK
    await harness.run(proposal(pod, "n1", 4))
    assert [(o.result, o.node_name) for o in harness.recorder.outcomes] == [("scheduled", "n1")]
    assert harness.binder.stats["adopted"] == 1
    assert await harness.store.usage("n1") == NodeUsage(1, {"cpu": 1000})


async def test_preemption_evicts_victims_and_nominates(harness: Harness):
    victim = make_pod("victim").priority(0).req(cpu="3").node("n1").obj()
    preemptor = make_pod("vip").priority(100).req(cpu="3").obj()
    low = make_pod("low").priority(0).req(cpu="2").obj()
    await harness.store.apply([node("n1").obj(), victim, preemptor, low])
    await harness.run(
        proposal(
            preemptor,
            "n1",
            victims=(victim,),
            unschedulable_plugins=("NodeResourcesFit",),
            message="0/1 nodes are available: 1 Insufficient cpu.",
        )
    )
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.nominated_node_name, outcome.unschedulable_plugins) == (
        "unschedulable",
        "n1",
        ("NodeResourcesFit",),
    )
    assert await harness.store.get_pod("default", "victim") is None
    stored = await harness.store.get_pod("default", "vip")
    assert stored is not None
    assert stored.status.nominated_node_name == "n1"
    # the nomination holds the room against pods of lower priority
    await harness.run(proposal(low, "n1"))
    assert last_result(harness) == "conflict"
    # the preemptor's next attempt binds and clears its nomination
    await harness.run(proposal(stored, "n1", 2))
    assert last_result(harness) == "scheduled"
    stored = await harness.store.get_pod("default", "vip")
    assert stored is not None
    assert (stored.spec.node_name, stored.status.nominated_node_name) == ("n1", "")
    # a duplicate of the preemption does nothing
    before = await harness.store.resource_version()
    await harness.run(proposal(preemptor, "n1", victims=(victim,)))
    assert await harness.store.resource_version() == before


@pytest.mark.parametrize(
    ("honors_pdb", "victim_left"),
    [
        pytest.param(False, False, id="upstream-deletes-anyway"),
        pytest.param(True, True, id="budget-stops-preemption"),
    ],
)
async def test_preemption_and_disruption_budgets(
    redis_client: aioredis.Redis, redis_prefix: str, honors_pdb: bool, victim_left: bool
):
    h = await make_harness(redis_client, redis_prefix, preemption_honors_pdb=honors_pdb)
    try:
        victim = make_pod("victim").label("app", "db").req(cpu="3").node("n1").obj()
        budget = make_pdb("db", label_selector({"app": "db"}), min_available=1)
        preemptor = make_pod("vip").priority(100).req(cpu="3").obj()
        await h.store.apply([node("n1").obj(), victim, budget, preemptor])
        await h.view.wait_for(await h.store.resource_version(), 5)
        await h.run(proposal(preemptor, "n1", victims=(victim,)))
        assert (await h.store.get_pod("default", "victim") is not None) is victim_left
        (outcome,) = h.recorder.outcomes
        assert outcome.result == "unschedulable"
        assert outcome.nominated_node_name == (None if honors_pdb else "n1")
    finally:
        await h.binder.close()
        await h.sync.stop()


async def test_preemption_updates_an_allowing_budget(harness: Harness):
    victims = [make_pod(f"v{i}").label("app", "db").req(cpu="2").node("n1").obj() for i in range(2)]
    budget = make_pdb("db", label_selector({"app": "db"}), max_unavailable=1)
    preemptor = make_pod("vip").priority(100).req(cpu="2").obj()
    await harness.store.apply([node("n1").obj(), *victims, budget, preemptor])
    await harness.view.wait_for(await harness.store.resource_version(), 5)
    await harness.run(proposal(preemptor, "n1", victims=(victims[0],)))
    stored = await harness.store.get_as(PodDisruptionBudget, "default", "db")
    assert stored is not None
    assert stored.status.disruptions_allowed == 0  # 1 allowed, 1 used
    assert await harness.store.get_pod("default", "v0") is None


async def test_binding_metrics(redis_client: aioredis.Redis, redis_prefix: str):
    registry = CollectorRegistry()
    h = await make_harness(redis_client, redis_prefix, metrics=BerthMetrics(registry))
    try:
        fits, too_big = make_pod("fits").req(cpu="1").obj(), make_pod("big").req(cpu="9").obj()
        await h.store.apply([node("n1").obj(), fits, too_big])
        await h.run(proposal(fits, "n1"), proposal(too_big, "n1"))
        count = "berth_binding_duration_seconds_count"
        assert registry.get_sample_value(count, {"result": "scheduled"}) == 1
        assert registry.get_sample_value(count, {"result": "conflict"}) == 1
        assert registry.get_sample_value("berth_conflicts_total", {"reason": "reserve"}) == 1
        # kube-scheduler's attempt counts: the binder ends these attempts, so it counts them.
        attempts = "scheduler_schedule_attempts_total"
        for result in ("scheduled", "conflict"):
            labels = {"result": result, "profile": "default-scheduler"}
            assert registry.get_sample_value(attempts, labels) == 1
        assert registry.get_sample_value("scheduler_pod_scheduling_attempts_count") == 1
    finally:
        await h.binder.close()
        await h.sync.stop()


def web(name: str) -> Pod:
    """A pod of app "web" spread over zones (DoNotSchedule, maxSkew 1)."""
    selector = label_selector({"app": "web"})
    return (
        make_pod(name).label("app", "web").spread_constraint(1, ZONE, "DoNotSchedule", selector)
    ).obj()


async def test_cross_node_checks_count_every_earlier_proposal(harness: Harness):
    """One worker decided `first` (zone c) and then `second` (zone a) counting `first`.
    `second` reserves before `first` does (`first` waits behind `blocker` for node c1's
    lock), yet its check must still count `first`: zone a 2, b 1, c 1 is skew 1, while
    without `first` it would be a 2-0 skew and a false conflict."""
    running = [
        make_pod("web-a").label("app", "web").node("a1").obj(),
        make_pod("web-b").label("app", "web").node("b1").obj(),
    ]
    blocker, first, second = make_pod("blocker").obj(), web("first"), web("second")
    cluster = [node("a1", "a"), node("b1", "b"), node("c1", "c")]
    await harness.store.apply([*(n.obj() for n in cluster), *running])
    await harness.store.apply([blocker, first, second])
    await harness.view.wait_for(await harness.store.resource_version(), 5)
    await harness.run(proposal(blocker, "c1"), proposal(first, "c1"), proposal(second, "a1"))
    assert harness.recorder.results() == {
        "default/blocker": ["scheduled"],
        "default/first": ["scheduled"],
        "default/second": ["scheduled"],
    }


async def test_cross_node_checks_still_catch_a_real_violation(harness: Harness):
    """The same order, but `second` would break the spread even with `first` counted."""
    running = [make_pod("web-a").label("app", "web").node("a1").obj()]
    blocker, first, second = make_pod("blocker").obj(), web("first"), web("second")
    cluster = [node("a1", "a"), node("b1", "b"), node("c1", "c")]
    await harness.store.apply([*(n.obj() for n in cluster), *running])
    await harness.store.apply([blocker, first, second])
    await harness.view.wait_for(await harness.store.resource_version(), 5)
    await harness.run(proposal(blocker, "c1"), proposal(first, "c1"), proposal(second, "a1"))
    results = harness.recorder.results()
    assert (results["default/first"], results["default/second"]) == (["scheduled"], ["conflict"])


def reserve_request(pod: Pod, attempt: int, cpu: int = 1000, ttl: float = 120.0):
    return ReserveRequest(
        pod.key,
        pod.metadata.uid,
        attempt,
        "n1",
        0,
        PodCharge.of(pod),
        (("cpu", cpu),),
        ttl_seconds=ttl,
    )


async def _ended_by_node_local_conflict(h: Harness, pod: Pod) -> None:
    result = await h.store.bindings.reserve(reserve_request(pod, 1, cpu=64_000), 0.0)
    assert result.status is ReserveStatus.CONFLICT


def _ended_by(state: str):
    async def end(h: Harness, pod: Pod) -> None:
        assert (await h.store.bindings.reserve(reserve_request(pod, 1), 0.0)).status is (
            ReserveStatus.OK
        )
        await h.store.bindings.unreserve(pod.key, pod.metadata.uid, 1, state)  # type: ignore[arg-type]

    return end


async def _ended_by_expiry(h: Harness, pod: Pod) -> None:
    await h.store.bindings.reserve(reserve_request(pod, 1, ttl=0.0), 0.0)
    (released,) = await h.store.bindings.expire(1.0)
    assert released.uid == pod.metadata.uid


@pytest.mark.parametrize(
    ("end_attempt", "overrides", "expected"),
    [
        pytest.param(
            _ended_by_node_local_conflict,
            {},
            ("conflict", "the attempt ended in a conflict"),
            id="node-local-conflict",
        ),
        pytest.param(
            _ended_by("c"), {}, ("conflict", "the attempt ended in a conflict"), id="cross-node"
        ),
        pytest.param(
            _ended_by_expiry, {}, ("conflict", "the reservation expired"), id="reservation-expired"
        ),
        pytest.param(
            _ended_by("u"),
            {"permit": "wait", "permit_timeout_seconds": 5.0, "permit_plugins": ("FakePermit",)},
            ("unschedulable", "rejected due to timeout after waiting 5s at plugin FakePermit"),
            id="permit-rejected",
        ),
        pytest.param(_ended_by("e"), {}, ("error", "binder: the attempt failed"), id="error"),
    ],
)
async def test_a_redelivered_proposal_of_an_ended_attempt_reports_its_outcome(
    harness: Harness, end_attempt, overrides, expected
):
    """A binder ended the attempt (recorded in the store) and died before sending the
    outcome: the redelivered proposal sends it, instead of leaving the pod to its lease."""
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await end_attempt(harness, pod)
    before = await harness.store.resource_version()
    await harness.run(proposal(pod, "n1", 1, **overrides))
    assert [(o.result, o.message, o.attempt) for o in harness.recorder.final()] == [(*expected, 1)]
    assert await harness.store.usage("n1") == NodeUsage()
    assert await harness.store.resource_version() == before


async def test_a_redelivered_proposal_of_a_pod_that_changed_reports_the_conflict(
    harness: Harness,
):
    """The first binder found the pod changed, recorded the conflict and died."""
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    scheduled_as = proposal(pod, "n1")
    await harness.store.apply([make_pod("p").req(cpu="3").obj()])
    assert (await harness.store.bindings.claim(pod.metadata.uid, 1, "c"))[0] == "ok"
    await harness.run(scheduled_as)
    assert [(o.result, o.message) for o in harness.recorder.final()] == [
        ("conflict", "the pod changed since it was scheduled")
    ]


async def test_a_redelivered_preemption_finishes_what_a_dead_binder_started(harness: Harness):
    """The first binder claimed the preemption and died before evicting anyone."""
    victim = make_pod("victim").priority(0).req(cpu="3").node("n1").obj()
    preemptor = make_pod("vip").priority(100).req(cpu="3").obj()
    await harness.store.apply([node("n1").obj(), victim, preemptor])
    assert (await harness.store.bindings.claim(preemptor.metadata.uid, 1, "p"))[0] == "ok"
    await harness.run(proposal(preemptor, "n1", victims=(victim,), message="0/1 nodes"))
    assert [(o.result, o.nominated_node_name) for o in harness.recorder.final()] == [
        ("unschedulable", "n1")
    ]
    assert await harness.store.get_pod("default", "victim") is None
    stored = await harness.store.get_pod("default", "vip")
    assert stored is not None
    assert stored.status.nominated_node_name == "n1"


def zone_anti(name: str, app: str) -> Pod:
    """A pod that refuses to share a zone with another pod of `app`."""
    selector = label_selector({"app": app})
    return make_pod(name).label("app", app).pod_affinity(ZONE, selector, anti=True).obj()


async def test_two_binders_never_both_pass_pods_that_exclude_each_other(
    harness: Harness, redis_client: aioredis.Redis, redis_prefix: str
):
    """Ten zones, in each two pods that refuse to share it, proposed at the same moment to
    two binders (as two workers would): the one that reserved second must count the other's
    reservation, so exactly one of each pair binds (not both, and not neither)."""
    other = await make_harness(redis_client, redis_prefix)
    try:
        zones = [f"z{i}" for i in range(10)]
        cluster = [node(f"{z}-{side}", z).obj() for z in zones for side in "ab"]
        firsts = [zone_anti(f"{z}-first", f"app-{z}") for z in zones]
        seconds = [zone_anti(f"{z}-second", f"app-{z}") for z in zones]
        await harness.store.apply([*cluster, *firsts, *seconds])
        rv = await harness.store.resource_version()
        await harness.view.wait_for(rv, 5)
        await other.view.wait_for(rv, 5)
        await asyncio.gather(
            harness.run(*(proposal(p, f"{z}-a") for p, z in zip(firsts, zones, strict=True))),
            other.run(*(proposal(p, f"{z}-b") for p, z in zip(seconds, zones, strict=True))),
        )
        results = harness.recorder.results() | other.recorder.results()
        for z in zones:
            pair = sorted(results[f"default/{z}-{which}"][0] for which in ("first", "second"))
            assert pair == ["conflict", "scheduled"], z
        bound = [p for p in await harness.store.list("Pod") if isinstance(p, Pod)]
        assert sum(bool(p.spec.node_name) for p in bound) == len(zones)
    finally:
        await other.binder.close()
        await other.sync.stop()


async def test_an_adopted_reservation_is_checked_before_it_binds(harness: Harness):
    """A binder reserved `new` and died before its cross-node check: the binder that adopts
    the reservation must run the check itself (and not count `new` against itself)."""
    existing = make_pod("existing").label("app", "db").node("n1").obj()
    new, fine = anti("new"), zone_anti("fine", "web")
    await harness.store.apply([node("n1").obj(), node("n2", "b").obj(), existing, new, fine])
    for pod, node_name in ((new, "n1"), (fine, "n2")):
        held = ReserveRequest(
            pod.key, pod.metadata.uid, 3, node_name, 0, PodCharge.of(pod), holder="dead"
        )
        assert (await harness.store.bindings.reserve(held, 0.0)).status is ReserveStatus.OK
    await harness.view.wait_for(await harness.store.resource_version(), 5)
    await harness.run(proposal(new, "n1", 3), proposal(fine, "n2", 3))
    assert harness.recorder.results() == {
        "default/new": ["conflict"],
        "default/fine": ["scheduled"],
    }
    assert harness.binder.stats["adopted"] == 2
    assert await harness.store.usage("n1") == NodeUsage(1)
    assert await harness.store.bindings.attempt_of(new.metadata.uid) == (3, "c")


async def _node_versions(harness: Harness, *nodes) -> dict[str, int]:
    applied = await harness.store.apply([n.obj() for n in nodes])
    return {a.key: a.resource_version for a in applied}


async def test_a_pod_without_cross_node_constraints_binds_at_once(harness: Harness):
    """As the worker proposes (the node's version it saw): one script binds it, with one
    change-stream entry, and no reservation is ever streamed."""
    versions = await _node_versions(harness, node("n1"))
    pod = make_pod("p").req(cpu="1").node_affinity_in(ZONE, ["a"]).obj()
    await harness.store.apply([pod])
    before = await harness.store.resource_version()
    assert await harness.view.wait_for(before, 5.0)  # the view has the node's version
    await harness.run(proposal(pod, "n1", node_resource_version=versions["n1"]))
    assert [(o.result, o.node_name) for o in harness.recorder.outcomes] == [("scheduled", "n1")]
    assert harness.binder.stats["bound_at_once"] == 1
    assert await harness.store.resource_version() == before + 1
    kinds = [c.kind async for c in harness.store.follow(before, block_ms=10, stop=_stop_after(1))]
    assert kinds == ["Pod"]
    assert await harness.store.usage("n1") == NodeUsage(1, {"cpu": 1000})


def _stop_after(seconds: float) -> asyncio.Event:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    return stop


async def test_binding_at_once_still_refuses_a_node_the_pod_does_not_select(harness: Harness):
    """A proposal is not taken on trust: NodeAffinity is checked on the node's version the
    proposal names (a forged proposal for a node in another zone)."""
    versions = await _node_versions(harness, node("n1"), node("n2", "b"))
    pod = make_pod("p").node_affinity_in(ZONE, ["a"]).obj()
    await harness.store.apply([pod])
    assert await harness.view.wait_for(await harness.store.resource_version(), 5.0)
    await harness.run(proposal(pod, "n2", node_resource_version=versions["n2"]))
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.unschedulable_plugins) == ("conflict", ("NodeAffinity",))
    assert await harness.store.usage("n2") == NodeUsage()


async def test_existing_anti_affinity_sends_plain_pods_through_the_cross_node_check(
    harness: Harness,
):
    """A bound pod whose required anti-affinity repels app=db from zone a: a db pod with no
    constraints of its own proposed to zone a is refused, in zone b bound (not at once)."""
    versions = await _node_versions(harness, node("n1"), node("n2"), node("n3", "b"))
    guard = make_pod("guard").pod_affinity(ZONE, label_selector({"app": "db"}), anti=True)
    await harness.store.apply([guard.node("n1").obj()])
    plain = make_pod("db").label("app", "db").obj()
    await harness.store.apply([plain])
    assert await harness.view.wait_for(await harness.store.resource_version(), 5.0)
    await harness.run(proposal(plain, "n2", node_resource_version=versions["n2"]))
    await harness.run(proposal(plain, "n3", 2, node_resource_version=versions["n3"]))
    assert [(o.result, o.unschedulable_plugins) for o in harness.recorder.outcomes] == [
        ("conflict", ("InterPodAffinity",)),
        ("scheduled", ()),
    ]
    assert harness.binder.stats["bound_at_once"] == 0


@pytest.mark.parametrize(
    ("disabled", "want"),
    [
        pytest.param("", ("conflict", ("NodeAffinity",)), id="default-profile"),
        pytest.param("NodeAffinity", ("scheduled", ()), id="node-affinity-disabled"),
    ],
)
async def test_the_binder_runs_the_profiles_own_filters(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    disabled: str,
    want: tuple[str, tuple[str, ...]],
):
    """The binder's re-checks are the profile's Filter plugins (built through the registry,
    expanded as the worker's framework expands them): a Filter the profile disables is not
    run, on the path that binds at once as on the full one."""
    plugins = (
        f"    plugins:\n      filter: {{disabled: [{{name: {disabled}}}]}}\n" if disabled else ""
    )
    config = load_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n  - schedulerName: default-scheduler\n" + plugins
    )
    h = await make_harness(redis_client, redis_prefix, scheduler_config=config)
    try:
        versions = await _node_versions(h, node("n1"), node("n2", "b"))
        pod = make_pod("p").node_affinity_in(ZONE, ["a"]).obj()
        spread = (
            make_pod("s")
            .label("app", "web")
            .node_affinity_in(ZONE, ["a"])
            .spread_constraint(1, ZONE, "DoNotSchedule", label_selector({"app": "web"}))
            .obj()
        )
        await h.store.apply([pod, spread])
        assert await h.view.wait_for(await h.store.resource_version(), 5.0)
        await h.run(proposal(pod, "n2", node_resource_version=versions["n2"]))
        await h.run(proposal(spread, "n2", node_resource_version=versions["n2"]))
        got = [(o.result, o.unschedulable_plugins) for o in h.recorder.outcomes]
        assert got == [want, want]
        assert h.binder.stats["bound_at_once"] == (1 if want[0] == "scheduled" else 0)
    finally:
        await h.binder.close()
        await h.sync.stop()
