"""services.queue.quota.fair_preemption: preemption under fair sharing, table-driven with Kueue's
own
cases (pkg/scheduler/preemption/preemption_test.go, TestFairPreemptions: the same four
ClusterQueues, admitted workloads, incoming workload and expected victims), with Kueue's
default strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare)."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.quota.cohorts import cohorts_of
from services.queue.quota.fair_preemption import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    fair_plan,
)
from services.queue.quota.preemption import Candidate, Preemptor, candidate_queues
from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue, quota_value

POLICY = (
    "withinClusterQueue: LowerPriority, reclaimWithinCohort: Any, "
    "borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: -3}"
)


def _queue(name: str, nominal: int, preemption: str) -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: all
  namespaceSelector: {{}}
  preemption: {{{preemption}}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: {nominal}}}]}}]"""


QUEUES = [
    q
    for q in load_manifest_text(
        "\n---\n".join([_queue(n, 3, POLICY) for n in "abc"] + [_queue("preemptible", 0, "")])
    ).queue_objects
    if isinstance(q, ClusterQueue)
]
BY_NAME = {q.metadata.name: q for q in QUEUES}
CPU = ("default", "cpu")


def wl(name: str, queue: str, cpu: str = "1", prio: int = 0) -> Candidate:
    return Candidate(name, queue, prio, 0.0, 0.0, {CPU: quota_value("cpu", cpu)})


def units(queue: str, *names: str) -> list[Candidate]:
    return [wl(n, queue) for n in names]


CASES: list[Any] = [
    pytest.param(
        units("a", "a1", "a2", "a3")
        + units("b", *(f"b{i}" for i in range(1, 6)))
        + units("c", "c1"),
        ("c", "1"),
        {"b1"},
        id="reclaim nominal from user using the most",
    ),
    pytest.param(
        [wl("a1", "a", "3"), wl("a2", "a", "1"), wl("b1", "b", "2"), wl("b2", "b", "3")],
        ("c", "3"),
        {"a1"},
        id="can reclaim from queue using less, if taking from the most isn't enough",
    ),
    pytest.param(
        units("a", "a1", "a2", "a3")
        + units("b", *(f"b{i}" for i in range(1, 6)))
        + units("c", "c1"),
        ("a", "1"),
        {"b1"},
        id="reclaim borrowable quota from user using the most",
    ),
    pytest.param(
        [
            wl("a1", "a", "0.5"),
            wl("a2", "a", "0.5"),
            wl("a3", "a", "3"),
            wl("b1", "b", "0.5"),
            wl("b2", "b", "0.5"),
            wl("b3", "b", "3"),
        ],
        ("c", "2"),
        {"a1", "b1"},
        id="preempt one from each CQ borrowing",
    ),
    pytest.param(
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3") + units("c", "c1", "c2", "c3"),
        ("c", "1"),
        set(),
        id="can't preempt when everyone under nominal",
    ),
    pytest.param(
        units("a", "a1", "a2", "a3") + units("b", *(f"b{i}" for i in range(1, 6))),
        ("a", "2"),
        set(),
        id="can't preempt when it would switch the imbalance",
    ),
    pytest.param(
        [
            wl("a1_low", "a", prio=-1),
            wl("a2_low", "a", prio=-1),
            *units("a", "a3", "a4"),
            *units("b", *(f"b{i}" for i in range(1, 6))),
        ],
        ("a", "2"),
        {"a1_low", "a2_low"},
        id="can preempt lower priority workloads from same CQ",
    ),
    pytest.param(
        [
            wl("a_low", "a", prio=-1),
            *units("a", "a2", "a3"),
            *units("b", *(f"b{i}" for i in range(1, 7))),
        ],
        ("a", "2"),
        {"a_low", "b1"},
        id="can preempt a combination of same CQ and highest user",
    ),
    pytest.param(
        [wl("b1", "b", "9")],
        ("a", "2"),
        {"b1"},
        id="preempt huge workload if there is no other option, as long as the target CQ "
        "gets a lower share",
    ),
    pytest.param(
        [wl("a1", "a", "2"), wl("b1", "b", "7")],
        ("a", "5"),
        set(),
        id="can't preempt huge workload if the incoming is also huge",
    ),
    pytest.param(
        [wl("b1", "b", "2"), wl("b2", "b", "2"), wl("b3", "b", "3")],
        ("a", "6"),
        set(),
        id="can't preempt 2 smaller workloads if the incoming is huge",
    ),
    pytest.param(
        [
            wl("a1_low", "b", "2", -1),
            wl("a2_low", "b", "1", -1),
            wl("b1", "b", "3"),
            wl("b2", "b", "3"),
        ],
        ("a", "4"),
        {"a1_low", "b1"},
        id="preempt from target and others even if over nominal",
    ),
    pytest.param(
        [wl("b1", "b", "2"), wl("b2", "b", "1"), wl("b3", "b", "2"), wl("c1", "c", "1")],
        ("a", "3.5"),
        {"b2"},
        id="prefer to preempt workloads that don't make the target CQ have the biggest share",
    ),
    pytest.param(
        [wl("b1", "b", "2"), wl("b2", "b", "2.5"), wl("c1", "c", "2"), wl("c2", "c", "2.5")],
        ("a", "3.5"),
        {"b1", "c1"},
        id="preempt from different cluster queues if the end result has a smaller max share",
    ),
    pytest.param(
        [wl("a1", "a", "3.5"), wl("b2", "b", "2.5"), wl("c2", "c", "2.5")],
        ("b", "2"),
        set(),
        id="scenario above does not flap",
    ),
    pytest.param(
        [wl("b1", "b", "3"), wl("b2", "b", "3"), wl("c1", "c", "3")],
        ("a", "4"),
        set(),
        id="cannot preempt if it would make the candidate CQ go under nominal after "
        "preempting one element",
    ),
    pytest.param(
        units("a", "a1", "a2", "a3")
        + units("b", "b1", "b2", "b3")
        + [wl(f"preemptible{i}", "preemptible", prio=-3) for i in (1, 2, 3)],
        ("a", "2"),
        {"preemptible1", "preemptible2"},
        id="workloads under priority threshold can always be preempted",
    ),
]


@pytest.mark.parametrize("prefiltered", [False, True], ids=["all candidates", "prefiltered"])
@pytest.mark.parametrize(("admitted", "incoming", "victims"), CASES)
def test_fair_preemptions(
    admitted: list[Candidate], incoming: tuple[str, str], victims: set[str], prefiltered: bool
) -> None:
    """`prefiltered`: as admission calls it, with candidates only from `candidate_queues`
    (fair sharing's, not classical preemption's)."""
    (cohort,) = cohorts_of(QUEUES).values()
    for c in admitted:
        usage = cohort.usage.setdefault(c.queue, {})
        usage[CPU] = usage.get(CPU, 0) + c.usage[CPU]
    queue, cpu = incoming
    request = {CPU: quota_value("cpu", cpu)}
    needs = frozenset(fr for fr, a in request.items() if a > cohort.available(queue, fr))
    if prefiltered:
        queues = candidate_queues(
            cohort, BY_NAME[queue].spec.preemption, queue, needs, classical=False
        )
        admitted = [c for c in admitted if c.queue in queues]
    found = fair_plan(
        cohort,
        BY_NAME[queue].spec.preemption,
        Preemptor(queue, 0, 0.0, {"cpu": request[CPU]}),
        admitted,
        (request, needs),
        strategies=(LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
    )
    got = set() if found is None else {t.candidate.key for t in found.targets}
    assert got == victims
