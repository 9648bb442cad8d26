"""InterPodAffinity PreFilter/Filter: upstream filtering_test.go tables (facts only) and ours."""

from __future__ import annotations

import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code, Status
from scheduling.plugins import names
from scheduling.plugins.helper.testing import filter_statuses
from scheduling.plugins.interpodaffinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PRE_FILTER_KEY,
    InterPodAffinity,
)
from scheduling.plugins.interpodaffinity.filtering import DomainCounts
from scheduling.plugins.podindex import StaticClusterObjects
from shared.models import LabelSelector, Node, Pod, PodAffinityTerm
from tests.builders import PodBuilder, label_selector, make_namespace, make_node, make_pod

PLUGIN = names.INTER_POD_AFFINITY
AFFINITY = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=PLUGIN)
ANTI = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=PLUGIN)
EXISTING = Status.unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=PLUGIN)

NAMESPACES = StaticClusterObjects(
    namespace_list=[
        make_namespace("subteam1.team1", {"team": "team1"}),
        make_namespace("subteam2.team1", {"team": "team1"}),
        make_namespace("subteam1.team2", {"team": "team2"}),
        make_namespace("subteam2.team2", {"team": "team2"}),
    ]
)
TEAM1 = label_selector({}, ("team", "In", ["team1"]))


def node(name: str, **labels: str) -> Node:
    return make_node(name).labels(labels).obj()


def pod(name: str = "p", ns: str = "default", **labels: str) -> PodBuilder:
    return make_pod(name).namespace(ns).labels(labels)


def sel(*expressions: tuple[str, str, list[str]]) -> LabelSelector:
    return label_selector({}, *expressions)


def exists(key: str) -> LabelSelector:
    return sel((key, "Exists", []))


def in_(key: str, *values: str) -> LabelSelector:
    return sel((key, "In", list(values)))


def not_in(key: str, *values: str) -> LabelSelector:
    return sel((key, "NotIn", list(values)))


def run(
    incoming: Pod, nodes: list[Node], pods: list[Pod]
) -> tuple[Status, dict[str, Status | None]]:
    columns = NodeColumns(nodes, pods)
    plugin = InterPodAffinity(objects=NAMESPACES)
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, columns)
    if not status.is_success():
        return status, {}
    return status, filter_statuses(plugin, state, incoming, columns)


SECURITY_SCAN = {"service": "securityscan"}
NODE1 = node("node1", region="r1", zone="z11")
EXISTING_SCAN = pod("existing", **SECURITY_SCAN).node("node1").obj()


