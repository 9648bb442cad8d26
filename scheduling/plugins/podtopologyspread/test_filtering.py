"""PodTopologySpread PreFilter/Filter: the topology spread docs' examples and upstream
filtering_test.go."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code, Status
from scheduling.plugins import names
from scheduling.plugins.helper.testing import filter_statuses
from scheduling.plugins.podindex import StaticClusterObjects
from scheduling.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PRE_FILTER_KEY,
    CriticalPath,
    CriticalPaths,
    PodTopologySpread,
)
from scheduling.plugins.podtopologyspread.critical_paths import MAX_INT32
from shared.config.plugin_args import LIST_DEFAULTING, PodTopologySpreadArgs
from shared.models import LabelSelector, Node, Pod, TopologySpreadConstraint
from tests.builders import PodBuilder, label_selector, make_node, make_pod

PLUGIN = names.POD_TOPOLOGY_SPREAD
SKEW = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=PLUGIN)
NO_LABEL = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=PLUGIN)
FOO = label_selector({}, ("foo", "Exists", []))
BAR = label_selector({}, ("bar", "Exists", []))
FOO_BAR = label_selector({"foo": "bar"})
DNS = "DoNotSchedule"
SA = "ScheduleAnyway"


def node(name: str, labels: Mapping[str, str] | None = None, taint: bool = False) -> Node:
    builder = make_node(name).labels(labels or {})
    if taint:
        builder.taint("node.kubernetes.io/unschedulable")
    return builder.obj()


def zone_node(name: str, zone: str) -> Node:
    return node(name, {"zone": zone, "node": name})


def pods_on(spec: Mapping[str, int], labels: Mapping[str, str] | None = None) -> list[Pod]:
    """{"node-a": 2} -> two pods on node-a labelled foo="" (or `labels`)."""
    out = []
    for node_name, count in spec.items():
        for i in range(count):
            out.append(
                make_pod(f"p-{node_name}-{i}")
                .labels(labels if labels is not None else {"foo": ""})
                .node(node_name)
                .obj()
            )
    return out


def incoming(*constraints: tuple[int, str, str, LabelSelector | None], **labels: str) -> PodBuilder:
    builder = make_pod("p").labels(labels or {"foo": ""})
    for max_skew, key, action, selector in constraints:
        builder.spread_constraint(max_skew, key, action, selector)
    return builder


FOUR = [
    zone_node("node-a", "zone1"),
    zone_node("node-b", "zone1"),
    zone_node("node-x", "zone2"),
    zone_node("node-y", "zone2"),
]


def pre_filter(
    plugin: PodTopologySpread, pod: Pod, nodes: NodeColumns
) -> tuple[Status, CycleState]:
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, nodes)
    return status, state


def feasible(
    pod: Pod, nodes: list[Node], pods: list[Pod], plugin: PodTopologySpread | None = None
) -> dict[str, Status | None]:
    columns = NodeColumns(nodes, pods)
    plugin = plugin or PodTopologySpread()
    status, state = pre_filter(plugin, pod, columns)
    assert status.is_success(), status
    return filter_statuses(plugin, state, pod, columns)


def ok_nodes(got: dict[str, Status | None]) -> set[str]:
    return {name for name, status in got.items() if status is None}


# ------------------------------------------------------------------ documentation examples
DOC = [
    node("node1", {"zone": "zoneA", "node": "node1"}),
    node("node2", {"zone": "zoneA", "node": "node2"}),
    node("node3", {"zone": "zoneB", "node": "node3"}),
    node("node4", {"zone": "zoneB", "node": "node4"}),
]
DOC_PODS = pods_on({"node1": 1, "node2": 1, "node3": 1}, {"foo": "bar"})
CONFLICT_PODS = pods_on({"node1": 2, "node2": 1, "node3": 2}, {"foo": "bar"})
DOC_NODE5 = node("node5", {"zone": "zoneC", "node": "node5"})


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"),
    [
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            DOC,
            DOC_PODS,
            {"node3", "node4"},
            id="single-zone-constraint",
        ),
        pytest.param(
            incoming((2, "zone", DNS, FOO_BAR), foo="bar").obj(),
            DOC,
            DOC_PODS,
            {"node1", "node2", "node3", "node4"},
            id="max-skew-2-allows-zone-a",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO_BAR), foo="bar").obj(),
            DOC,
            DOC_PODS,
            {"node4"},
            id="node-key",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), (1, "node", DNS, FOO_BAR), foo="bar").obj(),
            DOC,
            DOC_PODS,
            {"node4"},
            id="two-constraints",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            DOC[:3],
            CONFLICT_PODS,
            {"node3"},
            id="conflicting-layout-zone-alone",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO_BAR), foo="bar").obj(),
            DOC[:3],
            CONFLICT_PODS,
            {"node2"},
            id="conflicting-layout-node-alone",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), (1, "node", DNS, FOO_BAR), foo="bar").obj(),
            DOC[:3],
            CONFLICT_PODS,
            set(),
            id="conflicting-constraints-pending",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            [*DOC[:3], DOC_NODE5],
            CONFLICT_PODS,
            {"node5"},
            id="node5-in-empty-zone-c",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar")
            .node_affinity_not_in("zone", ["zoneC"])
            .obj(),
            [*DOC, DOC_NODE5],
            DOC_PODS,
            # node5 fails NodeAffinity; PodTopologySpread only leaves it out of the counts.
            {"node3", "node4", "node5"},
            id="node-affinity-excludes-zone-c-from-counting",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            [*DOC, node("node5", {"zone-typo": "zoneC", "node": "node5"})],
            DOC_PODS,
            {"node3", "node4"},
            id="node-without-zone-is-never-chosen",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            [node("node1", {"node": "node1"}), DOC[1], DOC[2]],
            CONFLICT_PODS,
            {"node2"},
            id="pods-on-node-without-zone-do-not-count",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="other").obj(),
            DOC,
            DOC_PODS,
            {"node1", "node2", "node3", "node4"},
            id="incoming-pod-not-matching-itself",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            [node(f"n{z}{i}", {"zone": z}) for z in "abc" for i in range(2)],
            pods_on({"na0": 2, "nb0": 2, "nc0": 1}, {"foo": "bar"}),
            {"nc0", "nc1"},
            id="global-min-of-2-2-1-is-1",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(),
            [node(f"n{z}", {"zone": z}) for z in "abc"],
            pods_on({"na": 2, "nb": 4, "nc": 5}, {"foo": "bar"}),
            {"na"},
            id="global-min-of-2-4-5-is-2",
        ),
    ],
)
def test_documentation_examples(
    pod: Pod, nodes: list[Node], pods: list[Pod], want: set[str]
) -> None:
    assert ok_nodes(feasible(pod, nodes, pods)) == want


def test_missing_zone_label_is_unresolvable() -> None:
    nodes = [*DOC, node("node5", {"zone-typo": "zoneC", "node": "node5"})]
    got = feasible(incoming((1, "zone", DNS, FOO_BAR), foo="bar").obj(), nodes, DOC_PODS)
    assert got["node5"] == NO_LABEL
    assert got["node1"] == SKEW


# ------------------------------------------- upstream "normal case with two spreadConstraints"
TWO_CONSTRAINTS_PODS = pods_on({"node-a": 2, "node-b": 1, "node-y": 4})
TWO_CONSTRAINTS = incoming((1, "zone", DNS, FOO), (1, "node", DNS, FOO)).obj()


def test_two_constraints_pre_filter_state() -> None:
    columns = NodeColumns(FOUR, TWO_CONSTRAINTS_PODS)
    status, state = pre_filter(PodTopologySpread(), TWO_CONSTRAINTS, columns)
    assert status.is_success()
    pre = state.read(PRE_FILTER_KEY)
    zone, by_node = pre.constraints
    assert (zone.max_skew, zone.topology_key, zone.min_domains) == (1, "zone", 1)
    assert (by_node.node_affinity_policy, by_node.node_taints_policy) == ("Honor", "Ignore")
    assert pre.tp_value_to_match_num(columns, 0) == {"zone1": 3, "zone2": 4}
    assert pre.tp_value_to_match_num(columns, 1) == {
        "node-a": 2,
        "node-b": 1,
        "node-x": 0,
        "node-y": 4,
    }
    assert pre.critical_paths[0].as_pairs() == [("zone1", 3), ("zone2", 4)]
    assert pre.critical_paths[1].as_pairs() == [("node-x", 0), ("node-b", 1)]
    assert pre.domains == (2, 4)


@pytest.mark.parametrize(
    ("constraints", "want"),
    [
        pytest.param([(1, "zone", DNS, FOO)], {"node-a", "node-b"}, id="zone-alone"),
        pytest.param([(1, "node", DNS, FOO)], {"node-x"}, id="node-alone"),
        pytest.param([(1, "zone", DNS, FOO), (1, "node", DNS, FOO)], set(), id="both"),
    ],
)
def test_filter(constraints: list[tuple[int, str, str, LabelSelector]], want: set[str]) -> None:
    assert ok_nodes(feasible(incoming(*constraints).obj(), FOUR, TWO_CONSTRAINTS_PODS)) == want


@pytest.mark.parametrize(
    ("min_domains", "want"),
    [
        pytest.param(None, {"node-a", "node-b"}, id="default-1"),
        pytest.param(2, {"node-a", "node-b"}, id="enough-domains"),
        pytest.param(3, set(), id="fewer-domains-than-min-global-min-0"),
    ],
)
def test_two_constraints_min_domains(min_domains: int | None, want: set[str]) -> None:
    pod = (
        make_pod("p")
        .label("foo", "")
        .spread_constraint(1, "zone", DNS, FOO, min_domains=min_domains)
        .obj()
    )
    got = feasible(pod, FOUR, TWO_CONSTRAINTS_PODS)
    assert ok_nodes(got) == want
    assert all(s is None or s == SKEW for s in got.values())


@pytest.mark.parametrize(
    ("spread", "min_domains", "max_skew", "want"),
    [
        # upstream-style: nodes spread 2/1/0/3 on key "node"; 4 domains.
        pytest.param(
            {"node-a": 2, "node-b": 1, "node-y": 3},
            5,
            2,
            {"node-b", "node-x"},
            id="min-domains-5-skew-2",
        ),
        pytest.param(
            {"node-a": 2, "node-b": 1, "node-y": 3}, 4, 1, {"node-x"}, id="min-domains-met"
        ),
        pytest.param(
            {"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1},
            5,
            1,
            set(),
            id="min-domains-5-all-at-1",
        ),
        pytest.param(
            {"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1},
            5,
            2,
            set(FOUR_NAMES := ("node-a", "node-b", "node-x", "node-y")),
            id="min-domains-5-skew-2-all-fit",
        ),
    ],
)
def test_min_domains(
    spread: dict[str, int], min_domains: int, max_skew: int, want: set[str]
) -> None:
    pod = (
        make_pod("p")
        .label("foo", "")
        .spread_constraint(max_skew, "node", DNS, FOO, min_domains=min_domains)
        .obj()
    )
    assert ok_nodes(feasible(pod, FOUR, pods_on(spread))) == want


# ------------------------------------------------------------------ criticalPaths.update
def test_critical_paths_update_sequence() -> None:
    paths = CriticalPaths()
    assert paths.as_pairs() == [("", MAX_INT32), ("", MAX_INT32)]
    steps = []
    for value, num in [("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)]:
        paths = paths.update(value, num)
        steps.append(paths.as_pairs())
    assert steps == [
        [("node-a", 2), ("", MAX_INT32)],
        [("node-b", 1), ("node-a", 2)],
        [("node-x", 0), ("node-b", 1)],
        [("node-x", 0), ("node-b", 1)],
    ]


@pytest.mark.parametrize(
    ("start", "value", "num", "want"),
    [
        pytest.param([("x", 0), ("b", 1)], "x", 5, [("b", 1), ("x", 5)], id="existing-first-swaps"),
        pytest.param(
            [("x", 0), ("b", 1)], "b", 0, [("x", 0), ("b", 0)], id="existing-second-no-swap"
        ),
        pytest.param([("x", 1), ("b", 3)], "c", 2, [("x", 1), ("c", 2)], id="new-between"),
        pytest.param([("x", 1), ("b", 3)], "c", 0, [("c", 0), ("x", 1)], id="new-minimum"),
        pytest.param([("x", 1), ("b", 3)], "c", 3, [("x", 1), ("b", 3)], id="new-not-smaller"),
    ],
)
def test_update(
    start: list[tuple[str, int]], value: str, num: int, want: list[tuple[str, int]]
) -> None:
    paths = CriticalPaths(CriticalPath(*start[0]), CriticalPath(*start[1]))
    assert paths.update(value, num).as_pairs() == want


# ------------------------------------------------------------------ status codes
def test_status_codes() -> None:
    nodes = [*FOUR, node("node-z", {"node": "node-z"})]
    got = feasible(incoming((1, "zone", DNS, FOO)).obj(), nodes, TWO_CONSTRAINTS_PODS)
    assert got["node-z"] is not None
    assert got["node-z"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert got["node-z"].reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,)
    assert got["node-x"] is not None
    assert got["node-x"].code == Code.UNSCHEDULABLE
    assert got["node-x"].reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)


def test_first_failing_constraint_decides_the_reason() -> None:
    nodes = [
        zone_node("node-a", "zone1"),
        node("node-b", {"zone": "zone2"}),
        zone_node("node-x", "zone2"),
    ]
    pod = incoming((1, "zone", DNS, FOO), (1, "node", DNS, FOO)).obj()
    got = feasible(pod, nodes, pods_on({"node-x": 3}))
    # node-b fails zone skew first (Unschedulable) although it also lacks the "node" label.
    assert got == {"node-a": None, "node-b": SKEW, "node-x": SKEW}


# ------------------------------------------------------------------ upstream TestPreFilterState
HONOR = "Honor"
IGNORE = "Ignore"
THREE_NODE = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-c", {"node": "node-c", "bar": ""}),
]
THREE_NODE_PODS = [*pods_on({"node-a": 1, "node-b": 2}, {"bar": ""}), *pods_on({"node-c": 1}, {})]
TAINTED = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c", "bar": ""}, taint=True),
]


def _spread(
    builder: PodBuilder,
    key: str,
    selector: LabelSelector | None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    max_skew: int = 1,
    action: str = DNS,
) -> PodBuilder:
    return builder.spread_constraint(
        max_skew,
        key,
        action,
        selector,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
    )


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want_counts", "want_paths"),
    [
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "zone", FOO_BAR, max_skew=5).obj(),
            FOUR,
            [],
            [{"zone1": 0, "zone2": 0}],
            [[0, 0]],
            id="clean-cluster",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "zone", FOO).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 2}),
            [{"zone1": 3, "zone2": 2}],
            [[2, 3]],
            id="one-constraint",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "zone", None).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 2}),
            [{"zone1": 0, "zone2": 0}],
            [[0, 0]],
            id="null-selector-counts-nothing",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "zone", FOO).obj(),
            [*FOUR, zone_node("node-o", "zone3"), zone_node("node-p", "zone3")],
            pods_on({"node-a": 2, "node-b": 1, "node-y": 2}),
            [{"zone1": 3, "zone2": 2, "zone3": 0}],
            [[0, 2]],
            id="three-zones",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "zone", FOO).obj(),
            FOUR,
            [
                *pods_on({"node-a": 1, "node-b": 1, "node-y": 1}),
                make_pod("ns1").namespace("ns1").label("foo", "").node("node-a").obj(),
                make_pod("ns2").namespace("ns2").label("foo", "").node("node-y").obj(),
            ],
            [{"zone1": 2, "zone2": 1}],
            [[1, 2]],
            id="other-namespaces-do-not-count",
        ),
        pytest.param(
            make_pod("p")
            .labels(foo="", bar="")
            .spread_constraint(1, "zone", DNS, FOO)
            .spread_constraint(1, "node", DNS, BAR)
            .obj(),
            [
                zone_node("node-a", "zone1"),
                zone_node("node-b", "zone1"),
                zone_node("node-y", "zone2"),
            ],
            [*pods_on({"node-a": 1}), *pods_on({"node-b": 1}, {"bar": ""})],
            [{"zone1": 1, "zone2": 0}, {"node-a": 0, "node-b": 1, "node-y": 0}],
            [[0, 1], [0, 0]],
            id="different-selectors",
        ),
        pytest.param(
            _spread(
                _spread(
                    make_pod("p").label("foo", "").node_affinity_not_in("node", ["node-x"]),
                    "zone",
                    FOO,
                ),
                "node",
                FOO,
            ).obj(),
            FOUR,
            TWO_CONSTRAINTS_PODS,
            [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            [[3, 4], [1, 2]],
            id="node-affinity-excludes-node-x",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", "").node_selector(foo=""), "node", BAR).obj(),
            THREE_NODE,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2}],
            [[1, 2]],
            id="affinity-policy-honored-node-selector",
        ),
        pytest.param(
            _spread(
                make_pod("p").label("foo", "").node_selector(foo=""),
                "node",
                BAR,
                affinity_policy=IGNORE,
            ).obj(),
            THREE_NODE,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2, "node-c": 0}],
            [[0, 1]],
            id="affinity-policy-ignored-node-selector",
        ),
        pytest.param(
            _spread(
                make_pod("p").label("foo", "").node_affinity_in("foo", [""]), "node", BAR
            ).obj(),
            THREE_NODE,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2}],
            [[1, 2]],
            id="affinity-policy-honored-node-affinity",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "node", BAR).obj(),
            TAINTED,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2, "node-c": 0}],
            [[0, 1]],
            id="taints-policy-ignored",
        ),
        pytest.param(
            _spread(make_pod("p").label("foo", ""), "node", BAR, taints_policy=HONOR).obj(),
            TAINTED,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2}],
            [[1, 2]],
            id="taints-policy-honored",
        ),
        pytest.param(
            _spread(
                make_pod("p").label("foo", "").toleration("node.kubernetes.io/unschedulable"),
                "node",
                BAR,
                taints_policy=HONOR,
            ).obj(),
            TAINTED,
            THREE_NODE_PODS,
            [{"node-a": 1, "node-b": 2, "node-c": 0}],
            [[0, 1]],
            id="taints-policy-honored-tolerated",
        ),
        pytest.param(
            _spread(
                _spread(make_pod("p").label("foo", "").node_selector(foo=""), "zone", FOO),
                "node",
                FOO,
                affinity_policy=IGNORE,
            ).obj(),
            [
                node("node-a", {"zone": "zone1", "node": "node-a", "foo": ""}),
                node("node-b", {"zone": "zone1", "node": "node-b"}),
                node("node-x", {"zone": "zone2", "node": "node-x", "foo": ""}),
            ],
            pods_on({"node-b": 2, "node-x": 1}),
            [{"zone1": 0, "zone2": 1}, {"node-a": 0, "node-b": 2, "node-x": 1}],
            [[0, 1], [0, 1]],
            id="two-constraints-different-policies",
        ),
        pytest.param(
            make_pod("p")
            .label("foo", "")
            .spread_constraint(1, "zone", SA, FOO)
            .spread_constraint(1, "zone", DNS, FOO)
            .spread_constraint(1, "node", SA, FOO)
            .spread_constraint(1, "node", DNS, FOO)
            .obj(),
            [
                zone_node("node-a", "zone1"),
                zone_node("node-b", "zone1"),
                zone_node("node-y", "zone2"),
            ],
            pods_on({"node-a": 2, "node-b": 1, "node-y": 4}),
            [{"zone1": 3, "zone2": 4}, {"node-a": 2, "node-b": 1, "node-y": 4}],
            [[3, 4], [1, 2]],
            id="soft-constraints-bypassed",
        ),
    ],
)
def test_pre_filter_state(
    pod: Pod,
    nodes: list[Node],
    pods: list[Pod],
    want_counts: list[dict[str, int]],
    want_paths: list[list[int]],
) -> None:
    columns = NodeColumns(nodes, pods)
    status, state = pre_filter(PodTopologySpread(), pod, columns)
    assert status.is_success()
    pre = state.read(PRE_FILTER_KEY)
    assert [
        pre.tp_value_to_match_num(columns, i) for i in range(len(pre.constraints))
    ] == want_counts
    assert [[p.first.match_num, p.second.match_num] for p in pre.critical_paths] == want_paths
    assert list(pre.domains) == [len(c) for c in want_counts]


def _owned(builder: PodBuilder, kind: str, name: str, api_version: str) -> Pod:
    pod = builder.owner(kind, name).obj()
    pod.metadata.owner_references[-1].api_version = api_version
    return pod


def _list_plugin(
    constraints: list[TopologySpreadConstraint], objects: StaticClusterObjects
) -> PodTopologySpread:
    args = PodTopologySpreadArgs(default_constraints=constraints, defaulting_type=LIST_DEFAULTING)
    return PodTopologySpread(args, objects)


NODE_DNS3 = TopologySpreadConstraint(max_skew=3, topology_key="node", when_unsatisfiable=DNS)
NODE_SA2 = TopologySpreadConstraint(max_skew=2, topology_key="node", when_unsatisfiable=SA)
RACK_DNS5 = TopologySpreadConstraint(max_skew=5, topology_key="rack", when_unsatisfiable=DNS)


@pytest.mark.parametrize(
    ("pod", "defaults", "services", "want"),
    [
        pytest.param(
            make_pod("p").labels(foo="bar", baz="kar").obj(),
            [NODE_DNS3, NODE_SA2, RACK_DNS5],
            [{"foo": "bar"}],
            [("node", 3), ("rack", 5)],
            id="default-constraints-and-a-service",
        ),
        pytest.param(
            make_pod("p").labels(foo="bar").obj(),
            [NODE_DNS3],
            [{"baz": "kep"}],
            "skip",
            id="service-does-not-match",
        ),
        pytest.param(
            make_pod("p")
            .labels(foo="bar", baz="tar")
            .spread_constraint(1, "zone", DNS, label_selector({"baz": "tar"}))
            .spread_constraint(2, "planet", SA, label_selector({"fot": "rok"}))
            .obj(),
            [TopologySpreadConstraint(max_skew=2, topology_key="node", when_unsatisfiable=DNS)],
            [{"foo": "bar"}],
            [("zone", 1)],
            id="pod-constraints-win-over-defaults",
        ),
        pytest.param(
            make_pod("p").labels(foo="bar").obj(),
            [NODE_SA2],
            [{"foo": "bar"}],
            "skip",
            id="soft-defaults-only-skip-pre-filter",
        ),
        pytest.param(
            make_pod("p").labels(foo="bar").obj(),
            [NODE_DNS3],
            [],
            "skip",
            id="no-owner-no-service-no-defaults",
        ),
    ],
)
def test_default_constraints_pre_filter(
    pod: Pod,
    defaults: list[TopologySpreadConstraint],
    services: list[Mapping[str, str] | None],
    want: list[tuple[str, int]] | str,
) -> None:
    plugin = _list_plugin(defaults, StaticClusterObjects(services={"default": services}))
    columns = NodeColumns([])
    status, state = pre_filter(plugin, pod, columns)
    if want == "skip":
        assert status.is_skip()
        return
    assert status.is_success()
    pre = state.read(PRE_FILTER_KEY)
    assert [(c.topology_key, c.max_skew) for c in pre.constraints] == want
    assert [p.first.match_num for p in pre.critical_paths] == [MAX_INT32] * len(want)
    assert list(pre.domains) == [0] * len(want)


# ------------------------------------------------------------------ upstream TestSingleConstraint
@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"),
    [
        pytest.param(
            incoming((1, "zone", DNS, FOO)).obj(),
            FOUR,
            [],
            {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
            id="no-existing-pods",
        ),
        pytest.param(
            incoming((1, "zone", DNS, BAR)).obj(),
            FOUR,
            [],
            {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
            id="no-pods-not-matching-itself",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO)).obj(),
            FOUR,
            [
                make_pod("a1").namespace("ns1").label("foo", "").node("node-a").obj(),
                make_pod("b1").namespace("ns2").label("foo", "").node("node-a").obj(),
                *pods_on({"node-x": 1, "node-y": 1}),
            ],
            {"node-a": None, "node-b": None, "node-x": SKEW, "node-y": SKEW},
            id="other-namespaces-do-not-count",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO)).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-a": None, "node-b": None, "node-x": None, "node-y": None},
            id="zones-3-3",
        ),
        pytest.param(
            incoming((1, "zone", DNS, FOO)).obj(),
            [
                zone_node("node-a", "zone1"),
                node("node-b", {"zon": "zone1", "node": "node-b"}),
                zone_node("node-x", "zone2"),
                zone_node("node-y", "zone2"),
            ],
            pods_on({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}),
            {"node-a": None, "node-b": NO_LABEL, "node-x": SKEW, "node-y": SKEW},
            id="label-typo-on-node-b",
        ),
        pytest.param(
            incoming((1, "rack", DNS, FOO)).obj(),
            [zone_node("node-a", "zone1"), zone_node("node-x", "zone2")],
            [],
            {"node-a": NO_LABEL, "node-x": NO_LABEL},
            id="no-node-has-rack",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO)).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-a": SKEW, "node-b": SKEW, "node-x": None, "node-y": SKEW},
            id="nodes-2-1-0-3",
        ),
        pytest.param(
            incoming((2, "node", DNS, FOO)).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-a": SKEW, "node-b": None, "node-x": None, "node-y": SKEW},
            id="nodes-2-1-0-3-max-skew-2",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO), bar="").obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-a": SKEW, "node-b": None, "node-x": None, "node-y": SKEW},
            id="nodes-2-1-0-3-not-matching-itself",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO)).node_affinity_in("node", ["node-a", "node-y"]).obj(),
            FOUR,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-a": None, "node-b": None, "node-x": None, "node-y": SKEW},
            id="node-affinity-counts-only-a-and-y",
        ),
        pytest.param(
            incoming((1, "node", DNS, FOO)).obj(),
            [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
            [
                make_pod("t").label("foo", "").node("node-a").terminating().obj(),
                *pods_on({"node-b": 1}),
            ],
            {"node-a": None, "node-b": SKEW},
            id="terminating-pods-excluded",
        ),
    ],
)
def test_single_constraint(
    pod: Pod, nodes: list[Node], pods: list[Pod], want: dict[str, Status | None]
) -> None:
    assert feasible(pod, nodes, pods) == want


# upstream TestMultipleConstraints (selected)
@pytest.mark.parametrize(
    ("pod", "pods", "want"),
    [
        pytest.param(
            TWO_CONSTRAINTS,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 3}),
            {"node-x"},
            id="spreads-3-3-and-2-1-0-3",
        ),
        pytest.param(
            TWO_CONSTRAINTS,
            pods_on({"node-a": 2, "node-b": 1, "node-y": 4}),
            set(),
            id="spreads-3-4-and-2-1-0-4",
        ),
        pytest.param(
            make_pod("p")
            .labels(foo="", bar="")
            .spread_constraint(1, "zone", DNS, FOO)
            .spread_constraint(1, "node", DNS, BAR)
            .obj(),
            [
                *pods_on({"node-a": 1}),
                *pods_on({"node-b": 1}, {"bar": ""}),
                *pods_on({"node-y": 3}),
                *pods_on({"node-y": 1}, {"bar": ""}),
            ],
            {"node-a"},
            id="different-selectors",
        ),
    ],
)
def test_multiple_constraints(pod: Pod, pods: list[Pod], want: set[str]) -> None:
    assert ok_nodes(feasible(pod, FOUR, pods)) == want


def test_filter_without_pre_filter_is_an_error() -> None:
    columns = NodeColumns(FOUR)
    got = filter_statuses(PodTopologySpread(), CycleState(), TWO_CONSTRAINTS, columns)
    assert {s.code for s in got.values() if s is not None} == {Code.ERROR}


def test_no_constraints_skips() -> None:
    status, _ = pre_filter(PodTopologySpread(), make_pod("p").obj(), NodeColumns(FOUR))
    assert status.is_skip()


def test_match_label_keys_filter() -> None:
    """matchLabelKeys: only pods with the incoming pod's value of the key are counted."""
    pod = (
        make_pod("p")
        .labels(foo="", rev="v2")
        .spread_constraint(1, "node", DNS, FOO, match_label_keys=["rev"])
        .obj()
    )
    pods = [
        *pods_on({"node-a": 3}, {"foo": "", "rev": "v1"}),
        *pods_on({"node-b": 1}, {"foo": "", "rev": "v2"}),
    ]
    got = feasible(pod, FOUR, pods)
    assert ok_nodes(got) == {"node-a", "node-x", "node-y"}


