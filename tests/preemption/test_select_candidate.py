"""Choosing the node: upstream TestSelectBestCandidate and pickOneNodeForPreemption, ported,
plus TestCustomSelection (IsEligiblePod) and PodEligibleToPreemptOthers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.status import Code
from scheduling.plugins.defaultpreemption import (
    Candidate,
    Evaluator,
    more_important_pod,
    pick_one_node_for_preemption,
)
from scheduling.plugins.defaultpreemption.environment import rejection_codes
from shared.models import Pod, priority_of
from tests.builders import make_pod
from tests.preemption.fakes import (
    FitFilter,
    NoopExtension,
    columns,
    diagnosis_of,
    environment,
    run_pre_filters,
)
from tests.preemption.tables import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    NEG,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    node,
)

EPOCH = 0.0


def pod(
    name: str, priority: int, node_name: str, req: Mapping[str, str], start: float | None = EPOCH
) -> Pod:
    b = make_pod(name).uid(name).priority(priority).node(node_name).req(req)
    if start is not None:
        b = b.start_time(start)
    return b.obj()


@dataclass
class SelectCase:
    nodes: list[str]
    preemptor: Pod
    pods: list[Pod]
    expected: set[str]


def p(name: str, priority: int, req: Mapping[str, str], start: float = EPOCH) -> Pod:
    """Pod "pN.M" on nodeN."""
    return pod(name, priority, "node" + name[1 : name.index(".")], req, start)


SELECT_CASES = [
    pytest.param(
        SelectCase(
            ["node1", "node2"],
            make_pod("p").uid("p").priority(HIGH).req(LARGE).obj(),
            [pod("p1", MID, "node1", LARGE), pod("p2", MID, "node2", LARGE)],
            {"node1", "node2"},
        ),
        id="a pod that fits on both nodes when lower priority pods are preempted",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, MEDIUM),
                p("p1.2", MID, LARGE),
                p("p2.1", MID, MEDIUM),
                p("p2.2", LOW, MEDIUM),
                p("p3.1", LOW, MEDIUM),
                p("p3.2", LOW, MEDIUM),
            ],
            {"node3"},
        ),
        id="node with min highest priority pod is picked",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, MEDIUM),
                p("p1.2", MID, LARGE),
                p("p2.1", MID, LARGE),
                p("p2.2", LOW, MEDIUM),
                p("p3.1", MID, MEDIUM),
                p("p3.2", MID, MEDIUM),
            ],
            {"node2"},
        ),
        id="when highest priorities are the same, minimum sum of priorities is picked",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, SMALL),
                p("p1.2", NEG, SMALL),
                p("p1.3", MID, SMALL),
                p("p1.4", NEG, SMALL),
                p("p2.1", MID, LARGE),
                p("p2.2", NEG, MEDIUM),
                p("p3.1", MID, MEDIUM),
                p("p3.2", NEG, SMALL),
                p("p3.3", LOW, SMALL),
            ],
            {"node2"},
        ),
        id="when highest priority and sum are the same, minimum number of pods is picked",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, SMALL),
                p("p1.2", NEG, SMALL),
                p("p1.3", NEG, SMALL),
                p("p2.1", MID, LARGE),
                p("p2.2", NEG, MEDIUM),
                p("p3.1", MID, MEDIUM),
                p("p3.2", NEG, SMALL),
                p("p3.3", LOW, SMALL),
            ],
            {"node2"},
        ),
        id="sum of adjusted priorities is considered",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3", "node4"],
            make_pod("p").uid("p").priority(VERY_HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, SMALL),
                p("p1.2", LOW, SMALL),
                p("p1.3", LOW, SMALL),
                p("p2.1", HIGH, LARGE),
                p("p3.1", MID, MEDIUM),
                p("p3.2", LOW, SMALL),
                p("p3.3", LOW, SMALL),
                p("p3.4", LOW, MEDIUM),
                p("p4.1", MID, MEDIUM),
                p("p4.2", MID, SMALL),
                p("p4.3", MID, SMALL),
                p("p4.4", NEG, SMALL),
            ],
            {"node1"},
        ),
        id="non-overlapping lowest high priority, sum priorities, and number of pods",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, MEDIUM, 2),
                p("p1.2", MID, MEDIUM, 2),
                p("p2.1", MID, MEDIUM, 3),
                p("p2.2", MID, MEDIUM, 3),
                p("p3.1", MID, MEDIUM, 1),
                p("p3.2", MID, MEDIUM, 1),
            ],
            {"node2"},
        ),
        id="same priority, same number of victims, different start time for each node's pod",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", MID, MEDIUM, 4),
                p("p1.2", MID, MEDIUM, 2),
                p("p2.1", MID, MEDIUM, 5),
                p("p2.2", MID, MEDIUM, 1),
                p("p3.1", MID, MEDIUM, 3),
                p("p3.2", MID, MEDIUM, 6),
            ],
            {"node3"},
        ),
        id="same priority, same number of victims, different start time for all pods",
    ),
    pytest.param(
        SelectCase(
            ["node1", "node2", "node3"],
            make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE).obj(),
            [
                p("p1.1", LOW, MEDIUM, 4),
                p("p1.2", MID, MEDIUM, 2),
                p("p2.1", MID, MEDIUM, 6),
                p("p2.2", LOW, MEDIUM, 1),
                p("p3.1", LOW, MEDIUM, 3),
                p("p3.2", MID, MEDIUM, 5),
            ],
            {"node2"},
        ),
        id="different priority, same number of victims, different start time for all pods",
    ),
]


def evaluate(
    nodes: NodeColumns, plugins: list[object], preemptor: Pod, evaluator: Evaluator
) -> list[Candidate]:
    env = environment(nodes, plugins)
    state = run_pre_filters(plugins, preemptor, nodes)
    potential = np.arange(len(nodes), dtype=np.intp)
    return evaluator.dry_run(state, preemptor, env, potential, 0, len(nodes)).candidates


@pytest.mark.parametrize("case", SELECT_CASES)
@pytest.mark.parametrize("node_by_node", [False, True], ids=["all-at-once", "node-by-node"])
def test_select_best_candidate(case: SelectCase, node_by_node: bool) -> None:
    nodes = columns([node(n) for n in case.nodes], case.pods)
    plugins: list[object] = [FitFilter()]
    if node_by_node:
        plugins.append(NoopExtension())
    evaluator = Evaluator(offset=lambda n: 0, clock=lambda: 100.0)
    candidates = evaluate(nodes, plugins, case.preemptor, evaluator)
    best = pick_one_node_for_preemption(candidates, now=100.0)
    assert best is not None
    assert best.node_name in case.expected
    # The Evaluator's vectorised pick agrees with the object-level one.
    env = environment(nodes, plugins)
    state = run_pre_filters(plugins, case.preemptor, nodes)
    result, status = evaluator.preempt(
        state, case.preemptor, env, diagnosis_of(nodes, dict.fromkeys(case.nodes, Code(2)))
    )
    assert status.is_success()
    assert result is not None
    assert result.nominated_node == best.node_name


def victims(*spec: tuple[int, float | None]) -> list[Pod]:
    out = []
    for i, (priority, start) in enumerate(spec):
        b = make_pod(f"v{i}").priority(priority)
        if start is not None:
            b = b.start_time(start)
        out.append(b.obj())
    out.sort(key=lambda v: (-priority_of(v), v.status.start_time or 100.0))
    return out


PICK_CASES = [
    pytest.param([], None, id="no candidates"),
    pytest.param([Candidate("a", victims((5, 1.0)))], "a", id="a single candidate"),
    pytest.param(
        [Candidate("a", victims((1, 1.0)), 1), Candidate("b", victims((9, 1.0)), 0)],
        "b",
        id="fewest PDB violations first",
    ),
    pytest.param(
        [Candidate("a", victims((5, 1.0))), Candidate("b", victims((4, 1.0), (4, 1.0)))],
        "b",
        id="then the lowest highest-priority victim",
    ),
    pytest.param(
        [
            Candidate("a", victims((5, 1.0), (4, 1.0))),
            Candidate("b", victims((5, 1.0), (3, 1.0))),
        ],
        "b",
        id="then the smallest priority sum",
    ),
    pytest.param(
        [
            Candidate("a", victims((-5, 1.0), (-5, 1.0))),
            Candidate("b", victims((-5, 1.0))),
        ],
        "b",
        id="negative priorities are shifted: more victims never sum lower",
    ),
    pytest.param(
        [
            Candidate("a", victims((5, 1.0), (0, 1.0))),
            Candidate("b", victims((5, 1.0), (0, 1.0))),
            Candidate("c", victims((5, 2.0), (0, 1.0))),
        ],
        "c",
        id="then the latest start of the highest-priority victims",
    ),
    pytest.param(
        [Candidate("a", victims((5, None))), Candidate("b", victims((5, 50.0)))],
        "a",
        id="a victim that has not started counts as started now",
    ),
    pytest.param(
        [Candidate("a", victims((5, 1.0))), Candidate("b", victims((5, 1.0)))],
        "a",
        id="then the first candidate",
    ),
]


@pytest.mark.parametrize(("candidates", "expected"), PICK_CASES)
def test_pick_one_node_for_preemption(candidates: list[Candidate], expected: str | None) -> None:
    best = pick_one_node_for_preemption(candidates, now=100.0)
    assert (best.node_name if best else None) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param((10, 5.0), (1, 1.0), True, id="higher priority is more important"),
        pytest.param((1, 1.0), (1, 5.0), True, id="equal priority: the older pod"),
        pytest.param((1, 5.0), (1, 1.0), False, id="equal priority: the newer pod is less"),
        pytest.param((1, None), (1, 5.0), False, id="not started counts as now"),
    ],
)
def test_more_important_pod(
    a: tuple[int, float | None], b: tuple[int, float | None], expected: bool
) -> None:
    pa, pb = victims(a)[0], victims(b)[0]
    assert more_important_pod(pa, pb, now=100.0) is expected


# ------------------------------------------------------------------ custom selection
def label_is(key: str, value: str):
    return lambda victim, preemptor, nodes, row: victim.metadata.labels.get(key) == value


def on_node(name: str):
    return lambda victim, preemptor, nodes, row: nodes.names[row] == name


def preemptor_at_least(minimum: int):
    return lambda victim, preemptor, nodes, row: priority_of(preemptor) >= minimum


def victim_at_most(maximum: int):
    return lambda victim, preemptor, nodes, row: priority_of(victim) <= maximum


def labelled_pods() -> list[Pod]:
    return [
        make_pod("v1")
        .uid("v1")
        .label("preemptible", "no")
        .node("node1")
        .priority(MID)
        .req(LARGE)
        .start_time(EPOCH)
        .obj(),
        make_pod("v2")
        .uid("v2")
        .label("preemptible", "yes")
        .node("node2")
        .priority(MID)
        .req(LARGE)
        .start_time(EPOCH)
        .obj(),
        make_pod("v3")
        .uid("v3")
        .label("preemptible", "yes")
        .node("node3")
        .priority(LOW)
        .req(LARGE)
        .start_time(EPOCH)
        .obj(),
        make_pod("v4").uid("v4").node("node4").priority(LOW).req(LARGE).start_time(EPOCH).obj(),
    ]


def node1_pods(v1: Mapping[str, str]) -> list[Pod]:
    return [
        pod("v1", HIGH, "node1", v1),
        pod("v2", MID, "node1", SMALL),
        pod("v3", LOW, "node1", SMALL),
        pod("v4", MID, "node2", LARGE),
        pod("v5", LOW, "node3", LARGE),
    ]


def one_each() -> list[Pod]:
    return [
        pod("v1", HIGH, "node1", LARGE),
        pod("v2", MID, "node2", LARGE),
        pod("v3", LOW, "node3", LARGE),
    ]


FOUR = ["node1", "node2", "node3", "node4"]
THREE = ["node1", "node2", "node3"]

CUSTOM_CASES = [
    pytest.param(
        label_is("preemptible", "yes"),
        FOUR,
        HIGH,
        labelled_pods(),
        {"node2": ["v2"], "node3": ["v3"]},
        id="matching pod label: high priority",
    ),
    pytest.param(
        label_is("preemptible", "yes"),
        FOUR,
        MID,
        labelled_pods(),
        {"node3": ["v3"]},
        id="matching pod label: mid priority",
    ),
    pytest.param(
        label_is("preemptible", "yes"),
        FOUR,
        LOW,
        labelled_pods(),
        {},
        id="matching pod label: low priority",
    ),
    pytest.param(
        on_node("node1"),
        THREE,
        HIGH,
        node1_pods(MEDIUM),
        {"node1": ["v2", "v3"]},
        id="matching victim node: high priority",
    ),
    pytest.param(
        on_node("node1"),
        THREE,
        MID,
        node1_pods(SMALL),
        {"node1": ["v3"]},
        id="matching victim node: mid priority",
    ),
    pytest.param(
        on_node("node1"), THREE, LOW, node1_pods(SMALL), {}, id="matching victim node: low priority"
    ),
    pytest.param(
        preemptor_at_least(HIGH),
        THREE,
        HIGH,
        one_each(),
        {"node2": ["v2"], "node3": ["v3"]},
        id="only high preemptors: high",
    ),
    pytest.param(
        preemptor_at_least(HIGH), THREE, MID, one_each(), {}, id="only high preemptors: mid"
    ),
    pytest.param(
        victim_at_most(MID),
        THREE,
        HIGH,
        one_each(),
        {"node2": ["v2"], "node3": ["v3"]},
        id="only victims at or below mid",
    ),
]


@pytest.mark.parametrize(("eligible", "names", "priority", "pods", "expected"), CUSTOM_CASES)
def test_custom_is_eligible_pod(
    eligible: object,
    names: list[str],
    priority: int,
    pods: list[Pod],
    expected: dict[str, list[str]],
) -> None:
    nodes = columns([node(n) for n in names], pods)
    evaluator = Evaluator(offset=lambda n: 0, is_eligible_pod=eligible)  # type: ignore[arg-type]
    preemptor = make_pod("p").uid("p").priority(priority).req(LARGE).obj()
    candidates = evaluate(nodes, [FitFilter()], preemptor, evaluator)
    got = {c.node_name: [v.metadata.name for v in c.victims] for c in candidates}
    assert got == expected


# ------------------------------------------------------------------------ eligibility
def terminating_low(name: str = "p1") -> Pod:
    return make_pod(name).uid(name).priority(LOW).node("node1").terminating().obj()


ELIGIBILITY_CASES = [
    pytest.param(
        make_pod("p").priority(HIGH).nominated_node_name("node1").obj(),
        [terminating_low()],
        {"node1": Code.UNSCHEDULABLE_AND_UNRESOLVABLE},
        True,
        id="nominated node now unresolvable: preempt again",
    ),
    pytest.param(make_pod("p").priority(HIGH).obj(), [], {}, True, id="no nominated node"),
    pytest.param(
        make_pod("p").priority(HIGH).preemption_policy("Never").obj(),
        [],
        {},
        False,
        id="preemptionPolicy Never",
    ),
    pytest.param(
        make_pod("p").priority(HIGH).nominated_node_name("node1").obj(),
        [terminating_low()],
        {"node1": Code.UNSCHEDULABLE},
        False,
        id="a lower-priority victim is still terminating on the nominated node",
    ),
    pytest.param(
        make_pod("p").priority(HIGH).nominated_node_name("node1").obj(),
        [make_pod("p1").priority(HIGH).node("node1").terminating().obj()],
        {"node1": Code.UNSCHEDULABLE},
        True,
        id="a terminating pod of equal priority is no victim of this pod",
    ),
    pytest.param(
        make_pod("p").priority(HIGH).nominated_node_name("gone").obj(),
        [terminating_low()],
        {"node1": Code.UNSCHEDULABLE},
        True,
        id="the nominated node no longer exists",
    ),
]


@pytest.mark.parametrize(("preemptor", "pods", "codes", "expected"), ELIGIBILITY_CASES)
def test_pod_eligible_to_preempt_others(
    preemptor: Pod, pods: list[Pod], codes: dict[str, Code], expected: bool
) -> None:
    nodes = columns([node("node1")], pods)
    evaluator = Evaluator(offset=lambda n: 0)
    eligible, message = evaluator.eligible(
        preemptor, nodes, rejection_codes(diagnosis_of(nodes, codes), len(nodes))
    )
    assert eligible is expected
    assert bool(message) is (not expected)