# upstream TestRequiredAffinitySingleNode: one node (region r1, zone z11).
@pytest.mark.parametrize(
    ("incoming", "pods", "want"),
    [
        pytest.param(pod().obj(), [], "skip", id="no-affinity-no-pods-skips"),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan", "value2"))
            .obj(),
            [EXISTING_SCAN],
            None,
            id="affinity-in-matches-existing",
        ),
        pytest.param(
            pod(security="S1").pod_affinity("region", not_in("service", "securityscan3")).obj(),
            [EXISTING_SCAN],
            None,
            id="affinity-notin-matches-existing",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity(
                "", in_("service", "securityscan", "value2"), namespaces=["DiffNameSpace"]
            )
            .obj(),
            [pod("e", ns="ns", **SECURITY_SCAN).node("node1").obj()],
            AFFINITY,
            id="affinity-other-namespace",
        ),
        pytest.param(
            pod(**SECURITY_SCAN).pod_affinity("", in_("service", "antivirusscan")).obj(),
            [EXISTING_SCAN],
            AFFINITY,
            id="affinity-selector-does-not-match",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity(
                "region", sel(("service", "Exists", []), ("wrongkey", "DoesNotExist", []))
            )
            .pod_affinity(
                "region", sel(("service", "In", ["securityscan"]), ("service", "NotIn", ["Wrong"]))
            )
            .obj(),
            [EXISTING_SCAN],
            None,
            id="several-terms-different-operators",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity(
                "region", sel(("service", "Exists", []), ("wrongkey", "DoesNotExist", []))
            )
            .pod_affinity(
                "region", sel(("service", "In", ["securityscan2"]), ("service", "NotIn", ["Wrong"]))
            )
            .obj(),
            [EXISTING_SCAN],
            AFFINITY,
            id="requirements-are-anded",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan", "value2"))
            .pod_affinity("node", in_("service", "antivirusscan", "value2"), anti=True)
            .obj(),
            [EXISTING_SCAN],
            None,
            id="affinity-and-anti-affinity-satisfied",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan", "value2"))
            .pod_affinity("node", in_("service", "antivirusscan", "value2"), anti=True)
            .obj(),
            [
                pod("e", **SECURITY_SCAN)
                .node("node1")
                .pod_affinity("node", in_("service", "antivirusscan", "value2"), anti=True)
                .obj()
            ],
            None,
            id="affinity-anti-affinity-and-symmetry-satisfied",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan", "value2"))
            .pod_affinity("zone", in_("service", "securityscan", "value2"), anti=True)
            .obj(),
            [EXISTING_SCAN],
            ANTI,
            id="anti-affinity-violated",
        ),
        pytest.param(
            pod(**SECURITY_SCAN)
            .pod_affinity("region", in_("service", "securityscan", "value2"))
            .pod_affinity("node", in_("service", "antivirusscan", "value2"), anti=True)
            .obj(),
            [
                pod("e", **SECURITY_SCAN)
                .node("node1")
                .pod_affinity("zone", in_("service", "securityscan", "value2"), anti=True)
                .obj()
            ],
            EXISTING,
            id="symmetry-violated",
        ),
        pytest.param(
            pod(**SECURITY_SCAN).pod_affinity("region", not_in("service", "securityscan")).obj(),
            [pod("e", **SECURITY_SCAN).node("node2").obj()],
            AFFINITY,
            id="pod-on-unknown-node-does-not-count-and-pod-does-not-match-itself",
        ),
        pytest.param(
            pod(**SECURITY_SCAN).obj(),
            [
                pod("e", **SECURITY_SCAN)
                .node("node1")
                .pod_affinity("zone", in_("service", "securityscan"), anti=True)
                .obj()
            ],
            EXISTING,
            id="symmetry-without-own-affinity",
        ),
        pytest.param(
            pod(**SECURITY_SCAN).obj(),
            [
                pod("e", **SECURITY_SCAN)
                .node("node1")
                .pod_affinity("zone", not_in("service", "securityscan"), anti=True)
                .obj()
            ],
            "skip",
            id="symmetry-not-matching-skips",
        ),
        pytest.param(
            pod(**SECURITY_SCAN)
            .pod_affinity_exists("service", "region", anti=True)
            .pod_affinity_exists("security", "region", anti=True)
            .obj(),
            [
                pod("e", security="S1")
                .node("node1")
                .pod_affinity_exists("security", "zone", anti=True)
                .obj()
            ],
            ANTI,
            id="own-anti-affinity-checked-before-symmetry",
        ),
        pytest.param(
            pod(**SECURITY_SCAN)
            .pod_affinity_exists("service", "zone", anti=True)
            .pod_affinity_exists("security", "zone", anti=True)
            .obj(),
            [
                pod("e", security="S1")
                .node("node1")
                .pod_affinity_exists("security", "zone", anti=True)
                .obj()
            ],
            ANTI,
            id="symmetry-a1-partial-match",
        ),
        pytest.param(
            pod(security="S1").pod_affinity_exists("security", "zone", anti=True).obj(),
            [
                pod("e", **SECURITY_SCAN)
                .node("node1")
                .pod_affinity_exists("service", "zone", anti=True)
                .pod_affinity_exists("security", "zone", anti=True)
                .obj()
            ],
            EXISTING,
            id="symmetry-a2-partial-match",
        ),
        pytest.param(
            pod(abc="", xyz="")
            .pod_affinity_exists("abc", "zone", anti=True)
            .pod_affinity_exists("def", "zone", anti=True)
            .obj(),
            [
                pod("e", **{"def": "", "xyz": ""})
                .node("node1")
                .pod_affinity_exists("abc", "zone", anti=True)
                .pod_affinity_exists("def", "zone", anti=True)
                .obj()
            ],
            ANTI,
            id="symmetry-b1-partial-match",
        ),
        pytest.param(
            pod(**{"def": "", "xyz": ""})
            .pod_affinity_exists("abc", "zone", anti=True)
            .pod_affinity_exists("def", "zone", anti=True)
            .obj(),
            [
                pod("e", abc="", xyz="")
                .node("node1")
                .pod_affinity_exists("abc", "zone", anti=True)
                .pod_affinity_exists("def", "zone", anti=True)
                .obj()
            ],
            ANTI,
            id="symmetry-b2-partial-match",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan"), namespace_selector=TEAM1)
            .obj(),
            [pod("e", ns="subteam1.team1", **SECURITY_SCAN).node("node1").obj()],
            None,
            id="affinity-namespace-selector",
        ),
        pytest.param(
            pod(security="S1")
            .pod_affinity("region", in_("service", "securityscan"), namespace_selector=TEAM1)
            .obj(),
            [pod("e", ns="subteam1.team2", **SECURITY_SCAN).node("node1").obj()],
            AFFINITY,
            id="affinity-non-matching-namespace-selector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", security="S1")
            .pod_affinity(
                "zone", in_("service", "securityscan"), anti=True, namespace_selector=TEAM1
            )
            .obj(),
            [pod("e", ns="subteam2.team1", **SECURITY_SCAN).node("node1").obj()],
            ANTI,
            id="anti-affinity-namespace-selector",
        ),
        pytest.param(
            pod(ns="subteam1.team1", security="S1")
            .pod_affinity(
                "zone",
                in_("service", "securityscan"),
                anti=True,
                namespace_selector=LabelSelector(),
            )
            .obj(),
            [pod("e", ns="subteam2.team1", **SECURITY_SCAN).node("node1").obj()],
            ANTI,
            id="anti-affinity-empty-namespace-selector-is-all-namespaces",
        ),
        pytest.param(
            pod(ns="subteam1.team1", security="S1")
            .pod_affinity(
                "zone", in_("service", "securityscan"), anti=True, namespace_selector=TEAM1
            )
            .obj(),
            [pod("e", ns="subteam1.team2", **SECURITY_SCAN).node("node1").obj()],
            None,
            id="anti-affinity-non-matching-namespace-selector",
        ),
    ],
)
def test_required_affinity_single_node(
    incoming: Pod, pods: list[Pod], want: Status | str | None
) -> None:
    status, got = run(incoming, [NODE1], pods)
    if want == "skip":
        assert status.is_skip()
        return
    assert status.is_success()
    assert got == {"node1": want}