# upstream TestPreFilterStateAddPod / RemovePod (facts re-derived on TWO_CONSTRAINTS_PODS)
@pytest.mark.parametrize(
    ("delta", "other", "row_node", "want_zone", "want_node", "want_paths"),
    [
        pytest.param(
            1,
            make_pod("n").label("foo", "").node("node-x").obj(),
            "node-x",
            {"zone1": 3, "zone2": 5},
            {"node-a": 2, "node-b": 1, "node-x": 1, "node-y": 4},
            [[3, 5], [1, 1]],
            id="add-to-node-x",
        ),
        pytest.param(
            -1,
            TWO_CONSTRAINTS_PODS[0],
            "node-a",
            {"zone1": 2, "zone2": 4},
            {"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 4},
            [[2, 4], [0, 1]],
            id="remove-from-node-a",
        ),
        pytest.param(
            1,
            make_pod("n").label("bar", "").node("node-x").obj(),
            "node-x",
            {"zone1": 3, "zone2": 4},
            {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4},
            [[3, 4], [0, 1]],
            id="non-matching-pod-ignored",
        ),
        pytest.param(
            1,
            make_pod("n").namespace("other").label("foo", "").node("node-x").obj(),
            "node-x",
            {"zone1": 3, "zone2": 4},
            {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4},
            [[3, 4], [0, 1]],
            id="other-namespace-ignored",
        ),
    ],
)
def test_add_remove_pod(
    delta: int,
    other: Pod,
    row_node: str,
    want_zone: dict[str, int],
    want_node: dict[str, int],
    want_paths: list[list[int]],
) -> None:
    columns = NodeColumns(FOUR, TWO_CONSTRAINTS_PODS)
    plugin = PodTopologySpread()
    status, state = pre_filter(plugin, TWO_CONSTRAINTS, columns)
    assert status.is_success()
    before = state.read(PRE_FILTER_KEY)
    clone = state.clone()
    row = columns.index[row_node]
    update = plugin.add_pod if delta > 0 else plugin.remove_pod
    assert update(state, TWO_CONSTRAINTS, other, columns, row).is_success()
    after = state.read(PRE_FILTER_KEY)
    assert after.tp_value_to_match_num(columns, 0) == want_zone
    assert after.tp_value_to_match_num(columns, 1) == want_node
    assert [[p.first.match_num, p.second.match_num] for p in after.critical_paths] == want_paths
    assert clone.read(PRE_FILTER_KEY) is before
    assert before.tp_value_to_match_num(columns, 1) == {
        "node-a": 2,
        "node-b": 1,
        "node-x": 0,
        "node-y": 4,
    }


def test_pre_filter_follows_bound_pods() -> None:
    columns = NodeColumns(FOUR)
    plugin = PodTopologySpread()
    pod = incoming((1, "node", DNS, FOO)).obj()

    def ok() -> set[str]:
        status, state = pre_filter(plugin, pod, columns)
        assert status.is_success()
        return ok_nodes(filter_statuses(plugin, state, pod, columns))

    assert ok() == {"node-a", "node-b", "node-x", "node-y"}
    for name in ("node-a", "node-b", "node-x"):
        columns.add_pod(make_pod(f"b-{name}").label("foo", "").node(name).obj())
    assert ok() == {"node-y"}
