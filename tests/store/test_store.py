"""Objects, the change stream and the atomic snapshot, against the session's real Redis."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import pytest
import redis.asyncio as aioredis

from shared.models import HostPort, KubeObject, Node, Pod
from shared.store import (
    RESERVATION,
    ApplyRejectedError,
    BodiesSkipped,
    Change,
    ClusterStore,
    HeldReservation,
    NodeUsage,
    PodCharge,
    ReserveRequest,
    ReserveStatus,
    StreamGapError,
)
from shared.store.store import APPLY_BATCH
from tests.builders import (
    make_namespace,
    make_node,
    make_pdb,
    make_pod,
    make_pod_group,
    make_priority_class,
)
from tests.stream import follow_all


async def test_apply_get_list_round_trip(store: ClusterStore):
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).label("zone", "a").obj()
    pod = make_pod("p1").namespace("ns").req(cpu="1").obj()
    applied = await store.apply([node, pod])
    assert [(a.kind, a.key, a.resource_version) for a in applied] == [
        ("Node", "n1", 1),
        ("Pod", "ns/p1", 2),
    ]
    got = await store.get_pod("ns", "p1")
    assert isinstance(got, Pod)
    assert got.metadata.resource_version == 2
    assert got.metadata.uid == pod.metadata.uid
    assert got.spec == pod.spec
    got_node = await store.get_node("n1")
    assert isinstance(got_node, Node)
    assert got_node.metadata.labels == {"zone": "a"}
    assert await store.get_pod("ns", "missing") is None
    assert [p.metadata.name for p in await store.list("Pod")] == ["p1"]
    assert await store.resource_version() == 2


async def test_update_keeps_uid_and_bumps_version(store: ClusterStore):
    first = make_pod("p").obj()
    second = make_pod("p").label("v", "2").obj()  # another generated uid, as from a manifest
    await store.apply([first])
    (applied,) = await store.apply([second])
    assert applied.uid == first.metadata.uid
    got = await store.get_pod("default", "p")
    assert got is not None
    assert got.metadata.uid == first.metadata.uid
    assert got.metadata.labels == {"v": "2"}
    assert got.metadata.resource_version == applied.resource_version == 2


async def test_every_kind_is_stored(store: ClusterStore):
    objects: list[KubeObject] = [
        make_node("n").obj(),
        make_pod("p").obj(),
        make_namespace("ns", {"team": "a"}),
        make_priority_class("high", 1000),
        make_pdb("budget", None, min_available=1),
        make_pod_group("gang", 3),
    ]
    await store.apply(objects)
    snapshot = await store.load_snapshot()
    assert {kind: len(items) for kind, items in snapshot.objects.items() if items} == {
        "Node": 1,
        "Pod": 1,
        "Namespace": 1,
        "PriorityClass": 1,
        "PodDisruptionBudget": 1,
        "PodGroup": 1,
    }
    assert snapshot.pod_groups[0].spec.min_member == 3


async def test_delete(store: ClusterStore):
    pod = make_pod("p").obj()
    await store.apply([pod])
    assert await store.delete("Pod", "default", "p", uid="someone-else") is None
    assert await store.get_pod("default", "p") is not None
    assert await store.delete("Pod", "default", "p", uid=pod.metadata.uid) == 2
    assert await store.get_pod("default", "p") is None
    assert await store.delete("Pod", "default", "p") is None
    assert await store.resource_version() == 2


async def test_change_stream_has_one_entry_per_write(store: ClusterStore):
    node = make_node("n1").obj()
    pod = make_pod("p1").obj()
    await store.apply([node, pod])
    await store.apply([make_pod("p1").label("x", "y").obj()])
    await store.delete("Node", "", "n1")
    changes = await _take(store, 0, 4)
    assert [(c.resource_version, c.op, c.kind, c.key) for c in changes] == [
        (1, "put", "Node", "n1"),
        (2, "put", "Pod", "default/p1"),
        (3, "put", "Pod", "default/p1"),
        (4, "delete", "Node", "n1"),
    ]
    updated = changes[2].object
    assert isinstance(updated, Pod)
    assert updated.metadata.labels == {"x": "y"}
    assert updated.metadata.uid == pod.metadata.uid
    assert updated.metadata.resource_version == 3
    assert isinstance(changes[3].object, Node)


async def test_follow_waits_for_new_changes(store: ClusterStore):
    follower = asyncio.create_task(_take(store, 0, 2, block_ms=50))
    await asyncio.sleep(0.1)
    assert not follower.done()
    await store.apply([make_node("a").obj(), make_node("b").obj()])
    changes = await asyncio.wait_for(follower, 5)
    assert [c.key for c in changes] == ["a", "b"]


async def test_follow_reports_a_trimmed_stream(store: ClusterStore, redis_client: aioredis.Redis):
    await store.apply([make_node(f"n{i}").obj() for i in range(10)])
    await redis_client.xtrim(store.keys.stream, maxlen=3, approximate=False)
    with pytest.raises(StreamGapError) as info:
        await _take(store, 2, 1)
    assert (info.value.position, info.value.first_available) == (2, 8)
    # A follower whose position is still in the stream is fine.
    assert [c.resource_version for c in await _take(store, 7, 3)] == [8, 9, 10]


async def test_snapshot_is_atomic_under_concurrent_writes(store: ClusterStore):
    """Each snapshot holds exactly the pods written at or before its resourceVersion."""
    written: dict[str, int] = {}

    async def writer() -> None:
        for i in range(300):
            (applied,) = await store.apply([make_pod(f"p{i}").obj()])
            written[applied.key] = applied.resource_version

    task = asyncio.create_task(writer())
    snapshots = []
    while not task.done():
        snapshots.append(await store.load_snapshot())
        await asyncio.sleep(0)
    await task
    assert len(snapshots) > 3
    for snapshot in snapshots:
        have = {p.key for p in snapshot.pods}
        want = {key for key, rv in written.items() if rv <= snapshot.resource_version}
        assert have == want
        # and following from the snapshot brings the rest, each exactly once
    last = snapshots[len(snapshots) // 2]
    rest = await _take(store, last.resource_version, 300 - len(last.pods))
    assert {p.key for p in last.pods} | {c.key for c in rest} == set(written)
    assert len(rest) + len(last.pods) == 300


async def test_prebound_pod_is_charged_and_released(store: ClusterStore):
    node = make_node("n1").capacity(cpu="4", pods=10).obj()
    pod = make_pod("p").req(cpu="1500m", memory="1Gi").host_port(8080).node("n1").obj()
    await store.apply([node, pod])
    assert await store.usage("n1") == NodeUsage(
        1, {"cpu": 1500, "memory": 1024**3}, {HostPort("TCP", 8080, "0.0.0.0"): 1}
    )
    # an update of the bound pod without nodeName keeps the binding and recharges
    await store.apply([make_pod("p").req(cpu="2").obj()])
    got = await store.get_pod("default", "p")
    assert got is not None
    assert got.spec.node_name == "n1"
    assert await store.usage("n1") == NodeUsage(1, {"cpu": 2000})
    snapshot = await store.load_snapshot()
    assert snapshot.usage["n1"] == NodeUsage(1, {"cpu": 2000})
    assert snapshot.pods[0].spec.node_name == "n1"
    await store.delete("Pod", "default", "p")
    assert await store.usage("n1") == NodeUsage()


async def test_bound_pod_cannot_move_and_a_rejected_batch_writes_nothing(store: ClusterStore):
    await store.apply([make_node("n1").obj(), make_node("n2").obj()])
    await store.apply([make_pod("p").node("n1").obj()])
    before = await store.resource_version()
    with pytest.raises(ApplyRejectedError) as info:
        await store.apply([make_pod("other").obj(), make_pod("p").node("n2").obj()])
    assert info.value.index == 1
    assert await store.resource_version() == before
    assert await store.get_pod("default", "other") is None


async def test_an_apply_of_several_batches_writes_all_or_nothing(store: ClusterStore):
    """The object that cannot be written is in the last batch: the earlier batches are not
    written either (every batch is checked before the first is written)."""
    await store.apply([make_node("n1").obj(), make_node("n2").obj()])
    await store.apply([make_pod("p").node("n1").obj()])
    before = await store.resource_version()
    many = [make_pod(f"new-{i}").obj() for i in range(2 * APPLY_BATCH + 5)]
    with pytest.raises(ApplyRejectedError) as info:
        await store.apply([*many, make_pod("p").node("n2").obj()])
    assert info.value.index == len(many)
    assert await store.resource_version() == before
    assert await store.get_pod("default", "new-0") is None
    assert len(await store.list("Pod")) == 1


def _count_apply_calls(store: ClusterStore) -> list[str]:
    """The first argument of each apply script call from now on ("check": a check pass)."""
    calls: list[str] = []
    script = store.scripts.apply

    async def counted(*, keys: Any, args: Any) -> Any:
        calls.append(str(args[0]))
        return await script(keys=keys, args=args)

    store.scripts = dataclasses.replace(store.scripts, apply=counted)  # type: ignore[arg-type]
    return calls


async def test_new_pods_in_several_batches_are_sent_once(store: ClusterStore):
    """Only a pod with spec.nodeName has anything for the store to check before the first
    batch is written: pods without one are not encoded and sent a second time for it."""
    await store.apply([make_node("n1").obj()])
    calls = _count_apply_calls(store)
    applied = await store.apply([make_pod(f"new-{i}").obj() for i in range(2 * APPLY_BATCH + 5)])
    assert len(applied) == 2 * APPLY_BATCH + 5
    assert calls == [str(store.stream_maxlen)] * 3
    calls.clear()
    bound = make_pod("bound").node("n1").obj()
    await store.apply([*(make_pod(f"more-{i}").obj() for i in range(APPLY_BATCH)), bound])
    assert calls == ["check", "check", str(store.stream_maxlen), str(store.stream_maxlen)]
    # The check alone (a caller applying in several calls): the same rule.
    calls.clear()
    await store.check_apply([make_pod(f"later-{i}").obj() for i in range(APPLY_BATCH + 1)])
    assert calls == []
    await store.check_apply([make_pod("later").obj(), make_pod("bound-2").node("n1").obj()])
    assert calls == ["check"]


async def test_an_object_without_a_name_in_a_later_batch_writes_nothing(store: ClusterStore):
    before = await store.resource_version()
    nameless = make_pod("x").obj()
    nameless.metadata.name = ""
    with pytest.raises(ValueError, match=r"Pod without metadata\.name"):
        await store.apply([*(make_pod(f"new-{i}").obj() for i in range(APPLY_BATCH)), nameless])
    assert await store.resource_version() == before


async def test_an_object_that_does_not_encode_in_a_later_batch_writes_nothing(
    store: ClusterStore,
):
    """Every batch is encoded before the first is written, with or without a check pass."""
    before = await store.resource_version()
    huge = make_pod("huge").obj()
    huge.spec.priority = 2**70  # no msgpack integer holds it
    with pytest.raises(OverflowError):
        await store.apply([*(make_pod(f"new-{i}").obj() for i in range(APPLY_BATCH)), huge])
    assert await store.resource_version() == before


async def _take(store: ClusterStore, after: int, n: int, *, block_ms: int = 200) -> list[Change]:
    out: list[Change] = []
    stream = store.follow(after, block_ms=block_ms)
    try:
        async for change in stream:
            out.append(change)
            if len(out) == n:
                break
    finally:
        with contextlib.suppress(Exception):
            await stream.aclose()  # type: ignore[attr-defined]
    return out


def _request(pod: Pod, node: str, holder: str) -> ReserveRequest:
    return ReserveRequest(
        pod.key, pod.metadata.uid, 1, node, 0, PodCharge.of(pod), (), holder=holder
    )


async def test_reservations_are_streamed_with_their_holder(store: ClusterStore):
    kept, released = make_pod("kept").obj(), make_pod("released").obj()
    await store.apply([make_node("n1").capacity(pods=10).obj(), kept, released])
    after = await store.resource_version()
    for pod in (kept, released):
        result = await store.bindings.reserve(_request(pod, "n1", "binder-a"), 0.0)
        assert result.status is ReserveStatus.OK
    await store.bindings.unreserve(released.key, released.metadata.uid, 1, "c")
    changes = await follow_all(store, after)
    assert [(c.kind, c.op, c.key, c.node_name, c.holder, c.object) for c in changes] == [
        (RESERVATION, "put", "default/kept", "n1", "binder-a", None),
        (RESERVATION, "put", "default/released", "n1", "binder-a", None),
        (RESERVATION, "delete", "default/released", "n1", "binder-a", None),
    ]
    snapshot = await store.load_snapshot()
    assert snapshot.reservations == [
        HeldReservation("default/kept", kept.metadata.uid, "n1", "binder-a")
    ]


@pytest.mark.parametrize("with_previous", [True, False])
async def test_a_binding_reuses_the_followers_copy_of_the_pod(
    store: ClusterStore, with_previous: bool
):
    """A binding leaves the stored bytes as they were: a follower that keeps the pod gets
    its copy restamped (bound, new resourceVersion) instead of the bytes decoded again."""
    pod = make_pod("p").label("app", "web").req(cpu="1").obj()
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj(), pod])
    snapshot = await store.load_snapshot()
    (held,) = snapshot.pods
    await store.bindings.reserve(_request(held, "n1", "b"), 0.0)
    bound = await store.bindings.bind(held.key, held.metadata.uid, 1, "n1")
    copies = {held.key: held}
    previous = (lambda kind, key: copies.get(key)) if with_previous else None
    changes = await follow_all(store, snapshot.resource_version, previous=previous)
    change = changes[-1]
    assert (change.kind, change.same_body, change.node_name) == ("Pod", True, "n1")
    got = change.object
    assert isinstance(got, Pod)
    assert (got.spec.node_name, got.metadata.resource_version) == ("n1", bound.resource_version)
    assert got.metadata.labels == {"app": "web"}
    assert (got.spec.containers is held.spec.containers) is with_previous
    assert held.spec.node_name == ""  # the follower's copy is not touched


@pytest.mark.parametrize(
    "skip",
    [BodiesSkipped(), BodiesSkipped(deleted=True), BodiesSkipped(deleted=True, unbound_pods=True)],
)
async def test_a_follower_decodes_only_the_bodies_it_does_not_skip(
    store: ClusterStore, skip: BodiesSkipped
):
    """Skipped bodies come as `object` None, with everything else a change says."""
    after = await store.resource_version()
    pod = make_pod("p").req(cpu="1").obj()
    await store.apply([make_node("n1").capacity(cpu="4", pods=10).obj(), pod])
    bound = make_pod("bound").req(cpu="1").node("n1").obj()
    await store.apply([bound])
    await store.delete("Pod", "default", "p")
    changes = await follow_all(store, after, skip=skip)
    seen = [(c.kind, c.op, c.key, c.uid, c.node_name, type(c.object).__name__) for c in changes]
    pending = "NoneType" if skip.unbound_pods else "Pod"
    deleted = "NoneType" if skip.deleted else "Pod"
    assert seen == [
        ("Node", "put", "n1", changes[0].uid, "", "Node"),
        ("Pod", "put", "default/p", pod.metadata.uid, "", pending),
        ("Pod", "put", "default/bound", bound.metadata.uid, "n1", "Pod"),
        ("Pod", "delete", "default/p", pod.metadata.uid, "", deleted),
    ]