def test_invalid_selector_fails_pre_filter() -> None:
    incoming = pod(**SECURITY_SCAN).pod_affinity("region", in_("service", "{{.bad-value.}}")).obj()
    status, _ = run(incoming, [NODE1], [])
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons[0].startswith("parsing pod: invalid label value '{{.bad-value.}}'")


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def hosts(*specs: tuple[str, dict[str, str]]) -> list[Node]:
    return [node(name, **labels) for name, labels in specs]


R1Z1 = hosts(
    ("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
    ("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
)
R1Z1Z2 = hosts(
    ("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
    ("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
)


# upstream TestRequiredAffinityMultipleNodes
@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want"),
    [
        pytest.param(
            pod().pod_affinity("region", in_("foo", "bar")).obj(),
            [pod("p1", foo="bar").node("node1").obj()],
            hosts(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)),
            [None, None, AFFINITY],
            id="same-region-as-matching-pod",
        ),
        pytest.param(
            pod(foo="bar", service="securityscan")
            .pod_affinity("zone", in_("foo", "bar"))
            .pod_affinity("zone", in_("service", "securityscan"))
            .obj(),
            [pod("p1", foo="bar").node("nodeA").obj()],
            hosts(
                ("nodeA", {"zone": "az1", "hostname": "h1"}),
                ("nodeB", {"zone": "az2", "hostname": "h2"}),
            ),
            [None, None],
            id="first-pod-of-a-group-matching-itself-goes-anywhere",
        ),
        pytest.param(
            pod(foo="bar", service="securityscan")
            .pod_affinity("zone", in_("foo", "bar"))
            .pod_affinity("zone", in_("service", "securityscan"))
            .obj(),
            [pod("p1", foo="bar").node("nodeA").obj()],
            hosts(
                ("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
                ("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
            ),
            [AFFINITY, AFFINITY],
            id="first-pod-needs-the-topology-keys",
        ),
        pytest.param(
            pod().pod_affinity("region", in_("foo", "abc"), anti=True).obj(),
            [pod("e", foo="abc").node("nodeA").obj()],
            hosts(
                ("nodeA", {"region": "r1", "hostname": "nodeA"}),
                ("nodeB", {"region": "r1", "hostname": "nodeB"}),
            ),
            [ANTI, ANTI],
            id="anti-affinity-whole-region",
        ),
        pytest.param(
            pod()
            .pod_affinity("region", in_("foo", "abc"), anti=True)
            .pod_affinity("zone", in_("service", "securityscan"), anti=True)
            .obj(),
            [pod("e", foo="abc", service="securityscan").node("nodeA").obj()],
            hosts(
                ("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
                ("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
            ),
            [ANTI, ANTI],
            id="anti-affinity-any-term",
        ),
        pytest.param(
            pod().pod_affinity("region", in_("foo", "abc"), anti=True).obj(),
            [pod("e", foo="abc").node("nodeA").obj()],
            hosts(("nodeA", CHINA), ("nodeB", CHINA_AZ1), ("nodeC", INDIA)),
            [ANTI, ANTI, None],
            id="anti-affinity-other-region-fits",
        ),
        pytest.param(
            pod(ns="NS1", foo="123").pod_affinity("region", in_("foo", "bar"), anti=True).obj(),
            [
                pod("e1", ns="NS1", foo="bar").node("nodeA").obj(),
                pod("e2", ns="NS2")
                .node("nodeC")
                .pod_affinity("region", in_("foo", "123"), anti=True)
                .obj(),
            ],
            hosts(("nodeA", CHINA), ("nodeB", CHINA_AZ1), ("nodeC", INDIA)),
            [ANTI, ANTI, None],
            id="existing-anti-affinity-in-other-namespace",
        ),
        pytest.param(
            pod(foo="").obj(),
            [
                pod("e")
                .node("nodeA")
                .pod_affinity_exists("foo", "invalid-node-label", anti=True)
                .obj()
            ],
            R1Z1,
            "skip",
            id="existing-term-with-missing-topology-key-skips",
        ),
        pytest.param(
            pod().node("nodeA").pod_affinity_exists("foo", "invalid-node-label", anti=True).obj(),
            [pod("e", foo="").node("nodeA").obj()],
            R1Z1,
            [None, None],
            id="own-anti-affinity-needs-the-topology-key",
        ),
        pytest.param(
            pod(foo="", bar="").obj(),
            [
                pod("e1").node("nodeA").pod_affinity_exists("foo", "zone", anti=True).obj(),
                pod("e2").node("nodeA").pod_affinity_exists("bar", "region", anti=True).obj(),
            ],
            R1Z1Z2,
            [EXISTING, EXISTING],
            id="violates-each-existing-pods-terms",
        ),
        pytest.param(
            pod()
            .pod_affinity_exists("foo", "zone", anti=True)
            .pod_affinity_exists("bar", "region", anti=True)
            .obj(),
            [pod("e1", foo="").node("nodeA").obj(), pod("e2", bar="").node("nodeB").obj()],
            R1Z1Z2,
            [ANTI, ANTI],
            id="violates-one-own-term",
        ),
        pytest.param(
            pod(foo="", bar="").obj(),
            [
                pod("e")
                .node("nodeA")
                .pod_affinity_exists("foo", "invalid-node-label", anti=True)
                .pod_affinity_exists("bar", "zone", anti=True)
                .obj()
            ],
            R1Z1Z2,
            [EXISTING, None],
            id="existing-terms-count-with-key-and-selector",
        ),
        pytest.param(
            pod()
            .pod_affinity_exists("foo", "invalid-node-label", anti=True)
            .pod_affinity_exists("bar", "zone", anti=True)
            .obj(),
            [pod("podA", foo="", bar="").node("nodeA").obj()],
            R1Z1Z2,
            [ANTI, None],
            id="own-terms-count-with-key-and-selector",
        ),
        pytest.param(
            pod(foo="", bar="").obj(),
            [
                pod("e")
                .node("nodeA")
                .pod_affinity_exists("foo", "region", anti=True)
                .pod_affinity_exists("bar", "zone", anti=True)
                .obj()
            ],
            R1Z1Z2,
            [EXISTING, EXISTING],
            id="existing-terms-all-valid-keys",
        ),
        pytest.param(
            pod()
            .pod_affinity_exists("foo", "region", anti=True)
            .pod_affinity_exists("bar", "zone", anti=True)
            .obj(),
            [pod("e", foo="", bar="").node("nodeA").obj()],
            R1Z1Z2,
            [ANTI, ANTI],
            id="own-terms-all-valid-keys",
        ),
        pytest.param(
            pod(foo="", bar="").obj(),
            [
                pod("e1")
                .node("nodeA")
                .pod_affinity_exists("foo", "zone", anti=True)
                .pod_affinity_exists("labelA", "zone", anti=True)
                .obj(),
                pod("e2")
                .node("nodeB")
                .pod_affinity_exists("bar", "zone", anti=True)
                .pod_affinity_exists("labelB", "zone", anti=True)
                .obj(),
            ],
            [*R1Z1Z2, node("nodeC", region="r1", zone="z3", hostname="nodeC")],
            [EXISTING, EXISTING, None],
            id="only-node-c-escapes-existing-terms",
        ),
        pytest.param(
            pod().pod_affinity_exists("foo", "region").pod_affinity_exists("bar", "zone").obj(),
            [pod("pod1", foo="", bar="").node("nodeA").obj()],
            R1Z1,
            [None, None],
            id="affinity-all-terms-one-pod",
        ),
        pytest.param(
            pod().pod_affinity_exists("foo", "region").pod_affinity_exists("bar", "zone").obj(),
            [pod("pod1", foo="").node("nodeA").obj(), pod("pod2", bar="").node("nodeB").obj()],
            R1Z1Z2,
            [AFFINITY, AFFINITY],
            id="affinity-terms-must-match-the-same-pod",
        ),
    ],
)
def test_required_affinity_multiple_nodes(
    incoming: Pod, pods: list[Pod], nodes: list[Node], want: list[Status | None] | str
) -> None:
    status, got = run(incoming, nodes, pods)
    if want == "skip":
        assert status.is_skip()
        return
    assert status.is_success()
    assert got == {n.metadata.name: w for n, w in zip(nodes, want, strict=True)}


def test_filter_without_pre_filter_is_an_error() -> None:
    plugin = InterPodAffinity()
    nodes = NodeColumns([NODE1])
    got = filter_statuses(plugin, CycleState(), pod().obj(), nodes)
    status = got["node1"]
    assert status is not None
    assert status.code == Code.ERROR
    assert "PreFilterInterPodAffinity" in status.message()


def pairs(nodes: NodeColumns, counts: DomainCounts) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for key, array in counts.items():
        values = nodes.label(key).values
        for code, count in enumerate(array.tolist()[:-1]):
            if count:
                out[(key, values[code])] = count
    return out


FOO_BAR_REGION = PodAffinityTerm(label_selector=in_("foo", "bar"), topology_key="region")
COMPLEX = [
    PodAffinityTerm(label_selector=in_("foo", "bar", "buzz"), topology_key="region"),
    PodAffinityTerm(
        label_selector=not_in("service", "bar", "security", "test"), topology_key="zone"
    ),
]


def with_terms(
    builder: PodBuilder,
    affinity: list[PodAffinityTerm] | None = None,
    anti: list[PodAffinityTerm] | None = None,
) -> Pod:
    p = builder.obj()
    for term in affinity or []:
        p = builder.pod_affinity(term.topology_key, term.label_selector).obj()
    for term in anti or []:
        p = builder.pod_affinity(term.topology_key, term.label_selector, anti=True).obj()
    return p


ADD_REMOVE_NODES = [
    node("nodeA", region="r1", zone="z11"),
    node("nodeB", region="r1", zone="z12"),
    node("nodeC", region="r2", zone="z21"),
]


# upstream TestPreFilterStateAddRemovePod
@pytest.mark.parametrize(
    ("pending", "existing", "added", "want_anti", "want_affinity"),
    [
        pytest.param(
            with_terms(pod("pending", foo="bar"), anti=[FOO_BAR_REGION]),
            [
                pod("p1", foo="bar").node("nodeA").obj(),
                with_terms(pod("p2").node("nodeC"), anti=[FOO_BAR_REGION]),
            ],
            with_terms(pod("added", foo="bar").node("nodeB"), anti=[FOO_BAR_REGION]),
            {("region", "r1"): 2},
            {},
            id="anti-affinity",
        ),
        pytest.param(
            with_terms(pod("pending", foo="bar"), anti=COMPLEX),
            [
                pod("p1", foo="bar").node("nodeA").obj(),
                with_terms(pod("p2").node("nodeC"), anti=[FOO_BAR_REGION]),
            ],
            with_terms(pod("added", foo="bar").node("nodeA"), anti=COMPLEX),
            {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
            {},
            id="complex-anti-affinity",
        ),
        pytest.param(
            with_terms(pod("pending", foo="bar"), affinity=COMPLEX),
            [
                pod("p1", foo="bar").node("nodeA").obj(),
                with_terms(pod("p2").node("nodeC"), affinity=COMPLEX, anti=[FOO_BAR_REGION]),
            ],
            with_terms(pod("added", foo="bar").node("nodeA"), anti=COMPLEX),
            {},
            {("region", "r1"): 2, ("zone", "z11"): 2},
            id="affinity-and-anti-affinity",
        ),
    ],
)
def test_add_remove_pod(
    pending: Pod,
    existing: list[Pod],
    added: Pod,
    want_anti: dict[tuple[str, str], int],
    want_affinity: dict[tuple[str, str], int],
) -> None:
    plugin = InterPodAffinity()
    all_nodes = NodeColumns(ADD_REMOVE_NODES, [*existing, added])
    all_state = CycleState()
    assert plugin.pre_filter(all_state, pending, all_nodes)[1].is_success()
    expected = all_state.read(PRE_FILTER_KEY)

    nodes = NodeColumns(ADD_REMOVE_NODES, existing)
    state = CycleState()
    assert plugin.pre_filter(state, pending, nodes)[1].is_success()
    original = state.read(PRE_FILTER_KEY)
    clone = state.clone()
    row = nodes.index[added.spec.node_name]
    assert plugin.add_pod(state, pending, added, nodes, row).is_success()
    after = state.read(PRE_FILTER_KEY)
    assert pairs(nodes, after.anti) == want_anti
    assert pairs(nodes, after.affinity) == want_affinity
    for field in ("anti", "affinity", "existing_anti"):
        assert pairs(nodes, getattr(after, field)) == pairs(all_nodes, getattr(expected, field))
    # The clone taken before AddPod (preemption's copy) is unchanged.
    assert clone.read(PRE_FILTER_KEY) is original
    assert plugin.remove_pod(state, pending, added, nodes, row).is_success()
    removed = state.read(PRE_FILTER_KEY)
    for field in ("anti", "affinity", "existing_anti"):
        assert pairs(nodes, getattr(removed, field)) == pairs(nodes, getattr(original, field))


def _labelled(name: str, *keys: str) -> Pod:
    return pod(name, **dict.fromkeys(keys, "")).node("nodeA").obj()


# upstream TestGetTPMapMatchingIncomingAffinityAntiAffinity
@pytest.mark.parametrize(
    ("existing", "incoming", "want_affinity", "want_anti"),
    [
        pytest.param([], pod("aaa-normal").obj(), {}, {}, id="nil"),
        pytest.param([_labelled("a", "aaa")], pod("aaa-normal").obj(), {}, {}, id="no-terms"),
        pytest.param(
            [_labelled("b", "bbb")],
            pod()
            .pod_affinity_exists("aaa", "hostname")
            .pod_affinity_exists("aaa", "hostname", anti=True)
            .obj(),
            {},
            {},
            id="no-existing-pod-matches",
        ),
        pytest.param(
            [_labelled("a", "aaa")],
            pod()
            .pod_affinity_exists("aaa", "hostname")
            .pod_affinity_exists("aaa", "hostname", anti=True)
            .obj(),
            {("hostname", "nodeA"): 1},
            {("hostname", "nodeA"): 1},
            id="single-term",
        ),
        pytest.param(
            [_labelled("ab", "aaa", "bbb")],
            pod()
            .pod_affinity_exists("aaa", "hostname")
            .pod_affinity_exists("bbb", "hostname")
            .pod_affinity_exists("aaa", "hostname", anti=True)
            .obj(),
            {("hostname", "nodeA"): 2},
            {("hostname", "nodeA"): 1},
            id="multiple-terms-count-once-per-term",
        ),
        pytest.param(
            [_labelled("a", "aaa")],
            pod()
            .pod_affinity_exists("aaa", "hostname")
            .pod_affinity_exists("bbb", "hostname")
            .pod_affinity_exists("aaa", "hostname", anti=True)
            .pod_affinity_exists("bbb", "hostname", anti=True)
            .obj(),
            {},
            {("hostname", "nodeA"): 1},
            id="affinity-needs-all-terms-anti-any",
        ),
        pytest.param(
            [_labelled("ab", "aaa", "bbb")],
            pod()
            .pod_affinity_exists("aaa", "hostname")
            .pod_affinity_exists("ccc", "hostname")
            .pod_affinity_exists("aaa", "hostname", anti=True)
            .pod_affinity_exists("ccc", "hostname", anti=True)
            .obj(),
            {},
            {("hostname", "nodeA"): 1},
            id="partial-anti-match-case-1",
        ),
    ],
)
def test_incoming_counts(
    existing: list[Pod],
    incoming: Pod,
    want_affinity: dict[tuple[str, str], int],
    want_anti: dict[tuple[str, str], int],
) -> None:
    nodes = NodeColumns([node("nodeA", hostname="nodeA")], existing)
    state = CycleState()
    _, status = InterPodAffinity().pre_filter(state, incoming, nodes)
    if not (want_affinity or want_anti) and status.is_skip():
        return
    pre = state.read(PRE_FILTER_KEY)
    assert pairs(nodes, pre.affinity) == want_affinity
    assert pairs(nodes, pre.anti) == want_anti


def _term_with_keys(
    selector: LabelSelector, match: list[str], mismatch: list[str], key: str = "zone"
) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=selector,
        topology_key=key,
        match_label_keys=match,
        mismatch_label_keys=mismatch,
    )


def _with_required(builder: PodBuilder, term: PodAffinityTerm, *, anti: bool) -> Pod:
    p = builder.pod_affinity(term.topology_key, term.label_selector, anti=anti).obj()
    assert p.spec.affinity is not None
    spec = p.spec.affinity.pod_anti_affinity if anti else p.spec.affinity.pod_affinity
    assert spec is not None
    spec.required_during_scheduling_ignored_during_execution[-1] = term
    return p


MLK_NODES = [node("n1", zone="z1"), node("n2", zone="z2"), node("n3", zone="z3")]


@pytest.mark.parametrize(
    ("incoming", "pods", "want_ok"),
    [
        pytest.param(
            # matchLabelKeys: only pods of the same revision count (app In [web], rev In [v2]).
            _with_required(
                pod(app="web", rev="v2"),
                _term_with_keys(in_("app", "web"), ["rev"], []),
                anti=False,
            ),
            [
                pod("old", app="web", rev="v1").node("n1").obj(),
                pod("new", app="web", rev="v2").node("n2").obj(),
            ],
            {"n2"},
            id="match-label-keys-affinity",
        ),
        pytest.param(
            # mismatchLabelKeys: keep away from other tenants (tenant NotIn [a]).
            _with_required(
                pod(app="web", tenant="a"),
                _term_with_keys(exists("app"), [], ["tenant"]),
                anti=True,
            ),
            [
                pod("mine", app="web", tenant="a").node("n1").obj(),
                pod("theirs", app="web", tenant="b").node("n2").obj(),
            ],
            {"n1", "n3"},
            id="mismatch-label-keys-anti-affinity",
        ),
        pytest.param(
            # A key the pod does not carry is ignored.
            _with_required(
                pod(app="web"), _term_with_keys(in_("app", "web"), ["rev"], []), anti=False
            ),
            [pod("old", app="web", rev="v1").node("n1").obj()],
            {"n1"},
            id="match-label-keys-missing-on-pod-ignored",
        ),
        pytest.param(
            # Existing pods' terms are merged with their own labels (symmetry).
            pod("in", app="web", rev="v1").obj(),
            [
                _with_required(
                    pod("e", app="web", rev="v2").node("n1"),
                    _term_with_keys(in_("app", "web"), [], ["rev"]),
                    anti=True,
                )
            ],
            {"n2", "n3"},
            id="existing-mismatch-label-keys-symmetry",
        ),
    ],
)
def test_match_label_keys(incoming: Pod, pods: list[Pod], want_ok: set[str]) -> None:
    status, got = run(incoming, MLK_NODES, pods)
    assert status.is_success()
    assert {n for n, s in got.items() if s is None} == want_ok


def test_index_follows_binds_and_node_changes() -> None:
    """Pods bound after the first cycle, removed pods and rebuilt rows are all seen."""
    plugin = InterPodAffinity()
    nodes = NodeColumns([node("n1", zone="a"), node("n2", zone="b")])
    incoming = pod(app="web").pod_affinity_exists("app", "zone", anti=True).obj()

    def ok() -> set[str]:
        state = CycleState()
        plugin.pre_filter(state, incoming, nodes)
        return {n for n, s in filter_statuses(plugin, state, incoming, nodes).items() if s is None}

    assert ok() == {"n1", "n2"}
    bound = pod("b1", app="web").node("n1").obj()
    nodes.add_pod(bound)
    assert ok() == {"n2"}
    nodes.add_node(node("n0", zone="a"))  # rows rebuilt
    assert ok() == {"n2"}
    nodes.remove_pod(bound)
    assert ok() == {"n0", "n1", "n2"}
