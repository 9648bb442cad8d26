"""WaitOnPermit for coscheduling gangs (scheduler-plugins PodGroup API), against real Redis:
success, timeout, members in two binders, and partial gangs competing for too little room."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from shared.config import load_config
from shared.models import POD_GROUP_LABEL, Pod
from shared.store import NodeUsage
from tests.binder.conftest import Harness, make_harness, proposal
from tests.builders import make_node, make_pod, make_pod_group


def member(name: str, group: str) -> Pod:
    return make_pod(name).label(POD_GROUP_LABEL, group).req(cpu="1").obj()


def nodes(count: int, pods: int = 110):
    return [make_node(f"n{i}").capacity(cpu="8", pods=pods).obj() for i in range(count)]


async def test_gang_binds_once_min_member_are_reserved(harness: Harness):
    members = [member(f"m{i}", "train") for i in range(3)]
    await harness.store.apply([*nodes(3), make_pod_group("train", 3), *members])
    await harness.run(*(proposal(m, f"n{i}") for i, m in enumerate(members)))
    results = harness.recorder.results()
    assert results == {m.key: ["scheduled"] for m in members}
    extends = [o for o in harness.recorder.outcomes if o.result == "extend"]
    # the first two reserved wait for the third (nodes differ: any order)
    assert len({o.pod_key for o in extends}) == len(extends) == 2
    assert all(o.lease_seconds and o.lease_seconds > 60 for o in extends)  # default timeout
    for i in range(3):
        assert await harness.store.usage(f"n{i}") == NodeUsage(1, {"cpu": 1000})


async def test_late_member_of_a_bound_gang_binds_at_once(harness: Harness):
    members = [member(f"m{i}", "train") for i in range(3)]
    await harness.store.apply([*nodes(1), make_pod_group("train", 2), *members])
    await harness.run(*(proposal(m, "n0") for m in members[:2]))
    await harness.run(proposal(members[2], "n0"))
    assert harness.recorder.results() == {m.key: ["scheduled"] for m in members}
    assert [o.pod_key for o in harness.recorder.outcomes if o.result == "extend"] == ["default/m0"]


async def test_gang_times_out_and_releases_everything(harness: Harness):
    members = [member(f"m{i}", "train") for i in range(2)]
    group = make_pod_group("train", 3, schedule_timeout_seconds=1)
    await harness.store.apply([*nodes(2), group, *members])
    started = time.monotonic()
    await harness.run(*(proposal(m, f"n{i}") for i, m in enumerate(members)))
    assert 0.9 < time.monotonic() - started < 5
    final = harness.recorder.final()
    assert {(o.pod_key, o.result) for o in final} == {
        ("default/m0", "unschedulable"),
        ("default/m1", "unschedulable"),
    }
    assert all(o.unschedulable_plugins == ("Coscheduling",) for o in final)
    assert all(o.message.startswith("rejected due to timeout after waiting") for o in final)
    for i in range(2):
        assert await harness.store.usage(f"n{i}") == NodeUsage()
    for m in members:
        assert await harness.store.bindings.attempt_of(m.metadata.uid) == (1, "u")
    # the next attempts, with the whole gang, succeed
    third = member("m2", "train")
    await harness.store.apply([third])
    await harness.run(*(proposal(m, "n0", 2) for m in members), proposal(third, "n1", 2))
    assert [o.result for o in harness.recorder.final()[2:]] == ["scheduled"] * 3


async def test_gang_members_in_two_binders(
    harness: Harness, redis_client: aioredis.Redis, redis_prefix: str
):
    other = await make_harness(redis_client, redis_prefix)
    try:
        members = [member(f"m{i}", "train") for i in range(4)]
        await harness.store.apply([*nodes(4), make_pod_group("train", 4), *members])
        await asyncio.gather(
            harness.run(proposal(members[0], "n0"), proposal(members[2], "n2")),
            other.run(proposal(members[1], "n1"), proposal(members[3], "n3")),
        )
        outcomes = harness.recorder.final() + other.recorder.final()
        assert sorted((o.pod_key, o.result) for o in outcomes) == [
            (m.key, "scheduled") for m in members
        ]
    finally:
        await other.binder.close()
        await other.sync.stop()


async def test_competing_partial_gangs_do_not_deadlock(harness: Harness):
    """Two gangs of 3 and room for 4 pods: each reserves 2 and waits for a third that does not
    fit. Both time out and give everything back (no reservation is held forever), and a gang
    that then comes whole binds."""
    a = [member(f"a{i}", "ga") for i in range(3)]
    b = [member(f"b{i}", "gb") for i in range(3)]
    groups = [
        make_pod_group("ga", 3, schedule_timeout_seconds=1),
        make_pod_group("gb", 3, schedule_timeout_seconds=1),
    ]
    await harness.store.apply([*nodes(2, pods=2), *groups, *a, *b])
    interleaved = [a[0], b[0], a[1], b[1], a[2], b[2]]
    started = time.monotonic()
    await harness.run(*(proposal(p, f"n{i % 2}") for i, p in enumerate(interleaved)))
    assert time.monotonic() - started < 5
    results = harness.recorder.results()
    assert results["default/a2"] == ["conflict"]
    assert results["default/b2"] == ["conflict"]
    for key in ("default/a0", "default/a1", "default/b0", "default/b1"):
        assert results[key] == ["unschedulable"]
    for i in range(2):
        assert await harness.store.usage(f"n{i}") == NodeUsage()
    # gang a, whole this time, takes three of the four slots; gang b cannot complete and
    # gives its one reservation back at its timeout
    await harness.run(
        proposal(a[0], "n0", 2),
        proposal(b[0], "n1", 2),
        proposal(a[1], "n0", 2),
        proposal(a[2], "n1", 2),
    )
    tail = {(o.pod_key, o.result) for o in harness.recorder.final()[6:]}
    assert tail == {
        ("default/a0", "scheduled"),
        ("default/a1", "scheduled"),
        ("default/a2", "scheduled"),
        ("default/b0", "unschedulable"),
    }
    usage = [await harness.store.usage(f"n{i}") for i in range(2)]
    assert sum(u.pods for u in usage) == 3


async def test_missing_pod_group(harness: Harness):
    pod = member("m0", "nowhere")
    await harness.store.apply([*nodes(1), pod])
    await harness.run(proposal(pod, "n0"))
    (outcome,) = harness.recorder.outcomes
    assert (outcome.result, outcome.unschedulable_plugins) == ("unschedulable", ("Coscheduling",))
    assert outcome.message == "PodGroup default/nowhere not found"
    assert await harness.store.usage("n0") == NodeUsage()


async def test_a_permit_wait_without_a_gang_times_out(harness: Harness):
    pod = make_pod("p").obj()
    await harness.store.apply([*nodes(1), pod])
    await harness.run(
        proposal(pod, "n0", permit="wait", permit_timeout_seconds=0.3, permit_plugins=("Gate",))
    )
    assert [o.result for o in harness.recorder.outcomes] == ["extend", "unschedulable"]
    outcome = harness.recorder.outcomes[-1]
    assert outcome.unschedulable_plugins == ("Gate",)
    assert outcome.message == "rejected due to timeout after waiting 300ms at plugin Gate"
    assert await harness.store.usage("n0") == NodeUsage()


async def test_waiting_pods_do_not_hold_in_flight_slots(
    redis_client: aioredis.Redis, redis_prefix: str
):
    """With one in-flight slot, a gang of 3 still completes: waiting members give it up."""
    h = await make_harness(redis_client, redis_prefix, max_in_flight=1)
    try:
        members = [member(f"m{i}", "train") for i in range(3)]
        await h.store.apply([*nodes(1), make_pod_group("train", 3), *members])
        await h.run(*(proposal(m, "n0") for m in members))
        assert h.recorder.results() == {m.key: ["scheduled"] for m in members}
    finally:
        await h.binder.close()
        await h.sync.stop()


NO_GANGS = (
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    "profiles:\n- plugins: {permit: {disabled: [{name: Coscheduling}]}}\n"
)


async def test_a_profile_without_coscheduling_binds_gang_pods_at_once(
    redis_client: aioredis.Redis, redis_prefix: str
):
    """Coscheduling disabled at Permit: a labelled pod is an ordinary pod (no wait, no
    extension, no PodGroup needed), even when its PodGroup asks for more members."""
    h = await make_harness(redis_client, redis_prefix, scheduler_config=load_config(NO_GANGS))
    try:
        alone, orphan = member("m0", "train"), member("o0", "nowhere")
        await h.store.apply([*nodes(1), make_pod_group("train", 3), alone, orphan])
        started = time.monotonic()
        await h.run(proposal(alone, "n0"), proposal(orphan, "n0"))
        assert time.monotonic() - started < 2
        # Both bound (in either order: proposals for one node reserve in arrival order, but
        # their outcomes are sent as each binding completes).
        assert sorted((o.pod_key, o.result) for o in h.recorder.outcomes) == [
            ("default/m0", "scheduled"),
            ("default/o0", "scheduled"),
        ]
        assert await h.store.usage("n0") == NodeUsage(2, {"cpu": 2000})
    finally:
        await h.binder.close()
        await h.sync.stop()


async def test_the_gang_wait_comes_from_the_profile_args(
    redis_client: aioredis.Redis, redis_prefix: str
):
    """No scheduleTimeoutSeconds on the PodGroup: the profile's permitWaitingTimeSeconds."""
    config = load_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- pluginConfig: [{name: Coscheduling, args: {permitWaitingTimeSeconds: 1}}]\n"
    )
    h = await make_harness(redis_client, redis_prefix, scheduler_config=config)
    try:
        members = [member(f"m{i}", "train") for i in range(2)]
        await h.store.apply([*nodes(1), make_pod_group("train", 3), *members])
        started = time.monotonic()
        await h.run(*(proposal(m, "n0") for m in members))
        assert 0.9 < time.monotonic() - started < 5
        final = h.recorder.final()
        assert {o.result for o in final} == {"unschedulable"}
        assert all(
            o.message == "rejected due to timeout after waiting 1s at plugin Coscheduling"
            for o in final
        )
        extends = [o for o in h.recorder.outcomes if o.result == "extend"]
        assert {o.lease_seconds for o in extends} == {1 + 10.0}  # wait + lease margin
    finally:
        await h.binder.close()
        await h.sync.stop()
