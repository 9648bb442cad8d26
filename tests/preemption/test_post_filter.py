"""Upstream TestPostFilter and TestPreempt, ported: the whole PostFilter decision."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from scheduling.framework.extender import ExtenderError, Victims
from scheduling.framework.interfaces import PostFilterResult
from scheduling.framework.status import Code, Status
from scheduling.plugins.defaultpreemption import DefaultPreemption
from shared.models import Node, Pod, PodDisruptionBudget
from tests.builders import label_selector, make_pdb, make_pod
from tests.preemption.fakes import (
    ErrorExtension,
    FitFilter,
    SpreadFilter,
    all_unschedulable,
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
    ONE_POD,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    node,
    topology_node,
)

U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NODE_RES = {"cpu": "200m", "memory": "400"}
VIOLATING = "test.kubernetes.io/is-violating-pdb"


def pod(
    name: str,
    priority: int | None = None,
    node_name: str = "",
    req: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    **more_labels: str,
) -> Pod:
    b = make_pod(name).uid(name).labels(labels, **more_labels)
    if priority is not None:
        b = b.priority(priority)
    if node_name:
        b = b.node(node_name)
    if req:
        b = b.req(req)
    return b.obj()


class FakeExtender:
    """Upstream tf.FakeExtender for preemption: keeps candidates its predicate accepts."""

    def __init__(
        self,
        predicate: Callable[[str], bool] | None,
        *,
        ignorable: bool = False,
        interested: bool = True,
    ) -> None:
        self.predicate = predicate
        self.ignorable = ignorable
        self.interested = interested

    @property
    def name(self) -> str:
        return "FakeExtender"

    def is_ignorable(self) -> bool:
        return self.ignorable

    def supports_preemption(self) -> bool:
        return True

    def is_interested(self, pod: Pod) -> bool:
        return self.interested

    def process_preemption(
        self,
        pod: Pod,
        victims: Mapping[str, Victims],
        pods_on_node: Mapping[str, Sequence[Pod]],
    ) -> dict[str, Victims]:
        if self.predicate is None:
            raise ExtenderError("some error")
        return {name: v for name, v in victims.items() if self.predicate(name)}


def node1_only(name: str) -> bool:
    return name == "node1"


@dataclass
class PostFilterCase:
    pod: Pod
    pods: list[Pod]
    nodes: list[Node]
    statuses: dict[str, Code] | None
    want_node: str | None
    """None: no result; "": a result that clears the nominated node."""
    want_code: Code
    want_message: str = ""
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    extenders: list[object] = field(default_factory=list)
    plugins: Callable[[], list[object]] = lambda: [FitFilter(), ErrorExtension()]


POST_FILTER_CASES = [
    pytest.param(
        PostFilterCase(
            pod("p", HIGH),
            [pod("p1", node_name="node1")],
            [node("node1", ONE_POD)],
            {"node1": U},
            "node1",
            Code.SUCCESS,
        ),
        id="pod with higher priority can be made schedulable",
    ),
    pytest.param(
        PostFilterCase(
            pod("p"),
            [pod("p1", node_name="node1")],
            [node("node1", ONE_POD)],
            {"node1": U},
            "",
            U,
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        id="pod with tied priority is still unschedulable",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH),
            [pod("p1", node_name="node1")],
            [node("node1", ONE_POD)],
            {"node1": UU},
            "",
            U,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="preemption should respect filteredNodesStatuses",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH),
            [pod("p1", node_name="node1")],
            [node("node1", ONE_POD)],
            {},
            "",
            U,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="an absent status means UnschedulableAndUnresolvable",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", MID),
            [pod("p1", HIGH, "node1"), pod("p2", LOW, "node2")],
            [node("node1", ONE_POD), node("node2", ONE_POD)],
            {"node1": U, "node2": U},
            "node2",
            Code.SUCCESS,
        ),
        id="pod can be made schedulable on one node",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", VERY_HIGH),
            [
                pod("p1", HIGH, "node1", labels={VIOLATING: "non-violating"}),
                pod("p2", LOW, "node1", labels={VIOLATING: "violating"}),
                pod("p3", MID, "node2", labels={VIOLATING: "violating"}),
            ],
            [node("node1", ONE_POD), node("node2", ONE_POD)],
            {"node1": U, "node2": U},
            "node2",
            Code.SUCCESS,
            pdbs=[
                make_pdb(
                    "violating-pdb", label_selector({VIOLATING: "violating"}), min_available="100%"
                ),
                make_pdb(
                    "non-violating-pdb",
                    label_selector({VIOLATING: "non-violating"}),
                    min_available="0",
                    disruptions_allowed=2**31 - 1,
                ),
            ],
        ),
        id="pod can be made schedulable on minHighestPriority node",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH),
            [pod("p1", node_name="node1"), pod("p2", node_name="node2")],
            [node("node1", ONE_POD), node("node2", ONE_POD)],
            {"node1": U, "node2": U},
            "node1",
            Code.SUCCESS,
            extenders=[FakeExtender(node1_only)],
        ),
        id="preemption result filtered out by extenders",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node_name="node1"), pod("p2", node_name="node2")],
            [node("node1", NODE_RES), node("node2", NODE_RES)],
            {"node1": U, "node2": U},
            "",
            U,
            "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
        ),
        id="no candidate nodes found, no enough resource after removing low priority pods",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH, req=LARGE),
            [
                pod("p1", HIGH, "node1"),
                pod("p2", node_name="node2"),
                pod("p3", HIGH, "node3"),
            ],
            [node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
            {"node1": U, "node2": U, "node3": U},
            "",
            U,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims "
            "found for incoming pod.",
        ),
        id="no candidate nodes found with mixed reasons",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node_name="node1"), pod("p2", node_name="node2")],
            [node(f"node{i}", NODE_RES) for i in range(1, 5)],
            {"node1": U, "node2": U, "node4": UU},
            "",
            U,
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not "
            "helpful for scheduling.",
        ),
        id="no candidate nodes found, 2 unresolvable nodes and 2 without enough cpu",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node_name="node1")],
            [node("node1", LARGE, error="true")],
            {"node1": U},
            None,
            Code.ERROR,
            'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove '
            "pod: p",
        ),
        id="only one node but failed with TestPlugin",
    ),
    pytest.param(
        PostFilterCase(
            pod("p", HIGH, req=LARGE),
            [pod("p1", node_name="node1"), pod("p2", node_name="node2", req=MEDIUM)],
            [node("node1", LARGE, error="true"), node("node2", LARGE)],
            {"node1": U, "node2": U},
            "node2",
            Code.SUCCESS,
        ),
        id="one failed with TestPlugin and the other pass",
    ),
]


def post_filter(case: PostFilterCase) -> tuple[PostFilterResult | None, Status]:
    nodes = columns(case.nodes, case.pods)
    plugins = case.plugins()
    env = environment(nodes, plugins, pdbs=case.pdbs, extenders=case.extenders)
    plugin = DefaultPreemption(offset=lambda n: 0, environment=lambda _: env)
    state = run_pre_filters(plugins, case.pod, nodes)
    diagnosis = (
        all_unschedulable(nodes) if case.statuses is None else diagnosis_of(nodes, case.statuses)
    )
    return plugin.post_filter(state, case.pod, nodes, diagnosis)


@pytest.mark.parametrize("case", POST_FILTER_CASES)
def test_post_filter(case: PostFilterCase) -> None:
    result, status = post_filter(case)
    assert status.code == case.want_code
    if case.want_message:
        assert status.message() == case.want_message
    if case.want_node is None:
        assert result is None
    else:
        assert result is not None
        assert result.nominated_node == case.want_node


@dataclass
class PreemptCase:
    pod: Pod
    pods: list[Pod]
    nodes: list[Node]
    want_node: str | None
    want_victims: list[str]
    extenders: list[object] = field(default_factory=list)
    plugins: Callable[[], list[object]] = lambda: [FitFilter()]


def basic_pods() -> list[Pod]:
    return [
        pod("p1.1", LOW, "node1", SMALL),
        pod("p1.2", LOW, "node1", SMALL),
        pod("p2.1", HIGH, "node2", LARGE),
        pod("p3.1", MID, "node3", MEDIUM),
    ]


def extender_pods() -> list[Pod]:
    return [
        pod("p1.1", MID, "node1", SMALL),
        pod("p1.2", LOW, "node1", SMALL),
        pod("p2.1", MID, "node2", LARGE),
    ]


THREE = [node("node1"), node("node2"), node("node3")]


def preemptor(policy: str | None = None) -> Pod:
    b = make_pod("p").uid("p").priority(HIGH).req(VERY_LARGE)
    if policy:
        b = b.preemption_policy(policy)
    return b.obj()


def spread_preemptor() -> Pod:
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


PREEMPT_CASES = [
    pytest.param(
        PreemptCase(
            preemptor("PreemptLowerPriority"), basic_pods(), THREE, "node1", ["p1.1", "p1.2"]
        ),
        id="basic preemption logic",
    ),
    pytest.param(
        PreemptCase(
            spread_preemptor(),
            [
                pod("p-a1", HIGH, "node-a", foo=""),
                pod("p-a2", HIGH, "node-a", foo=""),
                pod("p-b1", LOW, "node-b", foo=""),
                pod("p-x1", HIGH, "node-x", foo=""),
                pod("p-x2", HIGH, "node-x", foo=""),
            ],
            [topology_node(s) for s in ("node-a/zone1", "node-b/zone1", "node-x/zone2")],
            "node-b",
            ["p-b1"],
            plugins=lambda: [SpreadFilter()],
        ),
        id="preemption for topology spread constraints",
    ),
    pytest.param(
        PreemptCase(
            preemptor(),
            [
                pod("p1.1", MID, "node1", SMALL),
                pod("p1.2", LOW, "node1", SMALL),
                pod("p2.1", MID, "node3", LARGE),
            ],
            THREE,
            "node1",
            ["p1.1", "p1.2"],
            extenders=[FakeExtender(lambda n: True), FakeExtender(node1_only)],
        ),
        id="Scheduler extenders allow only node1, otherwise node3 would have been chosen",
    ),
    pytest.param(
        PreemptCase(
            preemptor(),
            extender_pods(),
            THREE,
            None,
            [],
            extenders=[FakeExtender(lambda n: False)],
        ),
        id="Scheduler extenders do not allow any preemption",
    ),
    pytest.param(
        PreemptCase(
            preemptor(),
            extender_pods(),
            THREE,
            "node1",
            ["p1.1", "p1.2"],
            extenders=[FakeExtender(None, ignorable=True), FakeExtender(node1_only)],
        ),
        id="one extender allows only node1, the other returns error but ignorable",
    ),
    pytest.param(
        PreemptCase(
            preemptor(),
            extender_pods(),
            [node("node1"), node("node2")],
            "node2",
            ["p2.1"],
            extenders=[FakeExtender(node1_only, interested=False), FakeExtender(lambda n: True)],
        ),
        id="one extender allows only node1 but is not interested in the pod",
    ),
    pytest.param(
        PreemptCase(preemptor("Never"), basic_pods(), THREE, None, []),
        id="no preempting in pod",
    ),
    pytest.param(
        PreemptCase(preemptor(), basic_pods(), THREE, "node1", ["p1.1", "p1.2"]),
        id="PreemptionPolicy is nil",
    ),
]


@pytest.mark.parametrize("case", PREEMPT_CASES)
def test_preempt(case: PreemptCase) -> None:
    nodes = columns(case.nodes, case.pods)
    plugins = case.plugins()
    env = environment(nodes, plugins, extenders=case.extenders)
    plugin = DefaultPreemption(offset=lambda n: 0, environment=lambda _: env)
    state = run_pre_filters(plugins, case.pod, nodes)
    result, status = plugin.post_filter(state, case.pod, nodes, all_unschedulable(nodes))
    assert status.code in (Code.SUCCESS, Code.UNSCHEDULABLE), status
    if case.want_node is None:
        assert result is None or not result.nominated_node
        assert not (result.victims if result else [])
    else:
        assert result is not None
        assert result.nominated_node == case.want_node
        assert sorted(p.metadata.name for p in result.victims) == case.want_victims
