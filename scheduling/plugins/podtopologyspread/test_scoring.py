"""PodTopologySpread PreScore/Score/NormalizeScore: upstream scoring_test.go and worked
NormalizeScore cases."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code
from scheduling.plugins.helper.testing import by_name
from scheduling.plugins.podindex import (
    LabelQuery,
    StaticClusterObjects,
    parse_label_selector,
)
from scheduling.plugins.podtopologyspread import (
    PodTopologySpread,
    PodTopologySpreadArgsError,
    default_selector,
    new,
    score_for_count,
    topology_normalizing_weight,
)
from scheduling.plugins.podtopologyspread.common import Constraint
from scheduling.plugins.podtopologyspread.scoring import compute, normalize
from shared.config.plugin_args import LIST_DEFAULTING, PodTopologySpreadArgs
from shared.models import LabelSelector, Node, OwnerReference, Pod, TopologySpreadConstraint
from tests.builders import PodBuilder, label_selector, make_node, make_pod

HOST = "kubernetes.io/hostname"
SA = "ScheduleAnyway"
FOO = label_selector({}, ("foo", "Exists", []))
BAR = label_selector({}, ("bar", "Exists", []))


def node(name: str, labels: Mapping[str, str], taint: bool = False) -> Node:
    builder = make_node(name).labels(labels)
    if taint:
        builder.taint("node.kubernetes.io/unschedulable")
    return builder.obj()


def host(name: str, **extra: str) -> Node:
    return node(name, {HOST: name, **extra})


def pods_on(spec: Mapping[str, int], labels: Mapping[str, str] | None = None) -> list[Pod]:
    out = []
    for node_name, count in spec.items():
        for i in range(count):
            labels_ = labels if labels is not None else {"foo": ""}
            out.append(make_pod(f"p-{node_name}-{i}").labels(labels_).node(node_name).obj())
    return out


def soft(
    builder: PodBuilder, max_skew: int, key: str, selector: LabelSelector | None, **kw: object
) -> PodBuilder:
    return builder.spread_constraint(max_skew, key, SA, selector, **kw)  # type: ignore[arg-type]


def scores(
    pod: Pod,
    nodes: list[Node],
    pods: list[Pod],
    failed: list[Node] | None = None,
    plugin: PodTopologySpread | None = None,
) -> dict[str, int] | Code:
    columns = NodeColumns([*nodes, *(failed or [])], pods)
    rows = np.array([columns.index[n.metadata.name] for n in nodes], dtype=np.intp)
    plugin = plugin or PodTopologySpread()
    state = CycleState()
    status = plugin.pre_score(state, pod, columns, rows)
    if not status.is_success():
        return status.code
    raw = plugin.score(state, pod, columns, rows)
    assert isinstance(raw, np.ndarray)
    normalized = plugin.normalize_score(state, pod, raw)
    assert isinstance(normalized, np.ndarray)
    return by_name(columns, rows, normalized)


# ------------------------------------------------------------------ NormalizeScore
@pytest.mark.parametrize(
    ("raw", "ignored", "want"),
    [
        pytest.param([2, 4, 6], None, [100, 66, 33], id="2-4-6"),
        pytest.param([0, 0, 0], None, [100, 100, 100], id="all-zero"),
        pytest.param([0, 3], None, [100, 0], id="0-3"),
        pytest.param([2, 99, 6], [False, True, False], [100, 0, 33], id="ignored-node-left-out"),
        pytest.param([5, 5], [True, True], [0, 0], id="all-ignored"),
    ],
)
def test_normalize(raw: list[int], ignored: list[bool] | None, want: list[int]) -> None:
    mask = None if ignored is None else np.array(ignored, dtype=np.bool_)
    assert normalize(np.array(raw, dtype=np.int64), mask).tolist() == want


@pytest.mark.parametrize(
    ("count", "max_skew", "size", "want"),
    [
        pytest.param(0, 1, 4, 0.0, id="no-pods"),
        pytest.param(2, 1, 4, 2 * math.log(6), id="weighted-count"),
        pytest.param(2, 3, 4, 2 * math.log(6) + 2, id="max-skew-tolerance"),
    ],
)
def test_score_for_count(count: int, max_skew: int, size: int, want: float) -> None:
    assert topology_normalizing_weight(size) == math.log(size + 2)
    assert score_for_count(count, max_skew, topology_normalizing_weight(size)) == want


# ----------------------------------------------------- upstream TestPodTopologySpreadScore
ABCD = [host("node-a"), host("node-b"), host("node-c"), host("node-d")]
SPREAD_2103 = pods_on({"node-a": 2, "node-b": 1, "node-d": 3})
SPREAD_4321 = pods_on({"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1})
SPREAD_421_3 = pods_on({"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3})
ZONED = [
    host("node-a", zone="zone1"),
    host("node-b", zone="zone1"),
    host("node-x", zone="zone2"),
    host("node-y", zone="zone2"),
]
MIXED = [
    *pods_on({"node-a": 1}),
    *pods_on({"node-b": 1}, {"foo": "", "bar": ""}),
    *pods_on({"node-y": 1}),
    *pods_on({"node-y": 1}, {"bar": ""}),
]
FOO_POD = make_pod("p").label("foo", "")
FOO_BAR_POD = make_pod("p").labels(foo="", bar="")


@pytest.mark.parametrize(
    ("pod", "nodes", "failed", "pods", "want"),
    [
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD[:2],
            [],
            [],
            {"node-a": 100, "node-b": 100},
            id="no-existing-pods",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD[:1],
            ABCD[1:2],
            pods_on({"node-a": 2, "node-b": 1}),
            {"node-a": 100},
            id="only-one-candidate",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD[:2],
            [],
            pods_on({"node-a": 1, "node-b": 1}),
            {"node-a": 100, "node-b": 100},
            id="same-counts",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD,
            [],
            SPREAD_2103,
            {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
            id="spread-2-1-0-3",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, None).obj(),
            ABCD,
            [],
            SPREAD_2103,
            {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
            id="null-selector",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 2, HOST, FOO).obj(),
            ABCD,
            [],
            SPREAD_2103,
            {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
            id="spread-2-1-0-3-max-skew-2",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 3, HOST, FOO).obj(),
            ABCD,
            [],
            SPREAD_4321,
            {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
            id="spread-4-3-2-1-max-skew-3",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            [host("node-a"), host("node-b"), host("node-x")],
            [host("node-y")],
            SPREAD_421_3,
            {"node-a": 33, "node-b": 83, "node-x": 100},
            id="three-of-four-candidates",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            [host("node-a"), node("node-b", {"n": "node-b"}), host("node-x")],
            [host("node-y")],
            SPREAD_421_3,
            {"node-a": 16, "node-b": 0, "node-x": 100},
            id="candidate-without-topology-key-is-ignored",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, "zone", FOO).obj(),
            ZONED[:3],
            ZONED[3:],
            SPREAD_421_3,
            {"node-a": 75, "node-b": 75, "node-x": 100},
            id="zone-three-of-four-candidates",
        ),
        pytest.param(
            soft(soft(make_pod("p").label("foo", ""), 1, "zone", FOO), 1, HOST, FOO).obj(),
            [ZONED[0], ZONED[2]],
            [ZONED[1], ZONED[3]],
            pods_on({"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4}),
            {"node-a": 100, "node-x": 63},
            id="zone-and-node-two-candidates",
        ),
        pytest.param(
            soft(soft(make_pod("p").labels(foo="", bar=""), 1, "zone", FOO), 1, HOST, BAR).obj(),
            ZONED,
            [],
            MIXED,
            {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
            id="different-selectors",
        ),
        pytest.param(
            soft(soft(make_pod("p").labels(foo="", bar=""), 1, "zone", FOO), 1, HOST, BAR).obj(),
            ZONED,
            [],
            [
                *pods_on({"node-b": 1}, {"bar": ""}),
                *pods_on({"node-x": 1}),
                *pods_on({"node-y": 1}, {"foo": "", "bar": ""}),
            ],
            {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
            id="different-selectors-some-nodes-empty",
        ),
        pytest.param(
            soft(soft(make_pod("p").labels(foo="", bar=""), 1, "zone", FOO), 1, HOST, BAR).obj(),
            ZONED[:3],
            ZONED[3:],
            MIXED,
            {"node-a": 50, "node-b": 25, "node-x": 100},
            id="different-selectors-three-candidates",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD[:2],
            [],
            [
                make_pod("ns").namespace("ns1").label("foo", "").node("node-a").obj(),
                *pods_on({"node-a": 1, "node-b": 2}),
            ],
            {"node-a": 100, "node-b": 33},
            id="other-namespaces-do-not-count",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj(),
            ABCD[:2],
            [],
            [
                make_pod("t").label("foo", "").node("node-a").terminating().obj(),
                *pods_on({"node-b": 1}),
            ],
            {"node-a": 100, "node-b": 0},
            id="terminating-pods-excluded",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 2, "node", FOO, min_domains=10).obj(),
            [node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
            [],
            pods_on({"node-a": 2, "node-b": 2, "node-c": 1}),
            {"node-a": 75, "node-b": 75, "node-c": 100},
            id="min-domains-no-effect-when-schedule-anyway",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", "").node_selector(foo=""), 1, "node", FOO).obj(),
            [
                node("node-a", {"node": "node-a", "foo": ""}),
                node("node-b", {"node": "node-b", "foo": ""}),
                node("node-c", {"node": "node-c"}),
            ],
            [],
            pods_on({"node-a": 2, "node-b": 1, "node-c": 1}),
            {"node-a": 0, "node-b": 33, "node-c": 100},
            id="affinity-policy-honored-node-selector",
        ),
        pytest.param(
            soft(
                make_pod("p").label("foo", "").node_selector(foo=""),
                1,
                "node",
                FOO,
                node_affinity_policy="Ignore",
            ).obj(),
            [
                node("node-a", {"node": "node-a", "foo": ""}),
                node("node-b", {"node": "node-b", "foo": ""}),
                node("node-c", {"node": "node-c"}),
            ],
            [],
            pods_on({"node-a": 2, "node-b": 1, "node-c": 1}),
            {"node-a": 66, "node-b": 100, "node-c": 100},
            id="affinity-policy-ignored-node-selector",
        ),
        pytest.param(
            soft(
                make_pod("p").label("foo", "").node_affinity_in("foo", [""]), 1, "node", FOO
            ).obj(),
            [
                node("node-a", {"node": "node-a", "foo": ""}),
                node("node-b", {"node": "node-b", "foo": ""}),
                node("node-c", {"node": "node-c"}),
            ],
            [],
            pods_on({"node-a": 2, "node-b": 1, "node-c": 1}),
            {"node-a": 0, "node-b": 33, "node-c": 100},
            id="affinity-policy-honored-node-affinity",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, "node", FOO, node_taints_policy="Honor").obj(),
            [
                node("node-a", {"node": "node-a"}),
                node("node-b", {"node": "node-b"}),
                node("node-c", {"node": "node-c"}, taint=True),
            ],
            [],
            pods_on({"node-a": 2, "node-b": 1, "node-c": 1}),
            {"node-a": 0, "node-b": 33, "node-c": 100},
            id="taints-policy-honored",
        ),
        pytest.param(
            soft(make_pod("p").label("foo", ""), 1, "node", FOO).obj(),
            [
                node("node-a", {"node": "node-a"}),
                node("node-b", {"node": "node-b"}),
                node("node-c", {"node": "node-c"}, taint=True),
            ],
            [],
            pods_on({"node-a": 2, "node-b": 1, "node-c": 1}),
            {"node-a": 66, "node-b": 100, "node-c": 100},
            id="taints-policy-ignored",
        ),
        pytest.param(
            soft(
                soft(
                    make_pod("p").labels(foo="", bar=""),
                    1,
                    "zone",
                    LabelSelector(),
                    match_label_keys=["foo"],
                ),
                1,
                HOST,
                LabelSelector(),
                match_label_keys=["bar"],
            ).obj(),
            [
                host("node-a", zone="zone1"),
                host("node-b", zone="zone1"),
                host("node-c", zone="zone2"),
                host("node-d", zone="zone2"),
            ],
            [],
            [
                *pods_on({"node-a": 1}),
                *pods_on({"node-b": 1}, {"foo": "", "bar": ""}),
                *pods_on({"node-c": 1}),
                *pods_on({"node-c": 1}, {"bar": ""}),
            ],
            {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
            id="match-label-keys-with-empty-selector",
        ),
    ],
)
def test_score(
    pod: Pod, nodes: list[Node], failed: list[Node], pods: list[Pod], want: dict[str, int]
) -> None:
    assert scores(pod, nodes, pods, failed) == want


def test_system_defaults_nodes_without_zone() -> None:
    """System defaulting: hostname spreading still applies to nodes without a zone label."""
    objects = StaticClusterObjects(services={"default": [{"foo": ""}]})
    plugin = PodTopologySpread(objects=objects)
    got = scores(make_pod("p").label("foo", "").obj(), ABCD, SPREAD_4321, plugin=plugin)
    assert got == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_system_defaults_need_an_owner_or_service() -> None:
    plugin = PodTopologySpread(objects=StaticClusterObjects())
    assert (
        scores(make_pod("p").label("foo", "").obj(), ABCD, SPREAD_4321, plugin=plugin) == Code.SKIP
    )


def test_system_defaults_replica_set_owner() -> None:
    objects = StaticClusterObjects(replica_sets={"default/rs": label_selector({"foo": ""})})
    plugin = PodTopologySpread(objects=objects)
    pod = make_pod("p").label("foo", "").owner("ReplicaSet", "rs").obj()
    pod.metadata.owner_references[0].api_version = "apps/v1"
    assert scores(pod, ABCD, SPREAD_4321, plugin=plugin) == {
        "node-a": 44,
        "node-b": 66,
        "node-c": 77,
        "node-d": 100,
    }


def test_list_defaults_disabled_with_empty_list() -> None:
    args = PodTopologySpreadArgs(default_constraints=[], defaulting_type=LIST_DEFAULTING)
    plugin = PodTopologySpread(args, StaticClusterObjects(services={"default": [{"foo": ""}]}))
    assert (
        scores(make_pod("p").label("foo", "").obj(), ABCD, SPREAD_4321, plugin=plugin) == Code.SKIP
    )


def test_list_defaults_require_all_topologies() -> None:
    """Non-system defaults require every key: a node without the zone label is ignored."""
    args = PodTopologySpreadArgs(
        default_constraints=[
            TopologySpreadConstraint(max_skew=1, topology_key=HOST, when_unsatisfiable=SA),
            TopologySpreadConstraint(max_skew=1, topology_key="zone", when_unsatisfiable=SA),
        ],
        defaulting_type=LIST_DEFAULTING,
    )
    plugin = PodTopologySpread(args, StaticClusterObjects(services={"default": [{"foo": ""}]}))
    nodes = [host("node-a", zone="z1"), host("node-b", zone="z2"), host("node-c")]
    got = scores(make_pod("p").label("foo", "").obj(), nodes, pods_on({"node-a": 1}), plugin=plugin)
    assert isinstance(got, dict)
    assert got["node-c"] == 0
    assert got["node-b"] == 100


def _owner(pod: Pod, kind: str, name: str, api_version: str, controller: bool = True) -> Pod:
    pod.metadata.owner_references.append(
        OwnerReference(api_version=api_version, kind=kind, name=name, controller=controller)
    )
    return pod


SELECTOR_OBJECTS = StaticClusterObjects(
    services={"default": [{"app": "web"}, {"tier": "front"}, None, {"app": "db"}]},
    replication_controllers={"default/rc": {"rc": "x"}},
    replica_sets={"default/rs": label_selector({"rs": "y"}, ("track", "In", ["stable"]))},
    stateful_sets={"default/ss": label_selector({"ss": "z"})},
)
WEB = {"app": "web", "tier": "front", "rc": "x", "rs": "y", "ss": "z", "track": "stable"}


@pytest.mark.parametrize(
    ("owner", "want"),
    [
        pytest.param(None, {"app": "web", "tier": "front"}, id="services-merged"),
        pytest.param(
            ("ReplicationController", "rc", "v1"),
            {"app": "web", "tier": "front", "rc": "x"},
            id="rc",
        ),
        pytest.param(
            ("ReplicaSet", "rs", "apps/v1"),
            {"app": "web", "tier": "front", "rs": "y", "track": "stable"},
            id="replica-set",
        ),
        pytest.param(
            ("StatefulSet", "ss", "apps/v1"),
            {"app": "web", "tier": "front", "ss": "z"},
            id="stateful-set",
        ),
        pytest.param(
            ("ReplicaSet", "rs", "extensions/v1beta1"),
            {"app": "web", "tier": "front"},
            id="wrong-api-version",
        ),
        pytest.param(
            ("ReplicaSet", "missing", "apps/v1"),
            {"app": "web", "tier": "front"},
            id="owner-not-found",
        ),
        pytest.param(
            ("Job", "j", "batch/v1"), {"app": "web", "tier": "front"}, id="unsupported-owner"
        ),
    ],
)
def test_default_selector(owner: tuple[str, str, str] | None, want: dict[str, str]) -> None:
    pod = make_pod("p").labels(WEB).obj()
    if owner is not None:
        _owner(pod, *owner)
    selector = default_selector(pod, SELECTOR_OBJECTS)
    keys = {r.key: r.values[0] for r in selector.requirements}
    assert keys == want
    assert selector.matches(WEB)


def test_default_selector_non_controller_owner_ignored() -> None:
    pod = _owner(make_pod("p").labels(WEB).obj(), "ReplicaSet", "rs", "apps/v1", controller=False)
    keys = {r.key for r in default_selector(pod, SELECTOR_OBJECTS).requirements}
    assert keys == {"app", "tier"}


def test_score_without_pre_score_is_an_error() -> None:
    columns = NodeColumns(ABCD)
    got = PodTopologySpread().score(CycleState(), make_pod("p").obj(), columns, np.arange(4))
    assert not isinstance(got, np.ndarray)
    assert got.code == Code.ERROR


def test_no_nodes_skips() -> None:
    pod = soft(make_pod("p").label("foo", ""), 1, HOST, FOO).obj()
    status = PodTopologySpread().pre_score(CycleState(), pod, NodeColumns([]), np.arange(0))
    assert status.is_skip()


def test_new_validates_args() -> None:
    assert new(None, None).system_defaulted  # type: ignore[arg-type]
    bad = PodTopologySpreadArgs(
        default_constraints=[
            TopologySpreadConstraint(max_skew=1, topology_key="zone", when_unsatisfiable=SA)
        ]
    )
    with pytest.raises(PodTopologySpreadArgsError):
        new(bad, None)  # type: ignore[arg-type]
    with pytest.raises(PodTopologySpreadArgsError):
        new(object(), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("require_all", "want_ignored", "want_weights"),
    [
        # upstream TestPreScoreStateEmptyNodes: zone size 2 (zone1, zone2), hostname size 3.
        pytest.param(True, {"node-d"}, [math.log(2 + 2), math.log(3 + 2)], id="explicit"),
        # System defaults: node-d (no zone) is scored and adds the "" zone domain.
        pytest.param(False, set(), [math.log(3 + 2), math.log(4 + 2)], id="system-defaults"),
    ],
)
def test_pre_score_weights_and_ignored_nodes(
    require_all: bool, want_ignored: set[str], want_weights: list[float]
) -> None:
    nodes = [
        host("node-a", zone="zone1"),
        host("node-b", zone="zone1"),
        host("node-x", zone="zone2"),
        host("node-d"),
    ]
    columns = NodeColumns(nodes, pods_on({"node-a": 1}))
    query = parse(FOO)
    constraints = [Constraint(1, "zone", query), Constraint(1, HOST, query)]
    state = compute(
        make_pod("p").label("foo", "").obj(), columns, slice(None), constraints, require_all
    )
    assert {columns.names[r] for r in np.flatnonzero(state.ignored)} == want_ignored
    assert list(state.weights) == pytest.approx(want_weights)


def parse(selector: LabelSelector) -> LabelQuery:
    query = parse_label_selector(selector)
    assert query is not None
    return query
