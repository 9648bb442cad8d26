import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code, Status
from scheduling.plugins.helper.testing import by_name, filter_statuses, rows_of
from scheduling.plugins.tainttoleration import (
    TaintToleration,
    new,
    untolerated_taint_reason,
)
from shared.models import Node, Pod, Taint, Toleration, tolerates_taint
from tests.builders import make_node, make_pod

NS, PNS, NE = "NoSchedule", "PreferNoSchedule", "NoExecute"


def node(name: str, *taints: tuple[str, str, str]) -> Node:
    builder = make_node(name)
    for key, value, effect in taints:
        builder.taint(key, value, effect)
    return builder.obj()


def pod(*tolerations: tuple[str, str, str, str]) -> Pod:
    """tolerations as (key, operator, value, effect)."""
    builder = make_pod("pod1")
    for key, operator, value, effect in tolerations:
        builder.toleration(key, value, effect, operator)
    return builder.obj()


def rejected(key: str, value: str) -> Status:
    return Status.unresolvable(
        f"node(s) had untolerated taint {{{key}: {value}}}", plugin="TaintToleration"
    )


@pytest.mark.parametrize(
    ("the_pod", "the_node", "want"),
    [
        # upstream taint_toleration_test.go TestTaintTolerationFilter (the Gt/Lt cases need the
        # alpha TaintTolerationComparisonOperators gate, off by default: not ported). Upstream
        # >= 1.35 words the reason "node(s) had untolerated taint(s)"; berth names the taint.
        pytest.param(
            pod(),
            node("nodeA", ("dedicated", "user1", NS)),
            rejected("dedicated", "user1"),
            id="no-tolerations-nonempty-taints",
        ),
        pytest.param(
            pod(("dedicated", "", "user1", NS)),
            node("nodeA", ("dedicated", "user1", NS)),
            None,
            id="dedicated-node-user1-tolerated",
        ),
        pytest.param(
            pod(("dedicated", "Equal", "user2", NS)),
            node("nodeA", ("dedicated", "user1", NS)),
            rejected("dedicated", "user1"),
            id="dedicated-node-user1-not-tolerated-by-user2",
        ),
        pytest.param(
            pod(("foo", "Exists", "", NS)),
            node("nodeA", ("foo", "bar", NS)),
            None,
            id="exists-toleration",
        ),
        pytest.param(
            pod(("dedicated", "Equal", "user2", NS), ("foo", "Exists", "", NS)),
            node("nodeA", ("dedicated", "user2", NS), ("foo", "bar", NS)),
            None,
            id="multiple-tolerations-all-taints-tolerated",
        ),
        pytest.param(
            pod(("foo", "Equal", "bar", PNS)),
            node("nodeA", ("foo", "bar", NS)),
            rejected("foo", "bar"),
            id="effect-mismatch",
        ),
        pytest.param(
            pod(("foo", "Equal", "bar", "")),
            node("nodeA", ("foo", "bar", NS)),
            None,
            id="empty-effect-tolerates-noschedule",
        ),
        pytest.param(
            pod(("dedicated", "Equal", "user2", NS)),
            node("nodeA", ("dedicated", "user1", PNS)),
            None,
            id="prefer-no-schedule-taint-not-filtered",
        ),
        pytest.param(
            pod(),
            node("nodeA", ("dedicated", "user1", PNS)),
            None,
            id="no-tolerations-prefer-no-schedule-taint",
        ),
        # NoExecute is filtered too; the reason names the first untolerated taint in node order
        pytest.param(
            pod(),
            node("nodeA", ("soft", "x", PNS), ("evict", "", NE), ("hard", "y", NS)),
            rejected("evict", ""),
            id="first-untolerated-taint-in-node-order",
        ),
        pytest.param(
            pod(("", "Exists", "", "")),
            node("nodeA", ("evict", "", NE), ("hard", "y", NS)),
            None,
            id="wildcard-toleration",
        ),
        # The taints docs' example: node1 has key1=value1:NoSchedule, key1=value1:NoExecute and
        # key2=value2:NoSchedule; the pod tolerates only the two key1 taints -> not schedulable.
        pytest.param(
            pod(("key1", "Equal", "value1", NS), ("key1", "Equal", "value1", NE)),
            node("node1", ("key1", "value1", NS), ("key1", "value1", NE), ("key2", "value2", NS)),
            rejected("key2", "value2"),
            id="spec-f15-new-pod-not-schedulable",
        ),
    ],
)
def test_filter(the_pod: Pod, the_node: Node, want: Status | None) -> None:
    nodes = NodeColumns([the_node])
    got = filter_statuses(TaintToleration(), CycleState(), the_pod, nodes)
    assert got == {the_node.metadata.name: want}


def test_spec_f15_running_pod_keeps_running() -> None:
    # The taints docs' example: the only untolerated taint is NoSchedule, so nothing would
    # evict a running pod.
    tolerations = [
        Toleration(key="key1", operator="Equal", value="value1", effect=NS),
        Toleration(key="key1", operator="Equal", value="value1", effect=NE),
    ]
    taints = [
        Taint(key="key1", value="value1", effect=NS),
        Taint(key="key1", value="value1", effect=NE),
        Taint(key="key2", value="value2", effect=NS),
    ]
    untolerated = [t for t in taints if not tolerates_taint(tolerations, t)]
    assert [(t.key, t.effect) for t in untolerated] == [("key2", NS)]
    reason = untolerated_taint_reason(untolerated[0])
    assert reason == "node(s) had untolerated taint {key2: value2}"


