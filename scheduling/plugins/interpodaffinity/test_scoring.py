"""InterPodAffinity PreScore/Score/NormalizeScore: upstream scoring_test.go tables (facts only)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code
from scheduling.plugins.helper.testing import by_name
from scheduling.plugins.interpodaffinity import (
    InterPodAffinity,
    InterPodAffinityArgsError,
    new,
)
from scheduling.plugins.interpodaffinity.scoring import normalize
from scheduling.plugins.podindex import StaticClusterObjects
from shared.config.plugin_args import InterPodAffinityArgs
from shared.models import (
    Affinity,
    LabelSelector,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    WeightedPodAffinityTerm,
)
from tests.builders import label_selector, make_namespace, make_node, make_pod

NAMESPACES = StaticClusterObjects(
    namespace_list=[
        make_namespace("subteam1.team1", {"team": "team1"}),
        make_namespace("subteam2.team1", {"team": "team1"}),
        make_namespace("subteam1.team2", {"team": "team2"}),
        make_namespace("subteam2.team2", {"team": "team2"}),
    ]
)
TEAM1 = label_selector({}, ("team", "In", ["team1"]))

CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}


def sel(*expressions: tuple[str, str, list[str]]) -> LabelSelector:
    return label_selector({}, *expressions)


def weighted(
    weight: int, selector: LabelSelector, key: str, **kw: object
) -> WeightedPodAffinityTerm:
    term = PodAffinityTerm(label_selector=selector, topology_key=key)
    for name, value in kw.items():
        setattr(term, name, value)
    return WeightedPodAffinityTerm(weight=weight, pod_affinity_term=term)


def preferred(
    *terms: WeightedPodAffinityTerm, anti: tuple[WeightedPodAffinityTerm, ...] = ()
) -> Affinity:
    return Affinity(
        pod_affinity=PodAffinity(preferred_during_scheduling_ignored_during_execution=list(terms))
        if terms
        else None,
        pod_anti_affinity=PodAntiAffinity(
            preferred_during_scheduling_ignored_during_execution=list(anti)
        )
        if anti
        else None,
    )


STAY_WITH_S1_IN_REGION = preferred(weighted(5, sel(("security", "In", ["S1"])), "region"))
STAY_WITH_S2_IN_REGION = preferred(weighted(6, sel(("security", "In", ["S2"])), "region"))
AFFINITY3 = preferred(
    weighted(8, sel(("security", "NotIn", ["S1"]), ("security", "In", ["S2"])), "region"),
    weighted(2, sel(("security", "Exists", []), ("wrongkey", "DoesNotExist", [])), "region"),
)
HARD_AFFINITY = Affinity(
    pod_affinity=PodAffinity(
        required_during_scheduling_ignored_during_execution=[
            PodAffinityTerm(
                label_selector=sel(("security", "In", ["S1", "value2"])), topology_key="region"
            ),
            PodAffinityTerm(
                label_selector=sel(("security", "Exists", []), ("wrongkey", "DoesNotExist", [])),
                topology_key="region",
            ),
        ]
    )
)
AWAY_FROM_S1_IN_AZ = preferred(anti=(weighted(5, sel(("security", "In", ["S1"])), "az"),))
AWAY_FROM_S2_IN_AZ = preferred(anti=(weighted(5, sel(("security", "In", ["S2"])), "az"),))
STAY_S1_AWAY_S2 = preferred(
    weighted(8, sel(("security", "In", ["S1"])), "region"),
    anti=(weighted(5, sel(("security", "In", ["S2"])), "az"),),
)
AFFINITY_NS_SELECTOR = preferred(
    weighted(
        5,
        sel(("security", "In", ["S1"])),
        "region",
        namespaces=["subteam2.team2"],
        namespace_selector=TEAM1,
    )
)
ANTI_AFFINITY_NS_SELECTOR = preferred(
    anti=(
        weighted(
            5,
            sel(("security", "In", ["S1"])),
            "region",
            namespaces=["subteam2.team2"],
            namespace_selector=TEAM1,
        ),
    )
)


def p(
    labels: dict[str, str] | None = None,
    node_name: str = "",
    affinity: Affinity | None = None,
    ns: str = "default",
) -> Pod:
    built = make_pod("p").namespace(ns).labels(labels or {}).node(node_name).obj()
    built.spec.affinity = affinity
    return built


def nodes_of(*specs: tuple[str, dict[str, str]]) -> list[Node]:
    return [make_node(name).labels(labels).obj() for name, labels in specs]


def score_all(
    plugin: InterPodAffinity, incoming: Pod, nodes: list[Node], pods: list[Pod]
) -> tuple[Code, dict[str, int]]:
    columns = NodeColumns(nodes, pods)
    state = CycleState()
    status = plugin.pre_score(state, incoming, columns, ALL_ROWS)
    if not status.is_success():
        return status.code, {}
    raw = plugin.score(state, incoming, columns, ALL_ROWS)
    assert isinstance(raw, np.ndarray)
    normalized = plugin.normalize_score(state, incoming, raw)
    assert isinstance(normalized, np.ndarray)
    return Code.SUCCESS, by_name(columns, ALL_ROWS, normalized)


THREE = nodes_of(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))


# upstream TestPreferredAffinity (hardPodAffinityWeight 1)
@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want", "ignore_existing"),
    [
        pytest.param(p(S1), [], THREE, "skip", False, id="no-affinity-skips"),
        pytest.param(
            p(S1, affinity=STAY_WITH_S1_IN_REGION),
            [p(S1, "node1"), p(S2, "node2"), p(S1, "node3")],
            THREE,
            {"node1": 100, "node2": 0, "node3": 0},
            False,
            id="affinity-topology-and-pods-match",
        ),
        pytest.param(
            p(affinity=STAY_WITH_S1_IN_REGION),
            [p(S1, "node1")],
            nodes_of(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)),
            {"node1": 100, "node2": 100, "node3": 0},
            False,
            id="whole-region-scores",
        ),
        pytest.param(
            p(S1, affinity=STAY_WITH_S2_IN_REGION),
            [
                p(S2, "node1"),
                p(S2, "node1"),
                p(S2, "node2"),
                p(S2, "node3"),
                p(S2, "node4"),
                p(S2, "node5"),
            ],
            nodes_of(
                ("node1", CHINA),
                ("node2", INDIA),
                ("node3", CHINA),
                ("node4", CHINA),
                ("node5", INDIA),
            ),
            {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0},
            False,
            id="region-with-more-matches-wins",
        ),
        pytest.param(
            p(S1, affinity=AFFINITY3),
            [p(S1, "node1"), p(S2, "node2"), p(S1, "node3")],
            THREE,
            {"node1": 20, "node2": 100, "node3": 0},
            False,
            id="operators-and-partial-failures",
        ),
        pytest.param(
            p(S2),
            [p(S1, "node1", STAY_WITH_S1_IN_REGION), p(S2, "node2", STAY_WITH_S2_IN_REGION)],
            THREE,
            {"node1": 0, "node2": 100, "node3": 0},
            False,
            id="symmetry-preferred",
        ),
        pytest.param(
            p(S1, ns="subteam1.team1"),
            [p(S1, "node1", AFFINITY_NS_SELECTOR), p(S2, "node2", STAY_WITH_S2_IN_REGION)],
            THREE,
            {"node1": 100, "node2": 0, "node3": 0},
            False,
            id="symmetry-namespace-selector",
        ),
        pytest.param(
            p(S1, ns="subteam1.team1"),
            [p(S1, "node1", ANTI_AFFINITY_NS_SELECTOR), p(S2, "node2", STAY_WITH_S2_IN_REGION)],
            THREE,
            {"node1": 0, "node2": 100, "node3": 100},
            False,
            id="anti-symmetry-namespace-selector",
        ),
        pytest.param(
            p(S1),
            [p(S1, "node1", HARD_AFFINITY), p(S2, "node2", HARD_AFFINITY)],
            THREE,
            {"node1": 100, "node2": 100, "node3": 0},
            False,
            id="symmetry-required-affinity-hard-weight",
        ),
        pytest.param(
            p(S1, affinity=AWAY_FROM_S1_IN_AZ),
            [p(S1, "node1"), p(S2, "node2")],
            nodes_of(("node1", AZ1), ("node2", CHINA)),
            {"node1": 0, "node2": 100},
            False,
            id="anti-affinity-away-from-match",
        ),
        pytest.param(
            p(S1, affinity=AWAY_FROM_S1_IN_AZ),
            [p(S1, "node1"), p(S1, "node2")],
            nodes_of(("node1", AZ1), ("node2", CHINA)),
            {"node1": 0, "node2": 100},
            False,
            id="anti-affinity-node-without-key-wins",
        ),
        pytest.param(
            p(S1, affinity=AWAY_FROM_S1_IN_AZ),
            [p(S1, "node1"), p(S1, "node1"), p(S2, "node2")],
            nodes_of(("node1", AZ1), ("node2", INDIA)),
            {"node1": 0, "node2": 100},
            False,
            id="anti-affinity-more-matches-lower",
        ),
        pytest.param(
            p(S2),
            [p(S1, "node1", AWAY_FROM_S2_IN_AZ), p(S2, "node2", AWAY_FROM_S1_IN_AZ)],
            nodes_of(("node1", AZ1), ("node2", AZ2)),
            {"node1": 0, "node2": 100},
            False,
            id="anti-affinity-symmetry",
        ),
        pytest.param(
            p(S1, affinity=STAY_S1_AWAY_S2),
            [p(S1, "node1"), p(S1, "node2")],
            nodes_of(("node1", CHINA), ("node2", AZ1)),
            {"node1": 100, "node2": 0},
            False,
            id="affinity-and-anti-affinity",
        ),
        pytest.param(
            p(S1, affinity=STAY_S1_AWAY_S2),
            [
                p(S1, "node1"),
                p(S1, "node1"),
                p(S1, "node2"),
                p(S1, "node3"),
                p(S1, "node3"),
                p(S1, "node4"),
                p(S1, "node5"),
            ],
            nodes_of(
                ("node1", CHINA_AZ1),
                ("node2", INDIA),
                ("node3", CHINA),
                ("node4", CHINA),
                ("node5", INDIA),
            ),
            {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0},
            False,
            id="affinity-and-anti-affinity-same-labels",
        ),
        pytest.param(
            p(S1, affinity=STAY_S1_AWAY_S2),
            [
                p(S1, "node1"),
                p(S2, "node2"),
                p({}, "node3", STAY_S1_AWAY_S2),
                p({}, "node4", AWAY_FROM_S1_IN_AZ),
            ],
            nodes_of(("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2)),
            {"node1": 100, "node2": 0, "node3": 100, "node4": 0},
            False,
            id="affinity-anti-affinity-and-symmetry",
        ),
        pytest.param(
            p(S1),
            [p(S1, "node1"), p({}, "node2", STAY_S1_AWAY_S2)],
            nodes_of(("node1", CHINA), ("node2", CHINA)),
            {"node1": 0, "node2": 0},
            False,
            id="partial-nodes-with-affinity-pods",
        ),
        pytest.param(
            p(S1, ns="subteam1.team1", affinity=AFFINITY_NS_SELECTOR),
            [
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam1.team2"),
                p(S1, "node2", ns="subteam2.team1"),
            ],
            nodes_of(("node1", CHINA), ("node2", INDIA)),
            {"node1": 100, "node2": 0},
            False,
            id="affinity-namespace-selector",
        ),
        pytest.param(
            p(S1, ns="subteam1.team1", affinity=AFFINITY_NS_SELECTOR),
            [
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam2.team2"),
                p(S1, "node2", ns="subteam2.team1"),
            ],
            nodes_of(("node1", CHINA), ("node2", INDIA)),
            {"node1": 100, "node2": 0},
            False,
            id="affinity-namespace-selector-and-namespaces",
        ),
        pytest.param(
            p(S1, ns="subteam1.team1", affinity=ANTI_AFFINITY_NS_SELECTOR),
            [
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam1.team1"),
                p(S1, "node1", ns="subteam1.team2"),
                p(S1, "node2", ns="subteam2.team1"),
            ],
            nodes_of(("node1", CHINA), ("node2", INDIA)),
            {"node1": 0, "node2": 100},
            False,
            id="anti-affinity-namespace-selector",
        ),
        pytest.param(
            p(S2),
            [p(S1, "node1", STAY_S1_AWAY_S2), p(S2, "node2", STAY_WITH_S2_IN_REGION)],
            nodes_of(("node1", CHINA), ("node2", INDIA)),
            "skip",
            True,
            id="ignore-preferred-terms-of-existing-pods",
        ),
        pytest.param(
            p(S2),
            [p(S1, "node1", STAY_S1_AWAY_S2), p(S2, "node2", STAY_WITH_S2_IN_REGION)],
            nodes_of(("node1", CHINA), ("node2", INDIA)),
            {"node1": 0, "node2": 100},
            False,
            id="do-not-ignore-preferred-terms-of-existing-pods",
        ),
        pytest.param(p(S2), [], [], "skip", False, id="no-nodes"),
    ],
)
def test_preferred_affinity(
    incoming: Pod,
    pods: list[Pod],
    nodes: list[Node],
    want: dict[str, int] | str,
    ignore_existing: bool,
) -> None:
    args = InterPodAffinityArgs(
        hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=ignore_existing
    )
    code, got = score_all(InterPodAffinity(args, NAMESPACES), incoming, nodes, pods)
    if want == "skip":
        assert code == Code.SKIP
        return
    assert code == Code.SUCCESS
    assert got == want


def test_invalid_preferred_term_fails_pre_score() -> None:
    bad = preferred(weighted(8, sel(("security", "In", ["{{.bad-value.}}"])), "region"))
    plugin = InterPodAffinity(objects=NAMESPACES)
    columns = NodeColumns(nodes_of(("node1", CHINA)))
    status = plugin.pre_score(CycleState(), p(affinity=bad), columns, ALL_ROWS)
    assert status.code == Code.ERROR
    assert "{{.bad-value.}}" in status.message()


HARD_NS_AFFINITY = Affinity(
    pod_affinity=PodAffinity(
        required_during_scheduling_ignored_during_execution=[
            PodAffinityTerm(
                label_selector=sel(("service", "In", ["S1"])),
                namespaces=["default", "subteam2.team2"],
                namespace_selector=TEAM1,
                topology_key="region",
            )
        ]
    )
)


# upstream TestPreferredAffinityWithHardPodAffinitySymmetricWeight
@pytest.mark.parametrize(
    ("ns", "weight", "want"),
    [
        pytest.param("default", 1, {"node1": 100, "node2": 100, "node3": 0}, id="default-weight"),
        pytest.param("default", 0, "skip", id="zero-weight"),
        pytest.param("subteam1.team2", 1, "skip", id="no-matching-namespace"),
        pytest.param(
            "subteam1.team1", 1, {"node1": 100, "node2": 100, "node3": 0}, id="namespace-selector"
        ),
        pytest.param(
            "subteam2.team2", 1, {"node1": 100, "node2": 100, "node3": 0}, id="namespaces"
        ),
    ],
)
def test_hard_pod_affinity_weight(ns: str, weight: int, want: dict[str, int] | str) -> None:
    incoming = p({"service": "S1"}, ns=ns)
    pods = [p({}, "node1", HARD_NS_AFFINITY), p({}, "node2", HARD_NS_AFFINITY)]
    plugin = InterPodAffinity(InterPodAffinityArgs(hard_pod_affinity_weight=weight), NAMESPACES)
    code, got = score_all(plugin, incoming, THREE, pods)
    if want == "skip":
        assert code == Code.SKIP
        return
    assert got == want


def test_raw_scores_before_normalizing() -> None:
    """AFFINITY3: region India gets 8 + 2, China 2, a node without the key 0."""
    columns = NodeColumns(THREE, [p(S1, "node1"), p(S2, "node2"), p(S1, "node3")])
    plugin = InterPodAffinity()
    state = CycleState()
    assert plugin.pre_score(state, p(S1, affinity=AFFINITY3), columns, ALL_ROWS).is_success()
    raw = plugin.score(state, p(S1), columns, ALL_ROWS)
    assert isinstance(raw, np.ndarray)
    assert by_name(columns, ALL_ROWS, raw) == {"node1": 2, "node2": 10, "node3": 0}


@pytest.mark.parametrize(
    ("scores", "want"),
    [
        pytest.param([2, 10, 0], [20, 100, 0], id="min-zero"),
        pytest.param([-5, 0, 5], [0, 50, 100], id="negative-scores"),
        pytest.param([-3, 1, 3], [0, 66, 100], id="truncates-float"),
        pytest.param([7, 7], [0, 0], id="all-equal-is-zero"),
        pytest.param([], [], id="empty"),
    ],
)
def test_normalize(scores: list[int], want: list[int]) -> None:
    assert normalize(np.array(scores, dtype=np.int64)).tolist() == want


def test_new_validates_args() -> None:
    assert new(None, None).args.hard_pod_affinity_weight == 1  # type: ignore[arg-type]
    with pytest.raises(InterPodAffinityArgsError):
        new(InterPodAffinityArgs(hard_pod_affinity_weight=101), None)  # type: ignore[arg-type]
    with pytest.raises(InterPodAffinityArgsError):
        new(object(), None)  # type: ignore[arg-type]
