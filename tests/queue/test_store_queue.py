"""PriorityQueue rules on real Redis: Add, Pop, cycles, routing of failures, moves, flushes,
backoff, with worked examples. The clock is driven."""

from __future__ import annotations

import pytest

from services.queue.clock import ManualClock
from services.queue.hints import (
    NODE_ADD,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    Resource,
)
from services.queue.store import QueueStore
from shared.messaging.messages import ScheduleRequest
from tests.queue.builders import outcome, record

T = "default"
FIT = ("NodeResourcesFit",)
ALLOCATABLE = ClusterEvent(Resource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE, "NodeUpdate")
LABELS = ClusterEvent(Resource.NODE, ActionType.UPDATE_NODE_LABEL, "NodeUpdate")


async def pop_one(store: QueueStore) -> ScheduleRequest:
    [request] = await store.pop(T, 1)
    return request


async def fail(store: QueueStore, request: ScheduleRequest, plugins=FIT) -> str:
    [effect] = await store.record_outcomes([outcome(request, plugins=plugins)])
    return effect


async def test_fresh_queue_cycles(store: QueueStore) -> None:
    assert await store.scheduling_cycle(T) == 0
    assert await store.move_request_cycle(T) == -1
    await store.add([record("a"), record("b")])
    assert await store.scheduling_cycle(T) == 0  # Add is not a cycle
    request = await pop_one(store)
    assert (request.scheduling_cycle, request.attempt) == (1, 1)
    assert await store.scheduling_cycle(T) == 1
    [second] = await store.pop(T, 5)
    assert second.scheduling_cycle == 2


async def test_queue_sort_priority_then_timestamp(store: QueueStore, clock: ManualClock) -> None:
    start = clock.now()
    for name, priority, at in [("d", None, 0), ("b", 10, 1), ("a", 10, 2), ("c", 100, 3)]:
        clock.set(start + at)
        await store.add([record(name, priority=priority)])
    popped = [r.pod_key for r in await store.pop(T, 10)]
    assert popped == ["default/c", "default/b", "default/a", "default/d"]


async def test_one_by_one_pops_and_priorities_arriving_later(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("low", priority=1)])
    clock.advance(1)
    await store.add([record("high", priority=5)])
    assert (await pop_one(store)).pod_key == "default/high"
    clock.advance(1)
    await store.add([record("mid", priority=3)])
    assert (await pop_one(store)).pod_key == "default/mid"
    assert (await pop_one(store)).pod_key == "default/low"
    assert await store.pop(T, 1) == []


async def test_a_batch_keeps_arrival_order(store: QueueStore) -> None:
    names = [f"p{i:02d}" for i in reversed(range(20))]
    await store.add([record(n) for n in names])
    assert [r.pod_key for r in await store.pop(T, 20)] == [f"default/{n}" for n in names]


async def test_pop_leases_and_carries_the_object(store: QueueStore) -> None:
    rec = record("a", priority=3, nominated="n1")
    await store.add([rec])
    request = await pop_one(store)
    assert request.pod == rec.body
    assert request.decode_pod().metadata.name == "a"
    assert (request.uid, request.priority, request.nominated_node_name) == (rec.uid, 3, "n1")
    assert request.lease_expires_at == pytest.approx(request.timestamp + 30)
    assert await store.location(T, "default/a") == "inflight"
    assert await store.pop(T, 1) == []  # never dispatched twice while leased


@pytest.mark.parametrize(
    ("move_before_failure", "expected"),
    [
        pytest.param(False, "unschedulable", id="no-move-request"),
        pytest.param(True, "backoff", id="move-request-after-pop"),
    ],
)
async def test_routing_by_move_request_cycle(
    store: QueueStore, move_before_failure: bool, expected: str
) -> None:
    await store.add([record("p")])
    request = await pop_one(store)
    if move_before_failure:
        await store.move_all(NODE_ADD)
        assert await store.move_request_cycle(T) == 1  # 1 >= cycle 1: backoffQ
    assert await fail(store, request) == expected
    assert await store.location(T, "default/p") == expected


async def test_move_request_before_the_pop_does_not_count(store: QueueStore) -> None:
    await store.add([record("p"), record("q")])
    first = await pop_one(store)
    await store.move_all(NODE_ADD)  # moveRequestCycle = 1
    second = await pop_one(store)  # cycle 2
    assert await fail(store, second) == "unschedulable"  # 1 >= 2 is false
    assert await fail(store, first) == "backoff"


@pytest.mark.parametrize(
    ("failed", "event", "moves"),
    [
        pytest.param(("NodeAffinity",), ALLOCATABLE, False, id="P-failed-event-helps-Q"),
        pytest.param(("NodeResourcesFit",), ALLOCATABLE, True, id="P-failed-event-helps-P"),
        pytest.param(("NodeAffinity", "NodeResourcesFit"), ALLOCATABLE, True, id="any-of-two"),
        pytest.param((), LABELS, True, id="no-failed-plugin-moves-on-anything"),
        pytest.param(("MyPlugin",), NODE_ADD, False, id="unregistered-plugin-never-woken"),
        pytest.param(("MyPlugin",), UNSCHEDULABLE_TIMEOUT, True, id="wildcard"),
    ],
)
async def test_queueing_hints(
    store: QueueStore, clock: ManualClock, failed: tuple[str, ...], event: ClusterEvent, moves: bool
) -> None:
    await store.add([record("p")])
    await fail(store, await pop_one(store), plugins=failed)
    clock.advance(5)  # past the 1 s backoff
    result = await store.move_all(event)
    assert (result.to_active, result.kept) == ((1, 0) if moves else (0, 1))
    assert await store.location(T, "default/p") == ("active" if moves else "unschedulable")


