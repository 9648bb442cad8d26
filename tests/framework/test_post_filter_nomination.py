"""PostFilter answers that clear the pod's nomination (upstream NominatingInfo ModeOverride with
an empty node): DefaultPreemption returns PostFilterResult(nominated_node="") with an
Unschedulable status when preemption cannot help, and the pod's nominatedNodeName is cleared.
An answer without a nomination (nominated_node None) leaves it as it is (ModeNoop)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.dryrun import SCHEDULED, UNSCHEDULABLE, run_dry
from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle import scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import Diagnosis, PostFilterResult
from scheduling.framework.status import Code, Status
from shared.models import Node, Pod
from shared.models.manifest import Manifests
from tests.builders import make_node, make_pod, make_priority_class
from tests.framework import fakes


@dataclass
class Answering(fakes.Fake):
    """A PostFilter plugin returning exactly this answer, with an Unschedulable status."""

    answer: PostFilterResult | None = None

    def post_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        self.record("post_filter")
        return self.answer, Status.unschedulable(f"{self.name} cannot help")


def pod() -> Pod:
    return make_pod("p").uid("p").nominated_node_name("n1").obj()


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        pytest.param([PostFilterResult("")], "", id="empty-nomination-clears"),
        pytest.param([None], None, id="no-answer-keeps"),
        pytest.param([PostFilterResult()], None, id="answer-without-nomination-keeps"),
        pytest.param(
            [PostFilterResult(""), PostFilterResult()], "", id="a-later-noop-does-not-undo-a-clear"
        ),
        pytest.param(
            [PostFilterResult(""), None], "", id="a-later-missing-answer-does-not-undo-a-clear"
        ),
        pytest.param([None, PostFilterResult("")], "", id="a-later-clear-counts"),
    ],
)
def test_unschedulable_post_filter_answers(
    answers: list[PostFilterResult | None], expected: str | None
) -> None:
    plugins = [Answering(f"P{i}", answer=answer) for i, answer in enumerate(answers)]
    fw = fakes.framework({"post_filter": plugins})
    result, status = fw.run_post_filter_plugins(CycleState(), pod(), fw.handle.nodes, Diagnosis())
    assert (status.code, status.plugin) == (Code.UNSCHEDULABLE, "P0")
    assert (result.nominated_node if result is not None else None) == expected


@pytest.mark.parametrize(
    ("answer", "nominating", "nominated"),
    [
        pytest.param(PostFilterResult(""), True, "", id="cleared"),
        pytest.param(None, False, None, id="left-alone"),
    ],
)
def test_scheduling_cycle_reports_a_cleared_nomination(
    answer: PostFilterResult | None, nominating: bool, nominated: str | None
) -> None:
    cluster = fakes.cluster_of(["n1"])
    fw = fakes.framework(
        {
            "filter": [fakes.Filter("F", reject={"n1"})],
            "post_filter": [Answering("Preempt", answer=answer)],
        },
        cluster,
    )
    outcome = scheduling_cycle(fw, CycleState(), pod(), cluster.nodes, cluster.for_attempt())
    assert outcome.status.code == Code.UNSCHEDULABLE
    assert outcome.nominating is nominating
    assert (outcome.nominated_node if outcome.nominating else None) == nominated


def node(name: str, cpu: str) -> Node:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110).obj()


def test_dry_run_clears_the_nomination_when_preemption_can_no_longer_help() -> None:
    # Pass 1: vip (preemptionPolicy Never) cannot preempt; mid preempts v and is nominated
    # to n1. Pass 2: vip takes n1 (mid's lower-priority nomination does not hold room
    # against it); mid no longer fits and DefaultPreemption finds nothing to evict, so it
    # answers PostFilterResult("") and mid's nomination is cleared.
    manifests = Manifests(
        nodes=[node("n1", "2")],
        pods=[
            make_pod("v").priority_class("low").req(cpu="2").node("n1").obj(),
            make_pod("vip").priority_class("never").req(cpu="2").obj(),
            make_pod("mid").priority_class("mid").req(cpu="1").obj(),
        ],
        priority_classes=[
            make_priority_class("low", 1),
            make_priority_class("mid", 10),
            make_priority_class("never", 100, preemption_policy="Never"),
        ],
    )
    report = run_dry(manifests, seed=1)
    vip, mid = report.pods
    assert (vip.status, vip.node, vip.victims) == (SCHEDULED, "n1", [])
    assert (mid.status, mid.victims) == (UNSCHEDULABLE, ["default/v"])
    assert mid.nominated_node is None
    assert "preemption: 0/1 nodes are available" in mid.message
