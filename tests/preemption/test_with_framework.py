"""DefaultPreemption inside the real framework: the default profile's plugins (NodeResourcesFit,
InterPodAffinity, PodTopologySpread with their PreFilter extensions), a full cycle that ends in
a FitError, then PostFilter; and the preemption benchmark at a small size."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cli.bench.preemption import run_preemption_bench
from scheduling.cache.local import LocalCluster
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import FitError
from scheduling.framework.interfaces import PostFilterResult
from scheduling.framework.runtime import build_frameworks
from scheduling.framework.schedule import schedule_pod
from scheduling.framework.status import Code, Status
from scheduling.plugins.registry import in_tree_registry
from shared.config import default_config
from shared.models import DEFAULT_SCHEDULER_NAME, Node, Pod, PodDisruptionBudget
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.tables import HIGH, LARGE, LOW, MID, SMALL, VERY_LARGE, node, topology_node


def cycle(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    preemptor: Pod,
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> tuple[PostFilterResult | None, Status]:
    cluster = LocalCluster(nodes, pods, pod_disruption_budgets=pdbs)
    framework = build_frameworks(default_config(), in_tree_registry(), cluster, seed=1)[
        DEFAULT_SCHEDULER_NAME
    ]
    state = CycleState()
    with pytest.raises(FitError) as caught:
        schedule_pod(framework, state, preemptor, cluster.nodes)
    return framework.run_post_filter_plugins(
        state, preemptor, cluster.nodes, caught.value.diagnosis
    )


def victims(result: PostFilterResult | None) -> tuple[str | None, list[str]]:
    if result is None:
        return None, []
    return result.nominated_node, sorted(v.metadata.name for v in result.victims)


def spread_pod() -> Pod:
    selector = label_selector(None, ("foo", "Exists", []))
    return (
        make_pod("p")
        .uid("p")
        .label("foo", "")
        .priority(HIGH)
        .spread_constraint(1, "zone", "DoNotSchedule", selector)
        .spread_constraint(1, "hostname", "DoNotSchedule", selector)
        .obj()
    )


def labelled(name: str, priority: int, node_name: str) -> Pod:
    return make_pod(name).uid(name).node(node_name).label("foo", "").priority(priority).obj()


def test_preemption_for_topology_spread_constraints() -> None:
    nodes = [topology_node(s) for s in ("node-a/zone1", "node-b/zone1", "node-x/zone2")]
    pods = [
        labelled("p-a1", HIGH, "node-a"),
        labelled("p-a2", HIGH, "node-a"),
        labelled("p-b1", LOW, "node-b"),
        labelled("p-x1", HIGH, "node-x"),
        labelled("p-x2", HIGH, "node-x"),
    ]
    result, status = cycle(nodes, pods, spread_pod())
    assert status.is_success(), status
    assert victims(result) == ("node-b", ["p-b1"])


def test_reprieves_the_pod_that_keeps_spread_satisfied() -> None:
    # node-a: removing both lower pods fits; reprieving the mid one still fits, the low one
    # would break the zone skew: only the low one is a victim (upstream DryRun table).
    nodes = [topology_node(s) for s in ("node-a/zone1", "node-b/zone1", "node-x/zone2")]
    pods = [
        labelled("pod-a1", MID, "node-a"),
        labelled("pod-a2", LOW, "node-a"),
        labelled("pod-b1", HIGH, "node-b"),
        labelled("pod-x1", HIGH, "node-x"),
        labelled("pod-x2", HIGH, "node-x"),
    ]
    result, status = cycle(nodes, pods, spread_pod())
    assert status.is_success(), status
    assert victims(result) == ("node-a", ["pod-a2"])


def test_pod_with_anti_affinity_is_preempted() -> None:
    nodes = [topology_node("node1"), topology_node("node2")]
    guarded = (
        make_pod("p1.1")
        .uid("p1.1")
        .node("node1")
        .label("foo", "")
        .priority(LOW)
        .req(SMALL)
        .pod_affinity_exists("foo", "hostname", anti=True)
        .obj()
    )
    pods = [
        guarded,
        make_pod("p1.2").uid("p1.2").node("node1").priority(MID).req(SMALL).obj(),
        make_pod("p1.3").uid("p1.3").node("node1").priority(HIGH).req(SMALL).obj(),
        make_pod("p2").uid("p2").node("node2").priority(HIGH).req(VERY_LARGE).obj(),
    ]
    preemptor = make_pod("p").uid("p").label("foo", "").priority(HIGH).req(SMALL).obj()
    result, status = cycle(nodes, pods, preemptor)
    assert status.is_success(), status
    assert victims(result) == ("node1", ["p1.1"])


def test_no_candidate_reports_the_real_filter_reasons() -> None:
    # node1: evicting the low pod still leaves too little cpu; node2: its one pod slot holds a
    # pod of equal priority.
    nodes = [
        node("node1", {"cpu": "500m", "memory": "1Gi"}),
        node("node2", {"cpu": "1", "memory": "1Gi", "pods": "1"}),
    ]
    pods = [
        make_pod("p1").uid("p1").node("node1").priority(LOW).req(cpu="100m").obj(),
        make_pod("p1h").uid("p1h").node("node1").priority(HIGH).req(cpu="300m").obj(),
        make_pod("p2").uid("p2").node("node2").priority(HIGH).obj(),
    ]
    preemptor = make_pod("p").uid("p").priority(HIGH).req(LARGE).obj()
    result, status = cycle(nodes, pods, preemptor)
    assert status.code == Code.UNSCHEDULABLE
    # The plugin answers PostFilterResult("") (clear the nomination); the runtime may fold it.
    assert result is None or (result.nominated_node == "" and not result.victims)
    assert status.message() == (
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 No preemption victims "
        "found for incoming pod."
    )


def test_pdbs_from_the_cluster_steer_preemption() -> None:
    nodes = [node("n1", {"cpu": "1"}), node("n2", {"cpu": "1"})]
    pods = [
        make_pod("mid").uid("mid").node("n1").priority(MID).req(cpu="1").obj(),
        make_pod("low").uid("low").node("n2").priority(LOW).req(cpu="1").label("app", "db").obj(),
    ]
    pdb = make_pdb("db", label_selector({"app": "db"}), disruptions_allowed=0)
    preemptor = make_pod("p").uid("p").priority(HIGH).req(cpu="1").obj()
    assert victims(cycle(nodes, pods, preemptor)[0]) == ("n2", ["low"])
    assert victims(cycle(nodes, pods, preemptor, [pdb])[0]) == ("n1", ["mid"])


def test_preemption_bench_small() -> None:
    result = run_preemption_bench(nodes=60, running=240, incoming=20, seed=3)
    assert result["preemptions"] == 20
    assert result["victims"] == 20
    assert result["unschedulable"] == 0
    decision = result["decision"]
    assert 0 < decision["p50_ms"] <= decision["p99_ms"] <= decision["max_ms"]


def test_host_port_conflict_is_resolved_by_preemption() -> None:
    nodes = [node("n1"), node("n2")]
    pods = [
        make_pod("low").uid("low").node("n1").priority(LOW).host_port(8080).obj(),
        make_pod("small").uid("small").node("n1").priority(LOW).obj(),
        make_pod("high").uid("high").node("n2").priority(HIGH).host_port(8080).obj(),
    ]
    preemptor = make_pod("p").uid("p").priority(HIGH).host_port(8080).obj()
    result, status = cycle(nodes, pods, preemptor)
    assert status.is_success(), status
    assert victims(result) == ("n1", ["low"])
