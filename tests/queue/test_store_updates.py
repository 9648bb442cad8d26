"""Update, Delete, Activate, gating, the nominator and duplicate events on real
Redis."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.hints import NODE_ADD
from services.queue.records import PodRecord
from services.queue.store import QueueStore
from shared.messaging.messages import Outcome, ScheduleRequest
from tests.queue.builders import outcome, record

T = "default"
KEY = "default/p"


async def pop_one(store: QueueStore) -> ScheduleRequest:
    [request] = await store.pop(T, 1)
    return request


async def park(store: QueueStore, rec: PodRecord, *, move_request: bool = False) -> str:
    """Add, pop and fail the pod; returns the queue it lands in."""
    await store.add([rec])
    request = await pop_one(store)
    if move_request:
        await store.move_all(NODE_ADD)
    [effect] = await store.record_outcomes([outcome(request)])
    return effect


def updated(rec: PodRecord, rv: int, **changes: object) -> PodRecord:
    """A newer version of the same pod (same uid); `labels` makes it isPodUpdated."""
    fields = {"uid": rec.uid, "rv": rv}
    fields.update(changes)
    return record(rec.name, rec.namespace, **fields)


# ---------------------------------------------------------------------- gating


async def test_gated_pod_waits_until_its_last_gate_goes(store: QueueStore) -> None:
    rec = record("p", gates=["a", "b"], rv=1)
    assert await store.add([rec]) == ["gated"]
    assert await store.pop(T, 10) == []
    assert (await store.move_all(NODE_ADD)).moved == 0
    view = await store.pending(T)
    assert view.pods[0].message == "waiting for scheduling gates: [a b]"
    assert view.pods[0].unschedulable_plugins == ("SchedulingGates",)

    assert await store.update([updated(rec, 2, gates=["b"])]) == ["gated"]
    assert (await store.pending(T)).pods[0].message == "waiting for scheduling gates: [b]"
    assert await store.update([updated(rec, 3)]) == ["active"]  # at once, no backoff
    request = await pop_one(store)
    assert request.attempt == 1
    assert (await store.pending(T)).pods[0].message == ""


async def test_gated_pods_ignore_leftover_and_backoff_flushes(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("p", gates=["g"])])
    clock.advance(3600)
    assert await store.flush_backoff_completed() == 0
    assert (await store.flush_unschedulable_leftover()).moved == 0
    assert await store.location(T, KEY) == "gated"


# ---------------------------------------------------------------------- Update


async def test_update_in_active_is_in_place_and_resorts(
    store: QueueStore, clock: ManualClock
) -> None:
    first = record("p", priority=1, rv=1)
    await store.add([first])
    clock.advance(1)
    await store.add([record("q", priority=5)])
    assert await store.update([updated(first, 2, priority=9)]) == ["active"]
    assert [r.pod_key for r in await store.pop(T, 2)] == [KEY, "default/q"]


async def test_update_in_backoff_stays_in_backoff_with_its_expiry(
    store: QueueStore, clock: ManualClock
) -> None:
    rec = record("p", rv=1)
    assert await park(store, rec, move_request=True) == "backoff"
    before = (await store.pending(T)).pods[0].backoff_expires_at
    clock.advance(0.2)
    assert await store.update([updated(rec, 2, labels={"changed": "yes"})]) == ["backoff"]
    after = (await store.pending(T)).pods[0]
    assert (after.queue, after.backoff_expires_at) == ("backoff", before)


@pytest.mark.parametrize(
    ("advance", "changes", "expected"),
    [
        pytest.param(0.5, {"labels": {"x": "y"}}, "backoff", id="updated-still-backing-off"),
        pytest.param(5.0, {"labels": {"x": "y"}}, "active", id="updated-past-backoff"),
        pytest.param(5.0, {"nominated": "n1"}, "unschedulable", id="status-only-change-stays"),
    ],
)
async def test_update_of_an_unschedulable_pod(
    store: QueueStore, clock: ManualClock, advance: float, changes: dict[str, object], expected: str
) -> None:
    rec = record("p", rv=1)
    assert await park(store, rec) == "unschedulable"
    clock.advance(advance)
    assert await store.update([updated(rec, 2, **changes)]) == [expected]
    assert await store.location(T, KEY) == expected


async def test_update_of_an_unknown_pod_adds_it(store: QueueStore) -> None:
    assert await store.update([record("p")]) == ["active"]
    assert (await pop_one(store)).pod_key == KEY


async def test_update_while_in_flight_never_redispatches_and_marks_the_pod(
    store: QueueStore,
) -> None:
    rec = record("p", rv=1)
    await store.add([rec])
    request = await pop_one(store)
    assert await store.update([updated(rec, 2, labels={"x": "y"})]) == ["inflight"]
    assert await store.pop(T, 1) == []
    # The failure goes to backoff, not unschedulable: the pod changed during its attempt.
    [effect] = await store.record_outcomes([outcome(request)])
    assert effect == "backoff"


# ---------------------------------------------------------------------- duplicates and staleness


async def test_duplicate_add_is_not_enqueued_twice(store: QueueStore) -> None:
    rec = record("p", rv=4)
    await store.add([rec])
    assert await store.add([rec]) == ["active"]
    assert len(await store.pop(T, 10)) == 1
    assert await store.add([rec]) == ["inflight"]  # redelivered add of a leased pod
    assert await store.pop(T, 10) == []


async def test_stale_update_is_ignored_and_keeps_the_newer_body(store: QueueStore) -> None:
    rec = record("p", rv=5, labels={"v": "5"})
    await store.add([rec])
    assert await store.update([updated(rec, 3, labels={"v": "3"})]) == [""]
    request = await pop_one(store)
    assert request.decode_pod().metadata.labels == {"v": "5"}
    assert (await store.stats(T))["stale_events"] == 1


async def test_newer_update_replaces_the_body(store: QueueStore) -> None:
    rec = record("p", rv=5, labels={"v": "5"})
    await store.add([rec])
    await store.update([updated(rec, 6, labels={"v": "6"})])
    assert (await pop_one(store)).decode_pod().metadata.labels == {"v": "6"}
    body_fields = await store.redis.hkeys(store.keys.key(T, "pod"))
    assert body_fields == [b"default/p#6"]


async def test_a_recreated_pod_replaces_the_old_one(store: QueueStore) -> None:
    await store.add([record("p", uid="old")])
    old = await pop_one(store)
    assert await store.add([record("p", uid="new")]) == ["active"]
    fresh = await pop_one(store)
    assert (fresh.uid, fresh.attempt) == ("new", 1)
    [effect] = await store.record_outcomes([outcome(old, "scheduled")])
    assert effect == "stale"


async def test_add_and_update_of_one_pod_in_one_batch_apply_in_order(store: QueueStore) -> None:
    rec = record("p", rv=1, priority=1)
    await store.upsert([("add", rec), ("update", updated(rec, 2, priority=7))])
    [request] = await store.pop(T, 5)
    assert request.priority == 7


# ---------------------------------------------------------------------- Delete


PLACES = ("active", "backoff", "unschedulable", "gated", "inflight")


@pytest.mark.parametrize("where", PLACES)
async def test_delete_from_any_queue(store: QueueStore, where: str) -> None:
    rec = record("p", gates=["g"] if where == "gated" else ())
    if where in ("backoff", "unschedulable"):
        await park(store, rec, move_request=where == "backoff")
    else:
        await store.add([rec])
        if where == "inflight":
            await pop_one(store)
    assert await store.location(T, KEY) == where
    assert await store.delete([rec]) == 1
    assert await store.location(T, KEY) is None
    assert (await store.counts([T]))[T].pending == 0
    assert await store.delete([rec]) == 0


async def test_one_batch_deletes_from_every_queue_and_leaves_no_trace(store: QueueStore) -> None:
    """The queue removes bound pods a stream batch at a time (delete.lua works per hash for
    the whole batch): one pod in each place, one named twice, one of another incarnation."""
    # In this order: each park and pop takes the one pod active then.
    order = ("backoff", "unschedulable", "inflight", "active", "gated")
    recs = {where: record(where, gates=["g"] if where == "gated" else ()) for where in order}
    for where, rec in recs.items():
        if where in ("backoff", "unschedulable"):
            await park(store, rec, move_request=where == "backoff")
        else:
            await store.add([rec])
            if where == "inflight":
                [request] = await store.pop(T, 1)
                assert request.pod_key == rec.key
    await store.add([record("kept", uid="new")])
    for where, rec in recs.items():
        assert await store.location(T, rec.key) == where
    batch = [*recs.values(), recs["active"], record("kept", uid="old")]
    assert await store.delete(batch) == len(PLACES)
    for rec in recs.values():
        assert await store.location(T, rec.key) is None
    for name in ("st", "att", "cyc", "rq", "why", "pod", "aff", "ext"):
        held = await store.redis.type(store.keys.key(T, name))
        members: list[Any] = []
        if held == b"hash":
            members = list(await store.redis.hkeys(store.keys.key(T, name)))
        elif held == b"set":
            members = list(await store.redis.smembers(store.keys.key(T, name)))
        elif held == b"zset":
            members = list(await store.redis.zrange(store.keys.key(T, name), 0, -1))
        left = {(m.decode() if isinstance(m, bytes) else str(m)).split("#")[0] for m in members}
        assert left <= {"default/kept"}, (name, left)
    assert await store.location(T, "default/kept") == "active"
    assert (await store.counts([T]))[T].pending == 1


async def test_delete_of_an_older_incarnation_keeps_the_new_pod(store: QueueStore) -> None:
    await store.add([record("p", uid="new")])
    assert await store.delete([record("p", uid="old")]) == 0
    assert await store.location(T, KEY) == "active"


# ---------------------------------------------------------------------- Activate


@pytest.mark.parametrize(
    ("where", "moves"),
    [
        pytest.param("unschedulable", True, id="unschedulable"),
        pytest.param("backoff", True, id="backoff"),
        pytest.param("gated", False, id="gated-stays"),
        pytest.param("inflight", False, id="inflight-stays"),
    ],
)
async def test_activate(store: QueueStore, where: str, moves: bool) -> None:
    rec = record("p", gates=["g"] if where == "gated" else ())
    if where in ("backoff", "unschedulable"):
        await park(store, rec, move_request=where == "backoff")
    else:
        await store.add([rec])
        if where == "inflight":
            await pop_one(store)
    assert await store.activate(T, [KEY, "default/unknown"]) == (1 if moves else 0)
    assert await store.location(T, KEY) == ("active" if moves else where)


async def test_pods_to_activate_travel_with_an_outcome(store: QueueStore) -> None:
    sibling = record("sibling")
    await park(store, sibling)
    await store.add([record("p")])
    request = await pop_one(store)
    await store.record_outcomes(
        [outcome(request, "scheduled", pods_to_activate=("default/sibling",))]
    )
    assert await store.location(T, "default/sibling") == "active"


# ---------------------------------------------------------------------- nominator


async def test_nominator(store: QueueStore) -> None:
    rec = record("p", rv=1, priority=9)
    await store.add([rec, record("q", nominated="n2")])
    request = (await store.pop(T, 1))[0]
    assert request.pod_key == KEY
    # Preemption nominates through the outcome; the pod keeps it while parked.
    await store.record_outcomes([outcome(request, nominated_node_name="n1")])
    nominated = await store.nominated_pods()
    assert {node: [p.key for p in pods] for node, pods in nominated.items()} == {
        "n1": [KEY],
        "n2": ["default/q"],
    }
    assert nominated["n1"][0].priority == 9
    assert nominated["n1"][0].pod == rec.body
    # An update without a status nomination keeps the scheduler's (upstream rule).
    await store.update([updated(rec, 2, priority=9)])
    assert (await store.state(T, KEY)).nominated_node_name == "n1"  # type: ignore[union-attr]
    # The status names another node: it wins.
    await store.update([updated(rec, 3, priority=9, nominated="n3")])
    assert (await store.state(T, KEY)).nominated_node_name == "n3"  # type: ignore[union-attr]
    await store.delete([rec])
    assert "n3" not in await store.nominated_pods()


async def test_nomination_cleared_by_outcome(store: QueueStore) -> None:
    await store.add([record("p", nominated="n1")])
    request = await pop_one(store)
    assert request.nominated_node_name == "n1"
    await store.record_outcomes([outcome(request, nominated_node_name="")])
    assert await store.nominated_pods() == {}


# ---------------------------------------------------------------------- pending view


async def test_pending_view(store: QueueStore, clock: ManualClock) -> None:
    await store.add([record("a", priority=5), record("b"), record("c", gates=["g"])])
    request = await pop_one(store)  # a
    message = "0/3 nodes are available: 3 Insufficient cpu."
    await store.record_outcomes(
        [
            Outcome(
                T,
                request.pod_key,
                request.uid,
                request.attempt,
                "unschedulable",
                unschedulable_plugins=("NodeResourcesFit",),
                pending_plugins=("Coscheduling",),
                message=message,
            )
        ]
    )
    view = await store.pending()
    assert view.counts[T].summary() == "activeQ:1; backoffQ:0; unschedulablePods:2; inFlight:0"
    by_key = {p.key: p for p in view.pods}
    a = by_key["default/a"]
    assert (a.queue, a.attempts, a.message) == ("unschedulable", 1, message)
    assert (a.unschedulable_plugins, a.pending_plugins) == (
        ("NodeResourcesFit",),
        ("Coscheduling",),
    )
    assert a.initial_attempt_timestamp == pytest.approx(clock.now())
    assert by_key["default/b"].queue == "active"
    assert by_key["default/c"].queue == "gated"


# ---------------------------------------------------------------------- tenants


async def test_tenants_are_separate_queues(redis_client, queue_config, clock) -> None:
    from dataclasses import replace

    store = QueueStore(redis_client, replace(queue_config, tenant_label="team"), clock)
    await store.add(
        [record("x", "ns1", labels={"team": "red"}), record("y", "ns2"), record("z", "ns1")]
    )
    assert await store.tenants() == ["ns1", "ns2", "red"]
    assert [r.pod_key for r in await store.pop("red", 5)] == ["ns1/x"]
    assert await store.scheduling_cycle("red") == 1
    assert await store.scheduling_cycle("ns1") == 0
    assert [r.tenant for r in await store.pop("ns1", 5)] == ["ns1"]


def test_invalid_tenant_names_are_rejected(queue_config: QueueConfig) -> None:
    from services.queue.keys import InvalidTenantError, QueueKeys

    with pytest.raises(InvalidTenantError):
        QueueKeys(queue_config.key_prefix).tenant("bad{tag}")
