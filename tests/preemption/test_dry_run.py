"""Upstream TestDryRunPreemption, ported; each case runs both ways (all nodes at once, and
node by node as upstream) and both must agree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from scheduling.framework.status import Code
from scheduling.plugins.defaultpreemption import Evaluator, num_candidates
from shared.config import DefaultPreemptionArgs
from shared.models import Pod, PodDisruptionBudget
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.fakes import (
    CodeFilter,
    FalseFilter,
    FitFilter,
    MatchFilter,
    NoopExtension,
    SpreadFilter,
    TrueFilter,
    columns,
    environment,
    run_pre_filters,
)
from tests.preemption.tables import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    status_with_disrupted,
)
from tests.preemption.tables import topology_node as tnode


def pod(name: str, priority: int, node: str = "", req: dict[str, str] | None = None) -> Pod:
    b = make_pod(name).uid(name).priority(priority)
    if node:
        b = b.node(node)
    if req:
        b = b.req(req)
    return b.obj()


def labelled(name: str, priority: int, node: str, req: dict[str, str], **labels: str) -> Pod:
    b = make_pod(name).uid(name).priority(priority).node(node).req(req).labels(labels)
    return b.obj()


def foo_pdb(allowed: int, disrupted: Sequence[str] = ()) -> PodDisruptionBudget:
    pdb = make_pdb("pdb", label_selector({"app": "foo"}), disruptions_allowed=allowed)
    if disrupted:
        pdb.status = status_with_disrupted(allowed, disrupted)
    return pdb


@dataclass
class Case:
    plugins: Callable[[], list[object]]
    nodes: list[str]
    preemptors: list[Pod]
    pods: list[Pod]
    expected: list[dict[str, tuple[list[str], int]]]
    """Per preemptor: node -> (victim names sorted, numPDBViolations)."""
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    fake_code: Code = Code.SUCCESS
    args: DefaultPreemptionArgs | None = None
    offsets: list[int] = field(default_factory=lambda: [0])
    filter_calls: list[int] | None = None
    """Rows the FakeFilter judged, node by node (upstream expectedNumFilterCalled)."""


def fit() -> list[object]:
    return [FitFilter()]


def fit_spread() -> list[object]:
    return [SpreadFilter()]


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


ARGS_40_1 = DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=1)
ARGS_40_2 = DefaultPreemptionArgs(min_candidate_nodes_percentage=40, min_candidate_nodes_absolute=2)
FIVE = ["node1", "node2", "node3", "node4", "node5"]

CASES = [
    pytest.param(
        Case(
            lambda: [FalseFilter()],
            ["node1", "node2"],
            [pod("p", HIGH)],
            [pod("p1", MID, "node1"), pod("p2", MID, "node2")],
            [{}],
            filter_calls=[2],
        ),
        id="a pod that does not fit on any node",
    ),
    pytest.param(
        Case(
            lambda: [TrueFilter()],
            ["node1", "node2"],
            [pod("p", HIGH)],
            [pod("p1", MID, "node1"), pod("p2", MID, "node2")],
            [{}],
            fake_code=Code.UNSCHEDULABLE,
            filter_calls=[2],
        ),
        id="a pod that fits with no preemption",
    ),
    pytest.param(
        Case(
            lambda: [MatchFilter()],
            ["node1", "node2"],
            [pod("node1", HIGH)],
            [pod("p1", MID, "node1"), pod("p2", MID, "node2")],
            [{}],
            fake_code=Code.UNSCHEDULABLE,
            filter_calls=[2],
        ),
        id="a pod that fits on one node with no preemption",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", HIGH, req=LARGE)],
            [pod("p1", MID, "node1", LARGE), pod("p2", MID, "node2", LARGE)],
            [{"node1": (["p1"], 0), "node2": (["p2"], 0)}],
            filter_calls=[4],
        ),
        id="a pod that fits on both nodes when lower priority pods are preempted",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", LOW, req=LARGE)],
            [pod("p1", MID, "node1", LARGE), pod("p2", MID, "node2", LARGE)],
            [{}],
            filter_calls=[0],
        ),
        id="other pods running are higher priority, no preemption would happen",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", HIGH, req=LARGE)],
            [
                pod("p1.1", LOW, "node1", SMALL),
                pod("p1.2", MID, "node1", LARGE),
                pod("p2", MID, "node2", LARGE),
            ],
            [{"node1": (["p1.2"], 0), "node2": (["p2"], 0)}],
            filter_calls=[5],
        ),
        id="medium priority pod is preempted, but lower priority one stays as it is small",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", HIGH, req=LARGE)],
            [
                pod("p1.1", MID, "node1", SMALL),
                pod("p1.2", LOW, "node1", SMALL),
                pod("p1.3", MID, "node1", MEDIUM),
                pod("p1.4", HIGH, "node1", SMALL),
                pod("p2", HIGH, "node2", LARGE),
            ],
            [{"node1": (["p1.2", "p1.3"], 0)}],
            filter_calls=[4],
        ),
        id="mixed priority pods are preempted",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", HIGH, req=LARGE)],
            [
                make_pod("p1.1")
                .uid("p1.1")
                .node("node1")
                .priority(LOW)
                .req(SMALL)
                .start_time(5)
                .obj(),
                make_pod("p1.2")
                .uid("p1.2")
                .node("node1")
                .priority(LOW)
                .req(SMALL)
                .start_time(4)
                .obj(),
                make_pod("p1.3")
                .uid("p1.3")
                .node("node1")
                .priority(MID)
                .req(MEDIUM)
                .start_time(3)
                .obj(),
                make_pod("p1.4")
                .uid("p1.4")
                .node("node1")
                .priority(HIGH)
                .req(SMALL)
                .start_time(2)
                .obj(),
                make_pod("p2")
                .uid("p2")
                .node("node2")
                .priority(HIGH)
                .req(LARGE)
                .start_time(1)
                .obj(),
            ],
            [{"node1": (["p1.1", "p1.3"], 0)}],
            filter_calls=[4],
        ),
        id="mixed priority pods are preempted, pick later StartTime one when priorities equal",
    ),
    pytest.param(
        Case(
            fit_spread,
            ["node-a/zone1", "node-b/zone1", "node-x/zone2"],
            [spread_pod()],
            [
                labelled("pod-a1", MID, "node-a", {}, foo=""),
                labelled("pod-a2", LOW, "node-a", {}, foo=""),
                labelled("pod-b1", LOW, "node-b", {}, foo=""),
                labelled("pod-x1", HIGH, "node-x", {}, foo=""),
                labelled("pod-x2", HIGH, "node-x", {}, foo=""),
            ],
            [{"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}],
            filter_calls=[5],
        ),
        id="preemption to resolve pod topology spread filter failure",
    ),
    pytest.param(
        Case(
            fit,
            ["node1", "node2"],
            [pod("p", HIGH, req=LARGE)],
            [pod("p1", MID, "node1", LARGE), pod("p2", MID, "node2", LARGE)],
            [{}],
            fake_code=Code.UNSCHEDULABLE,
            filter_calls=[2],
        ),
        id="get Unschedulable in the preemption phase when the filter plugins filtering",
    ),
    pytest.param(
        Case(
            fit,
            ["node1"],
            [pod("p", HIGH, req=VERY_LARGE)],
            [
                labelled("p1.1", MID, "node1", MEDIUM, app="foo"),
                labelled("p1.2", MID, "node1", MEDIUM, app="foo"),
            ],
            [{"node1": (["p1.1", "p1.2"], 1)}],
            pdbs=[foo_pdb(1)],
            filter_calls=[3],
        ),
        id="preemption with violation of same pdb",
    ),
    pytest.param(
        Case(
            fit,
            ["node1"],
            [pod("p", HIGH, req=VERY_LARGE)],
            [
                labelled("p1.1", MID, "node1", MEDIUM, app="foo"),
                labelled("p1.2", MID, "node1", MEDIUM, app="foo"),
            ],
            [{"node1": (["p1.1", "p1.2"], 1)}],
            pdbs=[foo_pdb(1, ["p2"])],
            filter_calls=[3],
        ),
        id="pdb with a processed eviction, the victim is not in DisruptedPods",
    ),
    pytest.param(
        Case(
            fit,
            ["node1"],
            [pod("p", HIGH, req=VERY_LARGE)],
            [
                labelled("p1.1", MID, "node1", MEDIUM, app="foo"),
                labelled("p1.2", MID, "node1", MEDIUM, app="foo"),
            ],
            [{"node1": (["p1.1", "p1.2"], 0)}],
            pdbs=[foo_pdb(1, ["p1.2"])],
            filter_calls=[3],
        ),
        id="pdb with a processed eviction, the victim belongs to DisruptedPods",
    ),
    pytest.param(
        Case(
            fit,
            ["node1"],
            [pod("p", HIGH, req=VERY_LARGE)],
            [
                labelled("p1.1", MID, "node1", MEDIUM, app="foo"),
                labelled("p1.2", MID, "node1", MEDIUM, app="foo"),
                labelled("p1.3", MID, "node1", MEDIUM, app="foo"),
            ],
            [{"node1": (["p1.1", "p1.2", "p1.3"], 1)}],
            pdbs=[foo_pdb(1, ["p1.3"])],
            filter_calls=[4],
        ),
        id="pdb victim in DisruptedPods is treated as non-violating",
    ),
    pytest.param(
        Case(
            fit,
            FIVE,
            [pod("p", HIGH, req=LARGE)],
            [pod(f"p{i}", MID, f"node{i}", LARGE) for i in range(1, 6)],
            # offset=4: node5 (yes), node1 (yes)
            [{"node1": (["p1"], 0), "node5": (["p5"], 0)}],
            args=ARGS_40_1,
            offsets=[4],
            filter_calls=[4],
        ),
        id="all nodes are possible candidates, but DefaultPreemptionArgs limits to 2",
    ),
    pytest.param(
        Case(
            fit,
            FIVE,
            [pod("p", HIGH, req=LARGE)],
            [
                pod("p1", MID, "node1", LARGE),
                pod("p2", VERY_HIGH, "node2", LARGE),
                pod("p3", MID, "node3", LARGE),
                pod("p4", MID, "node4", LARGE),
                pod("p5", VERY_HIGH, "node5", LARGE),
            ],
            # offset=4: node5 (no), node1 (yes), node2 (no), node3 (yes)
            [{"node1": (["p1"], 0), "node3": (["p3"], 0)}],
            args=ARGS_40_1,
            offsets=[4],
            filter_calls=[4],
        ),
        id="some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
    ),
    pytest.param(
        Case(
            fit,
            FIVE,
            [pod("tp1", HIGH, req=LARGE), pod("tp2", HIGH, req=LARGE), pod("tp3", HIGH, req=LARGE)],
            [pod(f"p{i}", MID, f"node{i}", LARGE) for i in range(1, 6)],
            [
                {"node1": (["p1"], 0), "node5": (["p5"], 0)},
                {"node2": (["p2"], 0), "node3": (["p3"], 0)},
                {"node4": (["p4"], 0), "node5": (["p5"], 0)},
            ],
            args=ARGS_40_1,
            offsets=[4, 1, 3],
            filter_calls=[4, 4, 4],
        ),
        id="preemption offset across multiple scheduling cycles and wrap around",
    ),
    pytest.param(
        Case(
            fit,
            FIVE,
            [pod("p", HIGH, req=LARGE)],
            [
                labelled("p1", MID, "node1", LARGE, app="foo"),
                labelled("p2", MID, "node2", LARGE, app="foo"),
                pod("p3", MID, "node3", LARGE),
                pod("p4", MID, "node4", LARGE),
                labelled("p5", MID, "node5", LARGE, app="foo"),
            ],
            # offset=4: node5 (yes, pdb), node1 (yes, pdb), node2 (no, pdb), node3 (yes)
            [{"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)}],
            pdbs=[foo_pdb(0)],
            args=ARGS_40_2,
            offsets=[4],
            filter_calls=[8],
        ),
        id="preemption looks past numCandidates until a non-PDB violating node is found",
    ),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["all-at-once", "node-by-node", "node-by-node-every-node"])
def test_dry_run(case: Case, mode: str) -> None:
    node_by_node = mode != "all-at-once"
    nodes = columns([tnode(n) for n in case.nodes], case.pods)
    fake = CodeFilter(dict.fromkeys(nodes.names, case.fake_code))
    plugins: list[object] = [fake, *case.plugins()]
    if node_by_node:
        plugins.append(NoopExtension())
    args = case.args or DefaultPreemptionArgs()
    offsets = iter(case.offsets)
    evaluator = Evaluator(
        args.min_candidate_nodes_percentage,
        args.min_candidate_nodes_absolute,
        offset=lambda n: next(offsets),
        clock=lambda: 100.0,
        skip_hopeless_nodes=mode != "node-by-node-every-node",
    )
    env = environment(nodes, plugins, pdbs=case.pdbs)
    potential = np.arange(len(nodes), dtype=np.intp)
    for cycle, preemptor in enumerate(case.preemptors):
        state = run_pre_filters(plugins, preemptor, nodes)
        before = fake.calls
        wanted = num_candidates(
            len(nodes), args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute
        )
        run = evaluator.dry_run(
            state, preemptor, env, potential, evaluator.offset(len(nodes)), wanted
        )
        got = {
            c.node_name: (sorted(p.metadata.name for p in c.victims), c.num_pdb_violations)
            for c in run.candidates
        }
        assert got == case.expected[cycle]
        if mode == "node-by-node-every-node" and case.filter_calls is not None:
            assert fake.calls - before == case.filter_calls[cycle]
