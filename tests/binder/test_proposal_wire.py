"""Proposals on the wire: round trips, the names each field has on the wire (a contract with
the other services' versions), and the errors of the codec they share with shared.messaging.messages
(shared.messaging.wire: encode_body / decode_body)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from shared.messaging.messages import DeadLetter, Outcome, ScheduleBatch, ScheduleRequest
from shared.messaging.proposals import Proposal, Victim
from shared.messaging.wire import SCHEMA_VERSION, MessageError, decode_body, encode_body, wire_names

BIND = Proposal(
    "team-a",
    "team-a/web",
    "u1",
    3,
    "n1",
    node_resource_version=7,
    pod_fingerprint="fp",
    pod_resource_version=5,
    scheduling_cycle=11,
    permit="wait",
    permit_timeout_seconds=2.5,
    permit_plugins=("Coscheduling",),
    pods_to_activate=("team-a/web-2",),
    sequence=4,
)
PREEMPT = Proposal(
    "team-a",
    "team-a/big",
    "u2",
    1,
    "n2",
    kind="preempt",
    victims=(Victim("team-a/small", "u3"),),
    unschedulable_plugins=("NodeResourcesFit",),
    message="0/1 nodes are available",
)


@pytest.mark.parametrize("proposal", [BIND, PREEMPT], ids=["bind", "preempt"])
def test_round_trip(proposal: Proposal) -> None:
    assert Proposal.decode(proposal.encode()) == proposal


_DROP = object()


def _body(**changes: Any) -> bytes:
    body = msgpack.unpackb(BIND.encode(), raw=False)
    for name, value in changes.items():
        if value is _DROP:
            del body[name]
        else:
            body[name] = value
    data: bytes = msgpack.packb(body, use_bin_type=True)
    return data


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(_body(node=_DROP), "missing field 'node'", id="missing"),
        pytest.param(_body(node=5), "field 'node': expected str, got 5", id="wrong-type"),
        pytest.param(_body(nrv=True), "field 'nrv': expected int, got True", id="bool-not-int"),
        pytest.param(
            _body(permit_s=True),
            "field 'permit_s': expected int or float, got True",
            id="bool-not-a-number",
        ),
        pytest.param(
            _body(kind="evict"), "field 'kind': 'evict' is not one of bind, preempt", id="choice"
        ),
        pytest.param(
            _body(permit_plugins=["a", 1]),
            "field 'permit_plugins': expected a list of strings",
            id="strings",
        ),
        pytest.param(
            _body(victims=[{"key": "a/b"}]), "victims[0]: missing field 'uid'", id="victim"
        ),
        pytest.param(_body(node="N_1"), "field 'node': 'N_1' is not a node name", id="node-name"),
    ],
)
def test_bad_proposals_name_the_field(data: bytes, error: str) -> None:
    with pytest.raises(MessageError) as info:
        Proposal.decode(data)
    assert str(info.value) == error


def test_absent_optional_fields_take_their_defaults() -> None:
    body = {
        "v": SCHEMA_VERSION,
        "t": "proposal",
        "tenant": "t",
        "key": "ns/p",
        "uid": "u",
        "attempt": 1,
        "node": "n1",
        "kind": None,  # nil reads as absent
    }
    data: bytes = msgpack.packb(body, use_bin_type=True)
    assert Proposal.decode(data) == Proposal("t", "ns/p", "u", 1, "n1")


def test_a_bool_is_not_a_number_in_messages_either() -> None:
    body = ScheduleRequest("t", "ns/p", "u", 1, 1, 0, 1.0, 1.0, 2.0).to_body()
    body["ts"] = True
    with pytest.raises(MessageError, match="field 'ts': expected int or float, got True"):
        ScheduleRequest.from_body(body)


# Every field set to something other than its default, and the map it must be on the wire.
_FULL: list[tuple[object, dict[str, Any]]] = [
    (
        Proposal(
            "t", "ns/p", "u", 2, "n1", "preempt", 3, "fp", 4, 5, "wait", 1.5, ("Gang",),
            (Victim("ns/v", "uv"),), ("Fit",), "no", ("ns/q",), 6.0, 7.0, 8,
        ),
        {
            "tenant": "t", "key": "ns/p", "uid": "u", "attempt": 2, "node": "n1",
            "kind": "preempt", "nrv": 3, "fp": "fp", "prv": 4, "cycle": 5, "permit": "wait",
            "permit_s": 1.5, "permit_plugins": ["Gang"], "victims": [{"key": "ns/v", "uid": "uv"}],
            "plugins": ["Fit"], "msg": "no", "activate": ["ns/q"], "t0": 6.0, "tq": 7.0, "seq": 8,
        },
    ),
    (
        Outcome("t", "ns/p", "u", 2, "extend", ("Fit",), ("Gang",), "m", "n1", "", ("ns/q",), 9.0),
        {
            "tenant": "t", "key": "ns/p", "uid": "u", "attempt": 2, "result": "extend",
            "plugins": ["Fit"], "pending": ["Gang"], "msg": "m", "node": "n1", "nnn": "",
            "activate": ["ns/q"], "lease_s": 9.0,
        },
    ),
    (
        ScheduleRequest("t", "ns/p", "u", 2, 3, 4, 5.0, 6.0, 7.0, "n1", 8, b"pod", "fp", 9),
        {
            "tenant": "t", "key": "ns/p", "uid": "u", "attempt": 2, "cycle": 3, "prio": 4,
            "ts": 5.0, "its": 6.0, "lease": 7.0, "nnn": "n1", "redispatches": 8, "pod": b"pod",
            "fp": "fp", "rv": 9,
        },
    ),
    (
        ScheduleBatch((ScheduleRequest("t", "ns/p", "u", 1, 2),)),
        {"requests": [{"tenant": "t", "key": "ns/p", "uid": "u", "attempt": 1, "cycle": 2}]},
    ),
    (
        DeadLetter("binder", "berth.proposals", 1, 2, "bad", b"k", b"x"),
        {
            "service": "binder", "topic": "berth.proposals", "partition": 1, "offset": 2,
            "error": "bad", "key": b"k", "payload": b"x",
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("message", "body"), _FULL, ids=lambda x: type(x).__name__)
def test_every_field_has_its_wire_name_and_comes_back(message: object, body: object) -> None:
    assert encode_body(message) == body
    assert decode_body(type(message), msgpack.unpackb(msgpack.packb(body))) == message


@pytest.mark.parametrize(
    ("minimal", "body"),
    [
        (Proposal("t", "ns/p", "u", 0, "n1"), {"tenant": "t", "key": "ns/p", "uid": "u",
                                               "attempt": 0, "node": "n1"}),
        (Outcome("t", "ns/p", "u", 1, "scheduled"), {"tenant": "t", "key": "ns/p", "uid": "u",
                                                    "attempt": 1, "result": "scheduled"}),
        (DeadLetter("s", "x", 0, 0, ""), {"service": "s", "topic": "x", "partition": 0,
                                          "offset": 0, "error": ""}),
    ],
)  # fmt: skip
def test_fields_holding_their_default_stay_off_the_wire(minimal: object, body: object) -> None:
    assert encode_body(minimal) == body
    assert decode_body(type(minimal), {**body, "v": 1, "t": "x"}) == minimal


def test_fields_a_newer_peer_adds_are_skipped() -> None:
    body = {**Outcome("t", "ns/p", "u", 1, "scheduled").to_body(), "zone": "eu", "n": [1]}
    assert Outcome.from_body(body) == Outcome("t", "ns/p", "u", 1, "scheduled")


def test_a_batch_names_the_item_and_the_field() -> None:
    good = ScheduleRequest("t", "ns/p", "u", 1, 1).to_body()
    with pytest.raises(MessageError) as info:
        ScheduleBatch.from_body({"requests": [good, {**good, "key": "nope"}]})
    assert str(info.value) == "requests[1]: field 'key': 'nope' is not namespace/name"
    with pytest.raises(MessageError) as info:
        ScheduleBatch.from_body({"requests": [good, 7]})
    assert str(info.value) == "requests[1]: expected a map"
    with pytest.raises(MessageError, match="missing field 'requests'"):
        ScheduleBatch.from_body({})


def test_the_queues_request_blob_names_are_wire_names() -> None:
    """services/queue/wire.py splices requests from bytes by these names."""
    assert set(wire_names(ScheduleRequest)) == {
        "tenant", "key", "uid", "attempt", "cycle", "prio", "ts", "its", "lease", "nnn",
        "redispatches", "pod", "fp", "rv",
    }  # fmt: skip
