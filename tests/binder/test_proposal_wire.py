"""Proposals on the wire: round trips, and the errors of the field readers they share with
shared.messages (one set: need_field, opt_field, strings_field, choice_field)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from shared.messages import ScheduleRequest
from shared.proposals import Proposal, Victim
from shared.wire import (
    SCHEMA_VERSION,
    MessageError,
    choice_field,
    need_field,
    opt_field,
    strings_field,
)

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
    body = ScheduleRequest("t", "ns/p", "u", 1, 1, 0, 1.0, 1.0, 2.0).to_wire()
    body["ts"] = True
    with pytest.raises(MessageError, match="field 'ts': expected int or float, got True"):
        ScheduleRequest.from_wire(body)


@pytest.mark.parametrize(
    ("read", "want"),
    [
        pytest.param(lambda b: need_field(b, "n", int), 1, id="need"),
        pytest.param(lambda b: need_field(b, "flag", bool), True, id="need-bool"),
        pytest.param(lambda b: opt_field(b, "absent", int, 9), 9, id="opt-absent"),
        pytest.param(lambda b: opt_field(b, "nil", int, 9), 9, id="opt-nil"),
        pytest.param(lambda b: strings_field(b, "absent"), (), id="strings-absent"),
        pytest.param(lambda b: strings_field(b, "names"), ("a", "b"), id="strings"),
        pytest.param(lambda b: choice_field(b, "absent", ("x", "y"), "y"), "y", id="choice-dflt"),
        pytest.param(lambda b: choice_field(b, "pick", ("x", "y")), "x", id="choice"),
    ],
)
def test_field_readers(read: Any, want: object) -> None:
    body = {"n": 1, "flag": True, "nil": None, "names": ["a", "b"], "pick": "x"}
    assert read(body) == want


def test_a_required_choice_must_be_there() -> None:
    with pytest.raises(MessageError, match="missing field 'pick'"):
        choice_field({}, "pick", ("x",))
