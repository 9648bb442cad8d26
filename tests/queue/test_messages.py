"""Message schemas: round trips, the pod fingerprint, and precise errors on bad input."""

from __future__ import annotations

import dataclasses

import msgpack
import pytest

from services.queue.records import PodRecord
from shared.messaging.messages import (
    DeadLetter,
    Outcome,
    ScheduleBatch,
    ScheduleRequest,
    decode_message,
    pod_fingerprint,
)
from shared.messaging.wire import MessageError
from shared.models import Node, NodeStatus, ObjectMeta
from shared.models.codec import encode
from tests.queue.builders import make_pod

POD = make_pod("web", "team-a", priority=7, gates=["g1"], labels={"app": "web"}, rv=3)
NODE = Node(metadata=ObjectMeta(name="n1", namespace=""), status=NodeStatus(allocatable={"cpu": 1}))
REQUEST = ScheduleRequest(
    tenant="team-a",
    pod_key="team-a/web",
    uid="u1",
    attempt=2,
    scheduling_cycle=9,
    priority=7,
    timestamp=1.5,
    initial_attempt_timestamp=1.0,
    lease_expires_at=31.5,
    nominated_node_name="n1",
    redispatches=1,
    pod=b"body",
)


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(ScheduleBatch((REQUEST, dataclasses.replace(REQUEST, attempt=3))), id="batch"),
        pytest.param(
            Outcome(
                tenant="t",
                pod_key="t/p",
                uid="u",
                attempt=1,
                result="unschedulable",
                unschedulable_plugins=("NodeResourcesFit",),
                pending_plugins=("Coscheduling",),
                message="0/3 nodes are available",
                nominated_node_name="",
                pods_to_activate=("t/q",),
            ),
            id="outcome",
        ),
        pytest.param(Outcome("t", "t/p", "u", 4, "extend", lease_seconds=12.5), id="extend"),
        pytest.param(
            DeadLetter("queue", "berth.pod-events", 1, 42, "bad", b"k", b"\x00"), id="dlq"
        ),
    ],
)
def test_round_trip(message: object) -> None:
    assert decode_message(message.encode()) == message  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "count",
    [
        pytest.param(0, id="empty"),
        pytest.param(1, id="one"),
        pytest.param(15, id="fixarray-max"),
        pytest.param(16, id="array16"),
        pytest.param(65_536, id="array32"),
    ],
)
def test_encode_raw_is_encode_for_pre_encoded_requests(count: int) -> None:
    requests = tuple(dataclasses.replace(REQUEST, attempt=i) for i in range(count))
    parts = [msgpack.packb(r.to_body(), use_bin_type=True) for r in requests]
    raw = ScheduleBatch.encode_raw(count, parts)
    assert raw == ScheduleBatch(requests).encode()
    assert decode_message(raw) == ScheduleBatch(requests)


def test_pod_record_carries_what_the_queue_routes_on() -> None:
    rec = PodRecord.from_pod(POD)
    assert (rec.key, rec.priority, rec.scheduling_gates, rec.resource_version) == (
        "team-a/web",
        7,
        ("g1",),
        3,
    )
    assert rec.pod() == POD


def test_fingerprint_ignores_status_and_resource_version_only() -> None:
    base = pod_fingerprint(POD)
    status_only = make_pod("web", "team-a", priority=7, gates=["g1"], labels={"app": "web"})
    status_only = dataclasses.replace(
        status_only, metadata=dataclasses.replace(POD.metadata, resource_version=99)
    )
    status_only.status.nominated_node_name = "n9"
    assert pod_fingerprint(status_only) == base
    relabelled = make_pod("web", "team-a", priority=7, gates=["g1"], labels={"app": "db"})
    relabelled.metadata.uid = POD.metadata.uid
    assert pod_fingerprint(relabelled) != base


def _packed(body: object) -> bytes:
    data: bytes = msgpack.packb(body, use_bin_type=True)
    return data


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b"\xc1\xc1", "undecodable msgpack", id="garbage"),
        pytest.param(_packed([1, 2]), "expected a map", id="not-a-map"),
        pytest.param(_packed({"v": 2, "t": "pod"}), "unsupported schema version 2", id="version"),
        pytest.param(_packed({"v": 1}), "missing message type", id="no-type"),
        pytest.param(_packed({"v": 1, "t": "nope"}), "unknown message type 'nope'", id="type"),
        pytest.param(
            # Pod events are no longer messages: the queue reads pods from the change stream.
            _packed({"v": 1, "t": "pod", "op": "add", "pod": {"ns": "a", "name": "b"}}),
            "unknown message type 'pod'",
            id="pod-events-are-not-messages",
        ),
        pytest.param(
            _packed(
                {
                    "v": 1,
                    "t": "outcome",
                    "tenant": "t",
                    "key": "ns/k",
                    "uid": "u",
                    "attempt": "1",
                    "result": "scheduled",
                }
            ),
            "field 'attempt': expected int",
            id="wrong-type",
        ),
        pytest.param(
            _packed({"v": 1, "t": "schedule", "requests": [{"tenant": "t"}]}),
            "requests[0]: missing field 'key'",
            id="batch-item",
        ),
    ],
)
def test_bad_payloads_raise_message_error(data: bytes, error: str) -> None:
    with pytest.raises(MessageError) as info:
        decode_message(data)
    assert error in str(info.value)


def test_pod_record_with_a_non_pod_body_is_an_error() -> None:
    rec = PodRecord(namespace="a", name="b", uid="u", body=encode(NODE))
    with pytest.raises(MessageError, match="body is a Node"):
        rec.pod()
