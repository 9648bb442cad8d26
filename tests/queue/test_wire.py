"""The dispatcher's byte path (services/queue/wire.py) on real Redis: the schedule batches it
assembles from request blobs and bodies decode to exactly the requests of the pop."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from services.queue.clock import ManualClock
from services.queue.store import QueueStore
from services.queue.wire import (
    LUA_FIELDS,
    MAX_BODY_BYTES,
    PYTHON_FIELDS,
    BlobError,
    request_blob,
    split_blobs,
)
from shared.messaging.messages import ScheduleBatch, ScheduleRequest, decode_message
from shared.messaging.wire import wire_names
from tests.queue.builders import outcome, record

T = "default"
LONG = "n" * 300  # longer than a str 8 can hold


def test_the_two_halves_are_the_fields_of_a_request() -> None:
    assert sorted(LUA_FIELDS + PYTHON_FIELDS) == sorted(wire_names(ScheduleRequest))


@pytest.mark.parametrize(
    "message_batch",
    [
        pytest.param(1, id="one-per-message"),
        pytest.param(3, id="uneven-split"),
        pytest.param(64, id="all-in-one"),
    ],
)
async def test_batches_decode_to_the_popped_requests(
    store: QueueStore, clock: ManualClock, message_batch: int
) -> None:
    pods = [
        record("plain"),
        record("high", priority=2_000_000_000),
        record("low", priority=-5),
        record("nominated", nominated="node-" + LONG),
        record("long-uid", uid="u" * 40),
        record("short-uid", uid="u"),
        record("x" * 200),
    ]
    await store.add(pods)
    expected_order = ["default/high", "default/plain", "default/nominated", "default/long-uid"]
    expected_order += ["default/short-uid", "default/" + "x" * 200, "default/low"]
    [popped] = await store.pop_raw([(T, 10)])
    requests = popped.requests()
    assert [r.pod_key for r in requests] == expected_order

    batches = popped.batches(message_batch)
    assert [b.count for b in batches] == [
        min(message_batch, len(pods) - i) for i in range(0, len(pods), message_batch)
    ]
    decoded = [r for b in batches for r in ScheduleBatch.decode(b.payload).requests]
    assert decoded == requests
    assert [b.key for b in batches] == [r.uid.encode() for r in requests[::message_batch]]
    # The object path encodes the same requests.
    assert decode_message(ScheduleBatch(tuple(requests)).encode()) == ScheduleBatch(tuple(requests))

    by_key = {p.key: p for p in pods}
    for index, r in enumerate(requests):
        pod = by_key[r.pod_key]
        arrival = pods.index(pod)
        assert (r.tenant, r.uid, r.attempt, r.priority) == (T, pod.uid, 1, pod.priority)
        assert r.scheduling_cycle == index + 1
        assert r.timestamp == r.initial_attempt_timestamp == clock.now() + arrival / 1e6
        assert r.lease_expires_at == clock.now() + 30
        assert (r.nominated_node_name, r.redispatches, r.pod) == (
            pod.nominated_node_name,
            0,
            pod.body,
        )


async def test_blobs_follow_attempts_redispatches_and_nominations(
    store: QueueStore, clock: ManualClock
) -> None:
    await store.add([record("p")])
    [first] = await store.pop(T, 1)
    clock.advance(30)
    assert await store.expire_leases() == 1
    [second] = await store.pop(T, 1)
    assert (second.attempt, second.redispatches) == (2, 1)
    await store.record_outcomes([outcome(second, "conflict", nominated_node_name="n9")])
    [third] = await store.pop(T, 1)
    assert (third.attempt, third.redispatches, third.nominated_node_name) == (3, 1, "n9")
    assert third.timestamp == first.timestamp  # a conflict keeps its place
    await store.record_outcomes([outcome(third)])
    clock.advance(20)
    await store.flush_unschedulable_leftover()
    clock.advance(60)
    await store.flush_unschedulable_leftover()
    [fourth] = await store.pop(T, 1)
    assert (fourth.attempt, fourth.timestamp) == (4, clock.now() - 80)


async def test_python_blob_equals_the_lua_blob(store: QueueStore) -> None:
    await store.add([record("p", nominated="n1", priority=7), record("q" * 60)])
    for key in ("default/p", "default/" + "q" * 60):
        lua = await store.redis.hget(store.keys.key(T, "rq"), key)
        state = await store.state(T, key)
        assert isinstance(lua, bytes)
        assert state is not None
        python = request_blob(key, state, 0)
        assert msgpack.unpackb(lua) == msgpack.unpackb(python)
        [[lua_field, py_field], [lua_entries, py_entries]] = split_blobs([lua, python])
        assert lua_field == py_field == f"{key}#{state.resource_version}".encode()
        assert msgpack.unpackb(b"\x8a" + lua_entries) == msgpack.unpackb(b"\x8a" + py_entries)


@pytest.mark.parametrize(
    "blob",
    [
        pytest.param(msgpack.packb(["f", {"uid": "u"}]), id="map-of-one"),
        pytest.param(msgpack.packb([b"f", {}]), id="bin-field"),
        pytest.param(msgpack.packb({"f": 1}), id="not-an-array"),
    ],
)
def test_a_foreign_blob_is_an_error(blob: bytes) -> None:
    with pytest.raises(BlobError):
        split_blobs([blob])


async def test_pods_stored_without_a_blob_still_pop(store: QueueStore) -> None:
    old, new = record("old", nominated="n1"), record("new")
    await store.add([old, new])
    await store.redis.hdel(store.keys.key(T, "rq"), "default/old")
    requests = await store.pop(T, 2)
    assert [(r.pod_key, r.uid, r.attempt, r.scheduling_cycle) for r in requests] == [
        ("default/old", old.uid, 1, 1),
        ("default/new", new.uid, 1, 2),
    ]
    assert (requests[0].pod, requests[0].nominated_node_name) == (old.body, "n1")


@pytest.mark.parametrize(
    ("revoke", "published"),
    [
        pytest.param("expire", [], id="leases-expired"),
        pytest.param("delete", ["default/p"], id="one-pod-deleted"),
    ],
)
async def test_leases_revoked_while_a_pop_reads_its_blobs(
    store: QueueStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    revoke: str,
    published: list[str],
) -> None:
    q = record("q")
    await store.add([record("p"), q])
    # Without p's blob, pop_raw rebuilds it: a hook between the pop and the checks.
    await store.redis.hdel(store.keys.key(T, "rq"), "default/p")
    rebuild = store._missing_blobs

    async def revoke_meanwhile(*args: Any) -> list[bytes | None]:
        if revoke == "expire":
            clock.advance(30)
            assert await store.expire_leases() == 2
        else:
            assert await store.delete([q]) == 1
        return await rebuild(*args)

    monkeypatch.setattr(store, "_missing_blobs", revoke_meanwhile)
    [popped] = await store.pop_raw([(T, 2)])
    monkeypatch.undo()
    # Never a request for a lease the pop no longer holds (an expired one's blob already
    # names the next attempt).
    assert [(r.pod_key, r.attempt) for r in popped.requests()] == [(k, 1) for k in published]
    if revoke == "expire":
        again = await store.pop(T, 2)
        assert {(r.pod_key, r.attempt, r.redispatches) for r in again} == {
            ("default/p", 2, 1),
            ("default/q", 2, 1),
        }


async def test_a_pod_gone_between_the_pop_and_the_read_is_left_out(store: QueueStore) -> None:
    await store.add([record("gone"), record("kept")])
    # What a delete racing the pop leaves behind: no state, no blob, no body.
    for name in ("st", "rq"):
        await store.redis.hdel(store.keys.key(T, name), "default/gone")
    [popped] = await store.pop_raw([(T, 2)])
    assert [r.pod_key for r in popped.requests()] == ["default/kept"]
    assert [b.count for b in popped.batches(64)] == [1]


async def test_a_large_pod_travels_alone_and_never_holds_back_the_small_ones(
    store: QueueStore,
) -> None:
    """Issue 19: one large pod, popped with small ones, gets a message of its own; the small
    ones are packed together under the byte cap, in queue order."""
    big = record("big", priority=5, labels={"blob": "x" * 4000})
    pods = [record(f"small-{i}") for i in range(4)]
    await store.add([big, *pods])
    [popped] = await store.pop_raw([(T, 10)])
    big_bytes, small_bytes = len(popped.bodies[0]), max(len(b) for b in popped.bodies[1:])
    assert big_bytes > 4000 > 10 * small_bytes
    batches = popped.batches(64, max_bytes=big_bytes + 50)  # room for no small one beside it
    assert [b.count for b in batches] == [1, 4]
    assert [b.count for b in popped.batches(64, max_bytes=1)] == [1] * 5  # each over the cap
    assert [b.count for b in popped.batches(64)] == [5]  # the default cap: 1 MiB
    decoded = [r.pod_key for b in batches for r in ScheduleBatch.decode(b.payload).requests]
    assert decoded == [r.pod_key for r in popped.requests()]


async def test_a_pod_over_the_body_limit_is_sent_by_reference(store: QueueStore) -> None:
    """Issue 19: whatever a pod holds, its schedule request stays small: a body over
    MAX_BODY_BYTES is left out and the worker takes the pod from its view."""
    big = record("big", labels={"blob": "x" * MAX_BODY_BYTES})
    await store.add([big, record("small")])
    [popped] = await store.pop_raw([(T, 10)])
    [batch] = popped.batches(64)
    assert len(batch.payload) < MAX_BODY_BYTES
    by_key = {r.pod_key: r for r in ScheduleBatch.decode(batch.payload).requests}
    assert by_key["default/big"].pod == b""
    assert by_key["default/big"].resource_version == big.resource_version
    assert by_key["default/small"].pod != b""