async def test_moved_pod_still_backing_off_goes_to_backoff(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("p")])
    await fail(store, await pop_one(store))
    clock.advance(0.5)  # backoff of attempt 1 is 1 s
    result = await store.move_all(NODE_ADD)
    assert (result.to_active, result.to_backoff) == (0, 1)
    view = await store.pending(T)
    assert view.pods[0].backoff_expires_at == pytest.approx(clock.now() + 0.5)


@pytest.mark.parametrize(
    "already_active",
    [
        pytest.param(0, id="empty-level-bucket-renamed"),
        pytest.param(1, id="small-level-union"),
        pytest.param(12, id="large-level-members-added"),
    ],
)
async def test_woken_pods_join_active_in_timestamp_order(
    store: QueueStore, clock: ManualClock, already_active: int
) -> None:
    await store.add([record("parked-1"), record("parked-2")])
    for request in await store.pop(T, 2):
        await fail(store, request)
    clock.advance(5)
    # Added after the failures: the parked pods' Timestamps (their failure time) are older.
    await store.add([record(f"active-{i:02d}") for i in range(already_active)])
    result = await store.move_all(NODE_ADD)
    assert (result.to_active, result.to_backoff) == (2, 0)
    popped = [r.pod_key for r in await store.pop(T, 100)]
    assert popped == ["default/parked-1", "default/parked-2"] + [
        f"default/active-{i:02d}" for i in range(already_active)
    ]
    assert (await store.counts([T]))[T].unschedulable == 0
    assert await store.redis.smembers(store.keys.key(T, "buckets")) == set()


async def test_move_request_cycle_set_even_if_nothing_moved(store: QueueStore) -> None:
    await store.add([record("p"), record("q")])
    await store.pop(T, 2)
    assert (await store.move_all(NODE_ADD)).moved == 0
    assert await store.move_request_cycle(T) == 2


async def test_backoff_expiry_with_three_attempts(store: QueueStore, clock: ManualClock) -> None:
    await store.add([record("p")])
    for attempt in (1, 2, 3):
        if attempt > 1:
            clock.advance(100)
            await store.flush_backoff_completed()
        request = await pop_one(store)
        await store.move_all(NODE_ADD)  # a move request during the cycle: failure -> backoffQ
        t = clock.now()
        assert await fail(store, request) == "backoff"
    assert request.attempt == 3
    # Re-queued at T with Attempts = 3: the backoff expires at T + 4 s.
    clock.set(t + 3.999999)
    assert await store.flush_backoff_completed() == 0
    clock.set(t + 4)
    assert await store.flush_backoff_completed() == 1  # not backing off once expiry <= now
    assert await store.location(T, "default/p") == "active"


async def test_flush_moves_only_completed_backoffs_in_expiry_order(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("early"), record("late")])
    early, late = await store.pop(T, 2)
    await store.move_all(NODE_ADD)
    await fail(store, early)
    clock.advance(0.5)
    await fail(store, late)
    clock.advance(0.6)  # early's backoff (1 s) is over, late's is not
    assert await store.flush_backoff_completed() == 1
    assert await store.location(T, "default/early") == "active"
    assert await store.location(T, "default/late") == "backoff"


@pytest.mark.parametrize(
    ("parked_for", "moved"),
    [
        pytest.param(59.0, False, id="59s"),
        pytest.param(60.0, False, id="exactly-60s-strict"),
        pytest.param(60.000001, True, id="just-over-60s"),
    ],
)
async def test_unschedulable_leftover_strictly_greater(
    store: QueueStore, clock: ManualClock, parked_for: float, moved: bool
) -> None:
    await store.add([record("p")])
    await fail(store, await pop_one(store), plugins=("SomeUnregisteredPlugin",))
    mrc = await store.move_request_cycle(T)
    clock.advance(parked_for)
    result = await store.flush_unschedulable_leftover()
    assert result.to_active == (1 if moved else 0)
    # moveRequestCycle changes only when a pod was left over (upstream flush).
    assert (await store.move_request_cycle(T) != mrc) is moved


async def test_leftover_with_defaults_is_past_backoff(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("p")])
    for _ in range(6):  # attempts 6: backoff at its 10 s cap
        await store.move_all(NODE_ADD)
        clock.advance(20)
        await store.flush_backoff_completed()
        request = await pop_one(store)
        await fail(store, request)
    clock.advance(61)
    assert (await store.flush_unschedulable_leftover()).to_active == 1


async def test_stats_and_counts(store: QueueStore) -> None:
    await store.add([record(f"p{i}") for i in range(5)])
    requests = await store.pop(T, 3)
    await store.record_outcomes([outcome(requests[0])])
    counts = (await store.counts([T]))[T]
    assert (counts.active, counts.unschedulable, counts.inflight, counts.pending) == (2, 1, 2, 5)
    assert counts.summary() == "activeQ:2; backoffQ:0; unschedulablePods:1; inFlight:2"
    stats = await store.stats(T)
    assert (stats["added"], stats["dispatched"]) == (5, 3)
