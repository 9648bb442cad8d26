"""schedule_pod: percentageOfNodesToScore and the round-robin walk, selectHost, and the FitError
message (upstream TestFitError_Error)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.cache.local import LocalCluster
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import (
    NO_NODES_AVAILABLE_MSG,
    FitError,
    NoNodesAvailableError,
    fit_error_message,
)
from scheduling.framework.interfaces import Diagnosis
from scheduling.framework.schedule import (
    num_feasible_nodes_to_find,
    percentage_of_nodes_to_score,
    schedule_pod,
    select_host,
)
from scheduling.framework.status import Code, Status
from scheduling.plugins import names
from scheduling.plugins.registry import in_tree_registry
from shared.config import PluginRef, Plugins, PluginSet, Profile
from shared.models import Node, Pod
from tests.builders import make_node, make_pod
from tests.framework import fakes


def pod(name: str = "p") -> Pod:
    return make_pod(name).uid(name).obj()


# ------------------------------------------------------------------ percentage
@pytest.mark.parametrize(
    ("configured", "nodes", "expected"),
    [
        pytest.param(None, 100, 50, id="default-at-100-nodes-is-50%"),
        pytest.param(None, 5000, 10, id="default-at-5000-nodes-is-10%"),
        pytest.param(None, 10000, 5, id="floor-is-5%"),
        pytest.param(0, 1000, 42, id="zero-means-default"),
        pytest.param(3, 10000, 3, id="below-5-only-explicitly"),
        pytest.param(70, 5000, 70, id="configured"),
    ],
)
def test_percentage_of_nodes_to_score(configured, nodes, expected):
    assert percentage_of_nodes_to_score(configured, nodes) == expected


@pytest.mark.parametrize(
    ("configured", "nodes", "expected"),
    [
        pytest.param(None, 50, 50, id="below-100-nodes-all"),
        pytest.param(10, 99, 99, id="below-100-nodes-all-whatever-the-percentage"),
        pytest.param(None, 100, 100, id="50%-of-100-floored-at-100"),
        pytest.param(None, 5000, 500, id="10%-of-5000"),
        pytest.param(None, 1000, 420, id="adaptive-42%"),
        pytest.param(None, 20000, 1000, id="adaptive-floor-5%"),
        pytest.param(1, 20000, 200, id="explicit-1%"),
        pytest.param(10, 500, 100, id="at-least-100"),
        pytest.param(100, 5000, 5000, id="all"),
        pytest.param(150, 5000, 7500, id="above-100-searches-everything"),
    ],
)
def test_num_feasible_nodes_to_find(configured, nodes, expected):
    assert num_feasible_nodes_to_find(configured, nodes) == expected


def zone_nodes(zones: dict[str, list[str]]) -> list[Node]:
    """Nodes given zone by zone, in the order the cluster learned of them: N1..N4 first."""
    order = sorted(((name, zone) for zone, ns in zones.items() for name in ns), key=lambda x: x[0])
    return [
        make_node(name)
        .capacity(cpu="4", memory="8Gi", pods=110)
        .label("topology.kubernetes.io/zone", zone)
        .obj()
        for name, zone in order
    ]


def test_zones_are_interleaved_and_each_pod_resumes_where_the_last_stopped():
    cluster = LocalCluster(zone_nodes({"zone1": ["N1", "N2", "N3", "N4"], "zone2": ["N5", "N6"]}))
    assert cluster.nodes.names == ["N1", "N5", "N2", "N6", "N3", "N4"]
    # No score plugin: upstream stops at the first feasible node, so each pod takes the next
    # node of the walk.
    fw = fakes.framework({"filter": [fakes.Filter("F")]}, cluster)
    hosts = [
        schedule_pod(fw, CycleState(), pod(f"p{i}"), cluster.nodes).suggested_host for i in range(7)
    ]
    assert hosts == ["N1", "N5", "N2", "N6", "N3", "N4", "N1"]


def test_the_walk_skips_rejected_nodes_and_counts_them_as_processed():
    cluster = LocalCluster(zone_nodes({"zone1": ["N1", "N2", "N3", "N4"], "zone2": ["N5", "N6"]}))
    fw = fakes.framework({"filter": [fakes.Filter("F", reject={"N5", "N2"})]}, cluster)
    first = schedule_pod(fw, CycleState(), pod("a"), cluster.nodes)
    assert (first.suggested_host, first.evaluated_nodes) == ("N1", 1)
    second = schedule_pod(fw, CycleState(), pod("b"), cluster.nodes)
    # N5 and N2 were visited and rejected on the way to N6.
    assert (second.suggested_host, second.evaluated_nodes, second.feasible_nodes) == ("N6", 3, 1)
    assert set(second.filtered(cluster.nodes)) == {"N5", "N2"}
    assert fw.context.next_start_node_index == 4


def many_nodes(count: int) -> LocalCluster:
    return LocalCluster(
        [
            make_node(f"n{i:04d}").capacity(cpu="4", memory="8Gi", pods=110).obj()
            for i in range(count)
        ]
    )


def test_percentage_search_resumes_round_robin():
    cluster = many_nodes(250)
    score = fakes.Score("S")
    fw = fakes.framework({"score": [score]}, cluster, percentage=50)  # K = 125
    for _ in range(3):
        schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    names = cluster.nodes.names
    assert score.seen[0] == names[:125]
    assert score.seen[1] == names[125:]
    assert score.seen[2] == names[:125]
    assert fw.context.next_start_node_index == 125


def test_percentage_search_wraps_around():
    cluster = many_nodes(300)
    score = fakes.Score("S")
    fw = fakes.framework({"score": [score]}, cluster, percentage=40)  # K = 120
    fw.context.next_start_node_index = 250
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    names = cluster.nodes.names
    assert score.seen[0] == names[:70] + names[250:]
    assert (result.evaluated_nodes, result.feasible_nodes) == (120, 120)
    assert fw.context.next_start_node_index == 70


def test_percentage_search_stops_at_the_kth_feasible_node():
    cluster = many_nodes(300)
    every_third = {name for i, name in enumerate(cluster.nodes.names) if i % 3 == 0}
    score = fakes.Score("S")
    fw = fakes.framework(
        {"filter": [fakes.Filter("F", reject=every_third)], "score": [score]},
        cluster,
        percentage=40,
    )
    result = schedule_pod(fw, CycleState(), pod(), cluster.nodes)
    # 120 feasible nodes found among the first 180 rows: rows 1,2,4,5,...,178,179.
    assert (result.feasible_nodes, result.evaluated_nodes) == (120, 180)
    assert len(result.filtered(cluster.nodes)) == 60
    assert score.seen[0][-1] == cluster.nodes.names[179]
    assert fw.context.next_start_node_index == 180


def test_pre_filter_result_narrows_the_walk():
    cluster = fakes.cluster_of(["n1", "n2", "n3", "n4"])
    narrow = fakes.PreFilter("Narrow", nodes={"n2", "n4"})
    fw = fakes.framework({"pre_filter": [narrow], "filter": [fakes.Filter("F")]}, cluster)
    hosts = [
        schedule_pod(fw, CycleState(), pod(f"p{i}"), cluster.nodes).suggested_host for i in range(3)
    ]
    assert hosts == ["n2", "n4", "n2"]


def test_no_nodes():
    fw = fakes.framework({})
    with pytest.raises(NoNodesAvailableError, match=f"^{NO_NODES_AVAILABLE_MSG}$") as info:
        schedule_pod(fw, CycleState(), pod(), LocalCluster().nodes)
    assert info.value.status().code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_nominated_node_is_tried_first():
    cluster = fakes.cluster_of(["n1", "n2", "n3"])
    score = fakes.Score("S", scores={"n1": 100})
    fw = fakes.framework({"filter": [fakes.Filter("F")], "score": [score]}, cluster)
    nominated = make_pod("p").uid("p").nominated_node_name("n3").obj()
    result = schedule_pod(fw, CycleState(), nominated, cluster.nodes)
    assert (result.suggested_host, result.feasible_nodes) == ("n3", 1)
    assert score.seen == []


def test_nominated_pods_hold_their_room_against_lower_priority_pods():
    """Upstream RunFilterPluginsWithNominatedPods: a pod nominated to n1 counts there for
    pods of lower or equal priority, not for higher ones."""
    cluster = LocalCluster([make_node("n1").capacity(cpu="1", memory="1Gi", pods=10).obj()])
    profile = Profile(
        plugins=Plugins(
            queue_sort=PluginSet(enabled=[PluginRef(names.PRIORITY_SORT)]),
            pre_filter=PluginSet(enabled=[PluginRef(names.NODE_RESOURCES_FIT)]),
            filter=PluginSet(enabled=[PluginRef(names.NODE_RESOURCES_FIT)]),
            bind=PluginSet(enabled=[PluginRef(names.DEFAULT_BINDER)]),
        )
    )
    from scheduling.framework.runtime import Framework

    fw = Framework(profile, in_tree_registry(), cluster)
    holder = make_pod("holder").uid("holder").priority(10).req(cpu="1").nominated_node_name("n1")
    cluster.nominate(holder.obj(), "n1")
    low = make_pod("low").uid("low").priority(5).req(cpu="1").obj()
    with pytest.raises(FitError, match="1 Insufficient cpu"):
        schedule_pod(fw, CycleState(), low, cluster.nodes)
    high = make_pod("high").uid("high").priority(20).req(cpu="1").obj()
    assert schedule_pod(fw, CycleState(), high, cluster.nodes).suggested_host == "n1"


# ---------------------------------------------------------------- selectHost
def test_select_host_takes_the_highest_without_drawing():
    rng = np.random.default_rng(7)
    before = rng.bit_generator.state
    assert select_host(np.array([3, 9, 4], dtype=np.int64), rng) == 1
    assert rng.bit_generator.state == before


def test_three_way_tie_is_uniform():
    rng = np.random.default_rng(2024)
    totals = np.array([5, 10, 10, 1, 10], dtype=np.int64)
    draws = 30000
    counts = np.bincount([select_host(totals, rng) for _ in range(draws)], minlength=5)
    assert counts[0] == counts[3] == 0
    # Each tied node ~1/3: within 5 standard deviations of a binomial(30000, 1/3).
    sigma = (draws * (1 / 3) * (2 / 3)) ** 0.5
    for i in (1, 2, 4):
        assert abs(counts[i] - draws / 3) < 5 * sigma


def test_tie_break_through_the_framework_is_seeded():
    def hosts(seed: int) -> list[str]:
        cluster = fakes.cluster_of(["n1", "n2", "n3"])
        fw = fakes.framework({"score": [fakes.Score("S")]}, cluster, seed=seed)
        return [
            schedule_pod(fw, CycleState(), pod(f"p{i}"), cluster.nodes).suggested_host
            for i in range(40)
        ]

    assert hosts(1) == hosts(1)
    assert set(hosts(1)) == {"n1", "n2", "n3"}
    assert hosts(1) != hosts(2)


# ----------------------------------------------------------------- FitError message
def diagnosis(statuses: list[tuple[str, int]], pre: str = "", post: str = "") -> Diagnosis:
    """(reason, how many nodes)"""
    rejections = []
    row = 0
    for reason, count in statuses:
        rows = np.arange(row, row + count, dtype=np.intp)
        rejections.append((Status(Code.UNSCHEDULABLE, (reason,)), rows))
        row += count
    return Diagnosis(rejections=rejections, pre_filter_msg=pre, post_filter_msg=post)


PRE = "Node(s) failed PreFilter plugin FalsePreFilter"
F1 = "Node(s) failed Filter plugin FalseFilter-1"
F2 = "Node(s) failed Filter plugin FalseFilter-2"
POST = "Error running PostFilter plugin FailedPostFilter"


@pytest.mark.parametrize(
    ("num_nodes", "diag", "message"),
    [
        pytest.param(
            3, diagnosis([(PRE, 3)], pre=PRE), f"0/3 nodes are available: {PRE}.", id="prefilter"
        ),
        pytest.param(
            3,
            diagnosis([(PRE, 3)], pre=PRE, post=POST),
            f"0/3 nodes are available: {PRE}. {POST}",
            id="prefilter-and-postfilter",
        ),
        pytest.param(3, diagnosis([(F1, 3)]), f"0/3 nodes are available: 3 {F1}.", id="one-filter"),
        pytest.param(
            3,
            diagnosis([(F1, 3)], post=POST),
            f"0/3 nodes are available: 3 {F1}. {POST}",
            id="one-filter-and-postfilter",
        ),
        pytest.param(
            3,
            diagnosis([(F1, 2), (F2, 1)]),
            f"0/3 nodes are available: 1 {F2}, 2 {F1}.",
            id="two-filters",
        ),
        pytest.param(
            3,
            diagnosis([(F1, 2), (F2, 1)], post=POST),
            f"0/3 nodes are available: 1 {F2}, 2 {F1}. {POST}",
            id="two-filters-and-postfilter",
        ),
        pytest.param(
            1,
            diagnosis([("Node failed Permit plugin Permit-1", 1)]),
            "0/1 nodes are available: 1 Node failed Permit plugin Permit-1.",
            id="permit",
        ),
        pytest.param(
            12,
            diagnosis([("x", 10), ("y", 2)]),
            "0/12 nodes are available: 10 x, 2 y.",
            id="sorted-as-strings",
        ),
        pytest.param(5, Diagnosis(), "0/5 nodes are available:", id="no-reasons"),
    ],
)
def test_fit_error_message(num_nodes, diag, message):
    assert fit_error_message(num_nodes, diag) == message


def test_fit_error_counts_every_reason_of_a_status():
    two_reasons = Status(Code.UNSCHEDULABLE, ("Insufficient cpu", "Insufficient memory"))
    diag = Diagnosis(rejections=[(two_reasons, np.array([0, 1], dtype=np.intp))])
    assert fit_error_message(2, diag) == (
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
    )


def test_fit_error_from_real_plugins():
    cluster = LocalCluster(
        [
            make_node("small").capacity(cpu="1", memory="8Gi", pods=110).obj(),
            make_node("t1").capacity(cpu="8", memory="8Gi", pods=110).taint("key", "value").obj(),
            make_node("t2").capacity(cpu="8", memory="8Gi", pods=110).taint("key", "value").obj(),
        ]
    )
    profile = Profile(
        plugins=Plugins(
            queue_sort=PluginSet(enabled=[PluginRef(names.PRIORITY_SORT)]),
            pre_filter=PluginSet(enabled=[PluginRef(names.NODE_RESOURCES_FIT)]),
            filter=PluginSet(
                enabled=[PluginRef(names.TAINT_TOLERATION), PluginRef(names.NODE_RESOURCES_FIT)]
            ),
            bind=PluginSet(enabled=[PluginRef(names.DEFAULT_BINDER)]),
        )
    )
    from scheduling.framework.runtime import Framework

    fw = Framework(profile, in_tree_registry(), cluster)
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), make_pod("p").req(cpu="2").obj(), cluster.nodes)
    assert str(info.value) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {key: value}."
    )
    filtered = {n: s.plugin for n, s in rejected(info.value, cluster).items()}
    assert filtered == {
        "small": names.NODE_RESOURCES_FIT,
        "t1": names.TAINT_TOLERATION,
        "t2": names.TAINT_TOLERATION,
    }


def rejected(err: FitError, cluster: LocalCluster) -> dict[str, Status]:
    from scheduling.framework.schedule import rejected_nodes

    return rejected_nodes(err.diagnosis, cluster.nodes)
