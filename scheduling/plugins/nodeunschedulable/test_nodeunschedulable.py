import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Status
from scheduling.plugins import names
from scheduling.plugins.helper.testing import filter_statuses
from scheduling.plugins.nodeunschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    NodeUnschedulable,
    new,
)
from tests.builders import PodBuilder, make_node, make_pod

REJECTED = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=names.NODE_UNSCHEDULABLE)
KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("pod", "unschedulable", "want"),
    [
        # upstream node_unschedulable_test.go
        pytest.param(make_pod(), True, REJECTED, id="unschedulable-node-rejects-pod"),
        pytest.param(make_pod(), False, None, id="normal-node-accepts-pod"),
        pytest.param(
            make_pod().toleration(KEY, effect="NoSchedule", operator="Exists"),
            True,
            None,
            id="pod-tolerating-unschedulable-taint",
        ),
        # toleration semantics (v1 ToleratesTaint)
        pytest.param(
            make_pod().toleration(KEY, effect="NoSchedule", operator="Equal"),
            True,
            None,
            id="equal-with-empty-value-tolerates",
        ),
        pytest.param(
            make_pod().toleration(operator="Exists"),
            True,
            None,
            id="exists-without-key-tolerates-everything",
        ),
        pytest.param(
            make_pod().toleration(KEY, operator="Exists"),
            True,
            None,
            id="empty-effect-tolerates-every-effect",
        ),
        pytest.param(
            make_pod().toleration(KEY, effect="NoExecute", operator="Exists"),
            True,
            REJECTED,
            id="other-effect-does-not-tolerate",
        ),
        pytest.param(
            make_pod().toleration(KEY, value="x", effect="NoSchedule"),
            True,
            REJECTED,
            id="equal-with-other-value-does-not-tolerate",
        ),
    ],
)
def test_filter(pod: PodBuilder, unschedulable: bool, want: Status | None) -> None:
    nodes = NodeColumns([make_node("n").unschedulable(unschedulable).obj()])
    got = filter_statuses(NodeUnschedulable(), CycleState(), pod.obj(), nodes)
    assert got == {"n": want}


@pytest.mark.parametrize(
    "subset", [pytest.param(None, id="all-rows"), pytest.param(["c", "a"], id="index-rows")]
)
def test_filter_many_nodes(subset: list[str] | None) -> None:
    nodes = NodeColumns(
        [
            make_node("a").unschedulable().obj(),
            make_node("b").obj(),
            make_node("c").obj(),
        ]
    )
    got = filter_statuses(NodeUnschedulable(), CycleState(), make_pod().obj(), nodes, subset)
    want = {"a": REJECTED, "b": None, "c": None}
    assert got == {name: want[name] for name in got}


def test_new_and_name() -> None:
    assert new(None, None).name == "NodeUnschedulable"  # type: ignore[arg-type]