@pytest.mark.parametrize(
    "subset",
    [
        pytest.param(None, id="all-rows"),
        pytest.param(["d", "b", "a"], id="index-rows"),
        pytest.param(["c"], id="single-passing-row"),
    ],
)
def test_filter_many_nodes_shares_taint_sets(subset: list[str] | None) -> None:
    nodes = NodeColumns(
        [
            node("a", ("gpu", "true", NS)),
            node("b", ("gpu", "true", NS)),
            node("c"),
            node("d", ("maint", "", NE)),
            node("e", ("gpu", "false", NS)),
        ]
    )
    the_pod = pod(("gpu", "Equal", "false", NS))
    got = filter_statuses(TaintToleration(), CycleState(), the_pod, nodes, subset)
    want = {
        "a": rejected("gpu", "true"),
        "b": rejected("gpu", "true"),
        "c": None,
        "d": rejected("maint", ""),
        "e": None,
    }
    assert got == {name: want[name] for name in got}
    assert len(nodes.taint_sets) == 4, "a and b share one taint set"


def score_all(
    the_pod: Pod, the_nodes: list[Node], subset: list[str] | None = None
) -> dict[str, int]:
    nodes = NodeColumns(the_nodes)
    plugin = TaintToleration()
    state = CycleState()
    rows = rows_of(nodes, subset)
    assert plugin.pre_score(state, the_pod, nodes, rows).is_success()
    raw = plugin.score(state, the_pod, nodes, rows)
    assert isinstance(raw, np.ndarray)
    return by_name(nodes, rows, plugin.normalize_score(state, the_pod, raw))


@pytest.mark.parametrize(
    ("the_pod", "the_nodes", "want"),
    [
        # upstream taint_toleration_test.go TestTaintTolerationScore
        pytest.param(
            pod(("foo", "Equal", "bar", PNS)),
            [node("nodeA", ("foo", "bar", PNS)), node("nodeB", ("foo", "blah", PNS))],
            {"nodeA": 100, "nodeB": 0},
            id="tolerated-taint-scores-higher",
        ),
        pytest.param(
            pod(("cpu-type", "Equal", "arm64", PNS), ("disk-type", "Equal", "ssd", PNS)),
            [
                node("nodeA"),
                node("nodeB", ("cpu-type", "arm64", PNS)),
                node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)),
            ],
            {"nodeA": 100, "nodeB": 100, "nodeC": 100},
            id="count-of-tolerated-taints-does-not-matter",
        ),
        pytest.param(
            pod(("foo", "Equal", "bar", PNS)),
            [
                node("nodeA"),
                node("nodeB", ("cpu-type", "arm64", PNS)),
                node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)),
            ],
            {"nodeA": 100, "nodeB": 50, "nodeC": 0},
            id="more-intolerable-taints-lower-score",
        ),
        pytest.param(
            pod(("cpu-type", "Equal", "arm64", NS), ("disk-type", "Equal", "ssd", NS)),
            [
                node("nodeA"),
                node("nodeB", ("cpu-type", "arm64", NS)),
                node("nodeC", ("cpu-type", "arm64", PNS), ("disk-type", "ssd", PNS)),
            ],
            {"nodeA": 100, "nodeB": 100, "nodeC": 0},
            id="only-prefer-no-schedule-taints-and-tolerations-count",
        ),
        pytest.param(
            pod(),
            [node("nodeA"), node("nodeB", ("cpu-type", "arm64", PNS))],
            {"nodeA": 100, "nodeB": 0},
            id="no-taints-no-tolerations",
        ),
        # an empty toleration effect tolerates PreferNoSchedule too
        pytest.param(
            pod(("foo", "Exists", "", "")),
            [node("nodeA", ("foo", "x", PNS)), node("nodeB", ("bar", "y", PNS))],
            {"nodeA": 100, "nodeB": 0},
            id="empty-effect-toleration-counts",
        ),
        pytest.param(
            pod(),
            [node("nodeA"), node("nodeB")],
            {"nodeA": 100, "nodeB": 100},
            id="all-zero-reverses-to-max",
        ),
    ],
)
def test_score(the_pod: Pod, the_nodes: list[Node], want: dict[str, int]) -> None:
    assert score_all(the_pod, the_nodes) == want


def test_score_index_rows_align() -> None:
    the_nodes = [
        node("a", ("x", "1", PNS), ("y", "2", PNS), ("z", "3", PNS)),
        node("b"),
        node("c", ("x", "1", PNS)),
    ]
    # Normalized over the rows given: max 3 intolerable -> c gets 100 - 100*1//3 = 67.
    assert score_all(pod(), the_nodes, ["c", "a", "b"]) == {"c": 67, "a": 0, "b": 100}
    assert score_all(pod(), the_nodes, ["c", "b"]) == {"c": 0, "b": 100}


def test_score_without_pre_score_is_an_error() -> None:
    nodes = NodeColumns([node("a")])
    status = TaintToleration().score(CycleState(), pod(), nodes, ALL_ROWS)
    assert isinstance(status, Status)
    assert status.code == Code.ERROR


def test_new_and_name() -> None:
    assert new(None, None).name == "TaintToleration"  # type: ignore[arg-type]
