"""Priority and preemption as the Kubernetes "Pod Priority and Preemption" docs describe them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, PostFilterResult
from scheduling.framework.nominated import filter_with_nominated_pods
from scheduling.framework.status import Code, Status
from scheduling.plugins.defaultpreemption import (
    DefaultPreemption,
    FilterContext,
    Scratch,
    ge_nominated_pods,
    lower_priority_nominated_pods,
    nominated_pods_from,
    run_filters_with_nominated_pods,
)
from shared.models import Node, Pod, PodDisruptionBudget
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.fakes import (
    AffinityFilter,
    FitFilter,
    all_unschedulable,
    columns,
    environment,
    run_pre_filters,
)
from tests.preemption.tables import node

CPU1 = {"cpu": "1"}
CPU2 = {"cpu": "2"}


def running(name: str, priority: int, node_name: str, cpu: str = "1", **labels: str) -> Pod:
    return (
        make_pod(name)
        .uid(name)
        .priority(priority)
        .node(node_name)
        .req(cpu=cpu)
        .labels(labels)
        .obj()
    )


def preempt(
    preemptor: Pod,
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    plugins: Sequence[object],
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> tuple[PostFilterResult | None, Status]:
    cols = columns(nodes, pods)
    env = environment(cols, plugins, pdbs=pdbs, pods=pods)
    plugin = DefaultPreemption(offset=lambda n: 0, environment=lambda _: env)
    state = run_pre_filters(plugins, preemptor, cols)
    return plugin.post_filter(state, preemptor, cols, all_unschedulable(cols))


def victims_of(result: PostFilterResult | None) -> list[str]:
    return sorted(p.metadata.name for p in result.victims) if result else []


TWO_CPU = {"cpu": "2"}


# ------------------------------------------------------------------ priorities
@pytest.mark.parametrize(
    ("preemptor_priority", "victim_priority", "preempts"),
    [
        pytest.param(10, 5, True, id="higher priority preempts"),
        pytest.param(5, 5, False, id="equal priority never preempts"),
        pytest.param(4, 5, False, id="lower priority never preempts"),
        pytest.param(0, -1, True, id="default priority 0 preempts a negative priority"),
    ],
)
def test_preemptor_never_evicts_equal_or_higher_priority(
    preemptor_priority: int, victim_priority: int, preempts: bool
) -> None:
    preemptor = make_pod("p").uid("p").priority(preemptor_priority).req(CPU2).obj()
    pods = [running("v", victim_priority, "n1", "2")]
    result, status = preempt(preemptor, [node("n1", TWO_CPU)], pods, [FitFilter()])
    assert status.is_success() is preempts
    assert victims_of(result) == (["v"] if preempts else [])
    if not preempts:
        assert status.message() == (
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        )


def test_unresolved_priority_counts_as_zero() -> None:
    preemptor = make_pod("p").uid("p").req(CPU2).obj()
    victim = make_pod("v").uid("v").node("n1").req(CPU2).obj()
    result, status = preempt(preemptor, [node("n1", TWO_CPU)], [victim], [FitFilter()])
    assert status.code == Code.UNSCHEDULABLE
    assert result == PostFilterResult(nominated_node="")


# ------------------------------------------------------------------ preemptionPolicy
def test_preemption_policy_never_cannot_preempt() -> None:
    preemptor = make_pod("p").uid("p").priority(100).preemption_policy("Never").req(CPU2).obj()
    pods = [running("v", 1, "n1", "2")]
    result, status = preempt(preemptor, [node("n1", TWO_CPU)], pods, [FitFilter()])
    assert result is None  # nominatedNodeName stays as it is
    assert status.code == Code.UNSCHEDULABLE
    assert status.message() == "preemption: not eligible due to preemptionPolicy=Never."


def test_a_never_pod_can_itself_be_preempted() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    victim = make_pod("v").uid("v").priority(1).preemption_policy("Never").node("n1")
    result, status = preempt(
        preemptor, [node("n1", TWO_CPU)], [victim.req(CPU2).obj()], [FitFilter()]
    )
    assert status.is_success()
    assert victims_of(result) == ["v"]


# ------------------------------------------------------------------ affinity to victims
def test_affinity_to_a_lower_priority_pod_skips_the_node() -> None:
    # P needs a pod labelled "db" on its node; the only one is a low-priority victim.
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    pods = [running("db", 1, "n1", "1", db="yes"), running("filler", 1, "n1", "1")]
    plugins = [FitFilter(), AffinityFilter("kubernetes.io/hostname", "db", anti=False)]
    result, status = preempt(preemptor, [node("n1", TWO_CPU)], pods, plugins)
    assert status.code == Code.UNSCHEDULABLE
    assert result == PostFilterResult(nominated_node="")
    assert "didn't match pod affinity rules" in status.message()


def test_affinity_to_an_equal_priority_pod_keeps_the_node() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    pods = [running("db", 100, "n1", "1", db="yes"), running("filler", 1, "n1", "1")]
    plugins = [FitFilter(), AffinityFilter("kubernetes.io/hostname", "db", anti=False)]
    result, status = preempt(preemptor, [node("n1", TWO_CPU)], pods, plugins)
    assert status.is_success()
    assert victims_of(result) == ["filler"]


# ------------------------------------------------------------------ no cross-node preemption
def test_no_cross_node_preemption() -> None:
    # P has zone anti-affinity to Q, which runs on n2 in the same zone; n1 is full of
    # low-priority pods. Evicting Q would help, but only pods on the node itself are victims.
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    nodes = [node("n1", TWO_CPU, zone="z1"), node("n2", TWO_CPU, zone="z1")]
    pods = [
        running("q", 1, "n2", "0", avoid="me"),
        running("big", 200, "n2", "2"),
        running("low1", 1, "n1", "1"),
        running("low2", 1, "n1", "1"),
    ]
    plugins = [FitFilter(), AffinityFilter("zone", "avoid", anti=True)]
    result, status = preempt(preemptor, nodes, pods, plugins)
    assert status.code == Code.UNSCHEDULABLE
    assert result == PostFilterResult(nominated_node="")
    assert status.message() == (
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod "
        "anti-affinity rules."
    )


# ------------------------------------------------------------------ choosing the node
def test_prefers_lowest_priority_victims() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    nodes = [node("n1", CPU1), node("n2", CPU1)]
    pods = [running("mid", 50, "n1"), running("low", 10, "n2")]
    result, status = preempt(preemptor, nodes, pods, [FitFilter()])
    assert status.is_success()
    assert result is not None
    assert (result.nominated_node, victims_of(result)) == ("n2", ["low"])


def test_pdb_protected_lowest_priority_pods_send_preemption_elsewhere() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    nodes = [node("n1", CPU1), node("n2", CPU1)]
    pods = [running("mid", 50, "n1"), running("low", 10, "n2", app="db")]
    pdb = make_pdb("db", label_selector({"app": "db"}), disruptions_allowed=0)
    result, status = preempt(preemptor, nodes, pods, [FitFilter()], [pdb])
    assert status.is_success()
    assert result is not None
    assert (result.nominated_node, victims_of(result)) == ("n1", ["mid"])


def test_pdb_violated_when_there_is_no_other_way() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    pods = [running("low", 10, "n1", app="db")]
    pdb = make_pdb("db", label_selector({"app": "db"}), disruptions_allowed=0)
    result, status = preempt(preemptor, [node("n1", CPU1)], pods, [FitFilter()], [pdb])
    assert status.is_success()
    assert victims_of(result) == ["low"]


def test_higher_priority_victims_only_when_removing_lower_is_not_enough() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    pods = [running("low", 1, "n1"), running("mid", 50, "n1"), running("free", 1, "n2", "0")]
    nodes = [node("n1", TWO_CPU), node("n2", CPU1)]
    result, status = preempt(preemptor, nodes, pods, [FitFilter()])
    assert status.is_success()
    assert victims_of(result) == ["low", "mid"]


def test_minimal_victim_set_reprieves_the_most_important_first() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    pods = [running("a", 5, "n1"), running("b", 7, "n1"), running("c", 6, "n1")]
    result, status = preempt(preemptor, [node("n1", {"cpu": "3"})], pods, [FitFilter()])
    assert status.is_success()
    assert victims_of(result) == ["a"]


# ------------------------------------------------------------------ nominated node
def test_nominated_node_is_set_and_victims_returned() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    result, status = preempt(preemptor, [node("n1", CPU1)], [running("v", 1, "n1")], [FitFilter()])
    assert status.is_success()
    assert result is not None
    assert result.nominated_node == "n1"
    assert [v.spec.node_name for v in result.victims] == ["n1"]


def nominated(name: str, priority: int, node_name: str, cpu: str = "1", **labels: str) -> Pod:
    b = make_pod(name).uid(name).priority(priority).nominated_node_name(node_name)
    return b.req(cpu=cpu).labels(labels).obj()


@pytest.mark.parametrize(
    ("pod_priority", "nominated_priority", "fits"),
    [
        pytest.param(10, 20, False, id="a higher-priority nominated pod's room is taken"),
        pytest.param(10, 10, False, id="an equal-priority nominated pod's room is taken"),
        pytest.param(10, 5, True, id="a lower-priority nominated pod is ignored"),
    ],
)
def test_nominated_pods_count_for_lower_or_equal_priority_pods(
    pod_priority: int, nominated_priority: int, fits: bool
) -> None:
    cols = columns([node("n1", CPU1), node("n2", CPU1)], [running("busy", 1000, "n2")])
    pod = make_pod("p").uid("p").priority(pod_priority).req(CPU1).obj()
    waiting = nominated("w", nominated_priority, "n1")
    plugins = [FitFilter()]
    state = run_pre_filters(plugins, pod, cols)
    rows = np.arange(len(cols), dtype=np.intp)
    outcome = filter_with_nominated_pods(
        plugins, plugins, nominated_pods_from([waiting]), state, pod, cols, rows
    )
    assert outcome.ok.tolist() == [fits, False]
    assert cols.requested[cols.index["n1"], cols.resource_index["cpu"]] == 0


def test_nominated_pod_is_not_counted_against_itself() -> None:
    cols = columns([node("n1", CPU1)], [])
    pod = nominated("p", 10, "n1")
    state = run_pre_filters([FitFilter()], pod, cols)
    outcome = filter_with_nominated_pods(
        [FitFilter()], [], {"n1": [pod]}, state, pod, cols, np.array([0], dtype=np.intp)
    )
    assert outcome.ok.tolist() == [True]


def test_second_pass_without_nominated_pods_must_pass_too() -> None:
    # P needs a "db" pod on its node: with the nominated db pod counted it fits (pass 1),
    # without it (pass 2) it does not, so the node is rejected (upstream's conservative rule).
    cols = columns([node("n1", TWO_CPU)], [])
    pod = make_pod("p").uid("p").priority(10).req(CPU1).obj()
    affinity = AffinityFilter("kubernetes.io/hostname", "db", anti=False)
    plugins: list[FilterPlugin] = [FitFilter(), affinity]
    state = run_pre_filters(plugins, pod, cols)
    ctx = FilterContext(plugins, [affinity], {"n1": [nominated("db", 20, "n1", db="yes")]})
    rows = np.array([0], dtype=np.intp)
    outcome = run_filters_with_nominated_pods(ctx, state, pod, Scratch(cols), rows)
    assert outcome.ok.tolist() == [False]
    assert outcome.status_at(0).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_preemption_respects_room_reserved_for_nominated_pods() -> None:
    # n1: one low victim (1 cpu) of 2 cpu; a higher-priority pod nominated there holds 1 cpu.
    # Evicting the victim leaves 1 cpu, not the 2 the preemptor needs; n2 works.
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    nodes = [node("n1", TWO_CPU), node("n2", TWO_CPU)]
    pods = [
        running("v1", 1, "n1"),
        running("v2", 1, "n2", "2"),
        nominated("w", 500, "n1"),
    ]
    result, status = preempt(preemptor, nodes, pods, [FitFilter()])
    assert status.is_success()
    assert result is not None
    assert (result.nominated_node, victims_of(result)) == ("n2", ["v2"])


def test_lower_priority_nominated_pods_lose_their_nomination() -> None:
    preemptor = make_pod("p").priority(100).obj()
    pods = [nominated("a", 50, "n1"), nominated("b", 100, "n1"), nominated("c", 1, "n2")]
    got = lower_priority_nominated_pods(preemptor, "n1", nominated_pods_from(pods))
    assert [p.metadata.name for p in got] == ["a"]
    assert [p.metadata.name for p in ge_nominated_pods(preemptor, pods)] == ["b"]


def test_preemption_never_changes_the_schedulers_view() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU2).obj()
    pods = [running("v1", 1, "n1"), running("v2", 1, "n1"), nominated("w", 500, "n2")]
    cols = columns([node("n1", TWO_CPU), node("n2", TWO_CPU)], pods)
    requested = cols.requested.copy()
    lists = [list(p) for p in cols.pods_by_node]
    env = environment(cols, [FitFilter()], pods=pods)
    plugin = DefaultPreemption(offset=lambda n: 0, environment=lambda _: env)
    state = CycleState()
    FitFilter().pre_filter(state, preemptor, cols)
    result, status = plugin.post_filter(state, preemptor, cols, all_unschedulable(cols))
    assert status.is_success()
    assert victims_of(result) == ["v1", "v2"]
    assert (cols.requested == requested).all()
    assert [list(p) for p in cols.pods_by_node] == lists


class _Broken:
    name = "Broken"

    def filter(self, state: CycleState, pod: Pod, nodes: object, rows: object) -> None:
        raise RuntimeError("boom")


def test_a_failing_filter_plugin_is_an_error_not_a_crash() -> None:
    preemptor = make_pod("p").uid("p").priority(100).req(CPU1).obj()
    result, status = preempt(
        preemptor, [node("n1", CPU1)], [running("v", 1, "n1")], [FitFilter(), _Broken()]
    )
    assert result is None
    assert status.code == Code.ERROR
    assert status.message() == "preemption: boom"
