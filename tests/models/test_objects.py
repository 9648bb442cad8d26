"""Dataclass defaults and the tiny helpers on the models."""

import pytest

from shared.models import (
    Node,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    PriorityClass,
    cluster_meta,
    priority_of,
)


def test_object_meta_defaults():
    a, b = ObjectMeta(name="a"), ObjectMeta(name="b")
    assert a.namespace == "default"
    assert a.uid
    assert a.uid != b.uid
    assert a.labels == {}
    assert a.labels is not b.labels
    assert (a.creation_timestamp, a.resource_version) == (None, 0)


def test_cluster_scoped_kinds_have_empty_namespace():
    assert Node().metadata.namespace == ""
    assert PriorityClass().metadata.namespace == ""
    assert cluster_meta("x").namespace == ""
    assert Pod().metadata.namespace == "default"


def test_pod_spec_defaults():
    spec = PodSpec()
    assert spec.scheduler_name == "default-scheduler"
    assert spec.preemption_policy == "PreemptLowerPriority"
    assert spec.priority is None
    assert spec.affinity is None
    assert spec.containers == []


@pytest.mark.parametrize(
    ("status", "allocatable"),
    [
        pytest.param(NodeStatus(capacity={"cpu": 4000}), {"cpu": 4000}, id="defaults-to-capacity"),
        pytest.param(
            NodeStatus(capacity={"cpu": 4000}, allocatable={"cpu": 3000}),
            {"cpu": 3000},
            id="explicit-allocatable-kept",
        ),
        pytest.param(NodeStatus(), {}, id="nothing"),
    ],
)
def test_node_allocatable_defaults_to_capacity(status, allocatable):
    assert status.allocatable == allocatable


def test_allocatable_default_is_a_copy():
    status = NodeStatus(capacity={"cpu": 1000})
    status.allocatable["cpu"] = 1
    assert status.capacity == {"cpu": 1000}


def test_keys():
    pod = Pod(metadata=ObjectMeta(name="p", namespace="ns"))
    assert pod.key == "ns/p"
    assert Node(metadata=cluster_meta("n1")).key == "n1"


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        pytest.param(None, 0, id="unset"),
        pytest.param(7, 7, id="set"),
        pytest.param(-5, -5, id="negative"),
    ],
)
def test_priority_of(priority, expected):
    assert priority_of(Pod(spec=PodSpec(priority=priority))) == expected
