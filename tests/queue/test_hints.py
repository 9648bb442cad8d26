"""Queueing hints: which cluster event may help which plugin (upstream EventsToRegister)."""

from __future__ import annotations

import pytest

from services.queue.hints import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    POD_GROUP_ADD,
    POD_GROUP_DELETE,
    UNSCHEDULABLE_TIMEOUT,
    ActionType,
    ClusterEvent,
    QueueingHints,
    Resource,
    node_update_action,
    resized_down,
)
from shared.models import Node, NodeSpec, NodeStatus, ObjectMeta, Taint
from tests.queue.builders import make_pod

HINTS = QueueingHints.default()
A = ActionType


def node(
    labels: dict[str, str] | None = None,
    cpu: int = 4000,
    taints: list[Taint] | None = None,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
) -> Node:
    return Node(
        metadata=ObjectMeta(
            name="n1", namespace="", labels=labels or {}, annotations=annotations or {}
        ),
        spec=NodeSpec(unschedulable=unschedulable, taints=taints or []),
        status=NodeStatus(allocatable={"cpu": cpu}),
    )


def update(action: ActionType) -> ClusterEvent:
    return ClusterEvent(Resource.NODE, action, "NodeUpdate")


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(
            NODE_ADD,
            {
                "NodeName",
                "NodeUnschedulable",
                "NodePorts",
                "NodeAffinity",
                "TaintToleration",
                "NodeResourcesFit",
                "NodeResourcesBalancedAllocation",
                "InterPodAffinity",
                "PodTopologySpread",
                "VolumeBinding",
                "VolumeZone",
                "NodeVolumeLimits",
            },
            id="node-add",
        ),
        pytest.param(NODE_DELETE, {"PodTopologySpread"}, id="node-delete"),
        pytest.param(
            update(A.UPDATE_NODE_ALLOCATABLE),
            {"NodeResourcesFit", "NodeResourcesBalancedAllocation"},
            id="node-allocatable",
        ),
        pytest.param(
            update(A.UPDATE_NODE_LABEL),
            {
                "NodeAffinity",
                "InterPodAffinity",
                "PodTopologySpread",
                "VolumeBinding",
                "VolumeZone",
            },
            id="node-labels",
        ),
        pytest.param(
            update(A.UPDATE_NODE_TAINT),
            {"NodeUnschedulable", "TaintToleration", "PodTopologySpread", "VolumeBinding"},
            id="node-taints-or-uncordon",
        ),
        pytest.param(update(A.UPDATE_NODE_ANNOTATION), set(), id="node-annotations-help-none"),
        pytest.param(
            ASSIGNED_POD_ADD,
            {"InterPodAffinity", "PodTopologySpread", "Coscheduling"},
            id="pod-add",
        ),
        pytest.param(
            ASSIGNED_POD_DELETE,
            {
                "NodePorts",
                "NodeResourcesFit",
                "NodeResourcesBalancedAllocation",
                "InterPodAffinity",
                "PodTopologySpread",
                "VolumeRestrictions",
                "NodeVolumeLimits",
            },
            id="pod-delete",
        ),
        pytest.param(
            ASSIGNED_POD_UPDATE,
            {
                "NodeUnschedulable",
                "TaintToleration",
                "NodeResourcesFit",
                "NodeResourcesBalancedAllocation",
                "InterPodAffinity",
                "PodTopologySpread",
                "SchedulingGates",
            },
            id="pod-update",
        ),
        pytest.param(POD_GROUP_ADD, {"Coscheduling"}, id="podgroup-add"),
        pytest.param(POD_GROUP_DELETE, set(), id="podgroup-delete-helps-none"),
    ],
)
def test_plugins_for_event(event: ClusterEvent, expected: set[str]) -> None:
    assert HINTS.plugins_for(event) == frozenset(expected)


def test_unschedulable_timeout_is_a_wildcard() -> None:
    assert HINTS.plugins_for(UNSCHEDULABLE_TIMEOUT) is None


def test_out_of_tree_plugin_registration() -> None:
    hints = HINTS.with_plugin("MyGpuPlugin", [(Resource.NODE, A.UPDATE_NODE_ALLOCATABLE)])
    assert "MyGpuPlugin" in (hints.plugins_for(update(A.UPDATE_NODE_ALLOCATABLE)) or set())
    assert "MyGpuPlugin" not in (hints.plugins_for(update(A.UPDATE_NODE_LABEL)) or set())


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(node(), node(), A.NONE, id="nothing"),
        pytest.param(node(cpu=4000), node(cpu=8000), A.UPDATE_NODE_ALLOCATABLE, id="allocatable"),
        pytest.param(node(), node(labels={"zone": "a"}), A.UPDATE_NODE_LABEL, id="labels"),
        pytest.param(
            node(),
            node(taints=[Taint(key="k", value="v", effect="NoSchedule")]),
            A.UPDATE_NODE_TAINT,
            id="taints",
        ),
        pytest.param(node(unschedulable=True), node(), A.UPDATE_NODE_TAINT, id="uncordon-helps"),
        pytest.param(node(), node(unschedulable=True), A.NONE, id="cordon-helps-nobody"),
        pytest.param(
            node(), node(annotations={"a": "b"}), A.UPDATE_NODE_ANNOTATION, id="annotations"
        ),
        pytest.param(
            node(cpu=1),
            node(cpu=2, labels={"x": "y"}),
            A.UPDATE_NODE_ALLOCATABLE | A.UPDATE_NODE_LABEL,
            id="two-changes",
        ),
    ],
)
def test_node_update_split_by_what_changed(old: Node, new: Node, expected: ActionType) -> None:
    assert node_update_action(old, new) == expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param(1000, 500, True, id="cpu-down"),
        pytest.param(500, 1000, False, id="cpu-up"),
        pytest.param(500, 500, False, id="same"),
    ],
)
def test_resized_down(before: int, after: int, expected: bool) -> None:
    assert resized_down(make_pod("p", cpu=before), make_pod("p", cpu=after)) is expected
