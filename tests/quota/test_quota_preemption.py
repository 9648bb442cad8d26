"""services.queue.quota.preemption: which admitted workloads a waiting one evicts, table-driven with
Kueue's own cases (pkg/scheduler/preemption/preemption_test.go, TestPreemption: the same
ClusterQueues (names in DNS form: a-standard for a_standard), workloads and expected targets
with their reasons). Cases whose flavor
assignment the Kueue test forces by hand, instead of computing it, are left out."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue.quota.cohorts import Cohort, cohorts_of
from services.queue.quota.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    Candidate,
    Preemptor,
    candidate_queues,
    plan,
    preemption_flavors,
)
from shared.models import load_manifest_text
from shared.models.kueue import ClusterQueue, quota_value


def _queue(
    name: str,
    cohort: str,
    cpu: tuple[Any, ...],
    memory: tuple[Any, ...] | None = None,
    preemption: str = "",
) -> str:
    """One ClusterQueue with a flavor "default": (nominal[, borrowingLimit[, lendingLimit]])."""

    def limits(resource: str, values: tuple[Any, ...]) -> str:
        keys = ("nominalQuota", "borrowingLimit", "lendingLimit")
        fields = ", ".join(f"{k}: {v}" for k, v in zip(keys, values, strict=False) if v != "")
        return f"{{name: {resource}, {fields}}}"

    resources = [limits("cpu", cpu)] + ([limits("memory", memory)] if memory else [])
    covered = "[cpu, memory]" if memory else "[cpu]"
    return f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  cohort: "{cohort}"
  namespaceSelector: {{}}
  preemption: {{{preemption}}}
  resourceGroups:
  - coveredResources: {covered}
    flavors: [{{name: default, resources: [{", ".join(resources)}]}}]"""


LOW = "withinClusterQueue: LowerPriority, reclaimWithinCohort: LowerPriority"
BORROW = "borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 0}"
QUEUES: list[ClusterQueue] = [
    q
    for q in load_manifest_text(
        "\n---\n".join(
            [
                _queue("standalone", "", (6,), None, "withinClusterQueue: LowerPriority"),
                _queue("c1", "cohort", (6, 6), ("3Gi", "3Gi"), LOW),
                _queue("c2", "cohort", (6, 6), ("3Gi", "3Gi"), "reclaimWithinCohort: Any"),
                _queue("d1", "cohort-no-limits", (6,), ("3Gi",), LOW),
                _queue("d2", "cohort-no-limits", (6,), ("3Gi",), "reclaimWithinCohort: Any"),
                _queue("l1", "legion", (6, 12), ("3Gi", "6Gi"), LOW),
                _queue(
                    "prevent-starvation",
                    "",
                    (6,),
                    None,
                    "withinClusterQueue: LowerOrNewerEqualPriority",
                ),
                _queue(
                    "a-standard",
                    "with-shared-cq",
                    (1, 12),
                    None,
                    f"reclaimWithinCohort: LowerPriority, {BORROW}",
                ),
                _queue(
                    "b-standard",
                    "with-shared-cq",
                    (1, 12),
                    None,
                    f"withinClusterQueue: LowerPriority, reclaimWithinCohort: Any, {BORROW}",
                ),
                _queue(
                    "a-best-effort",
                    "with-shared-cq",
                    (1, 12),
                    None,
                    f"reclaimWithinCohort: LowerPriority, {BORROW}",
                ),
                _queue(
                    "b-best-effort",
                    "with-shared-cq",
                    (0, 13),
                    None,
                    f"reclaimWithinCohort: LowerPriority, {BORROW}",
                ),
                _queue("shared", "with-shared-cq", (10,)),
                _queue("lend1", "cohort-lend", (6, "", 4), None, LOW),
                _queue("lend2", "cohort-lend", (6, "", 2), None, LOW),
            ]
        )
    ).queue_objects
    if isinstance(q, ClusterQueue)
]
BY_NAME = {q.metadata.name: q for q in QUEUES}


def wl(
    name: str, queue: str, prio: int = 0, *, at: float = 0.0, created: float = 0.0, **req: str
) -> Candidate:
    """An admitted workload charged to flavor "default"."""
    usage = {("default", r): quota_value(r, q) for r, q in req.items()}
    return Candidate(name, queue, prio, at, created, usage)


def cohort_with(queue: str, admitted: list[Candidate]) -> Cohort:
    cohort = next(c for c in cohorts_of(QUEUES).values() if queue in c.queues)
    for c in admitted:
        usage = cohort.usage.setdefault(c.queue, {})
        for fr, amount in c.usage.items():
            usage[fr] = usage.get(fr, 0) + amount
    return cohort


CASES: list[Any] = [
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="2"), wl("mid", "standalone", cpu="2"),
         wl("high", "standalone", 1, cpu="2")],
        (1, 0.0, {"cpu": "2"}),
        {("low", IN_CLUSTER_QUEUE)},
        id="preempt lowest priority",
    ),
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="2"), wl("mid", "standalone", cpu="2"),
         wl("high", "standalone", 1, cpu="2")],
        (1, 0.0, {"cpu": "3"}),
        {("low", IN_CLUSTER_QUEUE), ("mid", IN_CLUSTER_QUEUE)},
        id="preempt multiple",
    ),
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="3"), wl("mid", "standalone", cpu="3")],
        (-1, 0.0, {"cpu": "1"}),
        None,
        id="no preemption for low priority",
    ),
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="3"), wl("mid", "standalone", cpu="3")],
        (0, 0.0, {"cpu": "4"}),
        None,
        id="not enough low priority workloads",
    ),
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="1"), wl("mid", "standalone", cpu="1"),
         wl("high", "standalone", 1, cpu="3")],
        (1, 0.0, {"cpu": "2"}),
        {("low", IN_CLUSTER_QUEUE)},
        id="some free quota, preempt low priority",
    ),
    pytest.param(
        "standalone",
        [wl("low", "standalone", -1, cpu="1"), wl("mid", "standalone", cpu="2"),
         wl("high", "standalone", 1, cpu="3")],
        (1, 0.0, {"cpu": "2"}),
        {("mid", IN_CLUSTER_QUEUE)},
        id="minimal set excludes low priority",
    ),
    pytest.param(
        "c1",
        [wl("c1-low", "c1", -1, cpu="3"), wl("c2-mid", "c2", cpu="3"),
         wl("c2-high", "c2", 1, cpu="6")],
        (1, 0.0, {"cpu": "3"}),
        {("c2-mid", IN_COHORT_RECLAMATION)},
        id="reclaim quota from borrower",
    ),
    pytest.param(
        "c1",
        [wl("c1-low", "c1", -1, cpu="3", memory="3Gi"), wl("c2-mid", "c2", cpu="3"),
         wl("c2-high", "c2", 1, cpu="6")],
        (1, 0.0, {"cpu": "3", "memory": "0"}),
        {("c2-mid", IN_COHORT_RECLAMATION)},
        id="reclaim quota if workload requests 0 resources for a resource at nominal quota",
    ),
    pytest.param(
        "c1",
        [wl("c1-high", "c1", 1, cpu="4"), wl("c2-low-1", "c2", -1, cpu="4")],
        (1, 0.0, {"cpu": "4"}),
        set(),
        id="no workloads borrowing (it fits by borrowing: nothing to evict)",
    ),
    pytest.param(
        "c1",
        [wl("c1-high", "c1", 1, cpu="4"), wl("c2-low-1", "c2", -1, cpu="4"),
         wl("c2-low-2", "c2", -1, cpu="4")],
        (1, 0.0, {"cpu": "4"}),
        None,
        id="not enough workloads borrowing",
    ),
    pytest.param(
        "c1",
        [wl("c1-low", "c1", -1, cpu="4"), wl("c2-low-1", "c2", -1, cpu="4"),
         wl("c2-high-2", "c2", 1, cpu="4")],
        (1, 0.0, {"cpu": "4", "memory": "5Gi"}),
        {("c1-low", IN_CLUSTER_QUEUE)},
        id="preempting locally and borrowing other resources in cohort, without cohort candidates",
    ),
    pytest.param(
        "c1",
        [wl("c1-med", "c1", 0, cpu="4"), wl("c1-low", "c1", -1, cpu="4"),
         wl("c2-low-1", "c2", -1, cpu="4")],
        (1, 0.0, {"cpu": "4"}),
        {("c1-low", IN_CLUSTER_QUEUE)},
        id="preempting locally and borrowing same resource in cohort",
    ),
    pytest.param(
        "d1",
        [wl("d1-med", "d1", 0, cpu="4"), wl("d1-low", "d1", -1, cpu="4"),
         wl("d2-low-1", "d2", -1, cpu="4")],
        (1, 0.0, {"cpu": "4"}),
        {("d1-low", IN_CLUSTER_QUEUE)},
        id="preempting locally and borrowing same resource in cohort; no borrowing limit",
    ),
    pytest.param(
        "c1",
        [wl("c1-med", "c1", 0, cpu="4"), wl("c2-low-1", "c2", -1, cpu="5"),
         wl("c2-low-2", "c2", -1, cpu="1"), wl("c2-low-3", "c2", -1, cpu="1")],
        (1, 0.0, {"cpu": "2", "memory": "5Gi"}),
        {("c1-med", IN_CLUSTER_QUEUE)},
        id="preempting locally and borrowing other resources in cohort, with cohort candidates",
    ),
    pytest.param(
        "l1",
        [wl("l1-med", "l1", 0, cpu="4"), wl("l1-low", "l1", -1, cpu="2")],
        (1, 0.0, {"cpu": "4"}),
        {("l1-med", IN_CLUSTER_QUEUE)},
        id="preempting locally and not borrowing same resource in 1-queue cohort",
    ),
    pytest.param(
        "c1",
        [wl("c1", "c1", cpu="2"), wl("c2-1", "c2", cpu="4"), wl("c2-2", "c2", cpu="4")],
        (0, 0.0, {"cpu": "4"}),
        None,
        id="do not reclaim borrowed quota from same priority for LowerPriority",
    ),
    pytest.param(
        "c2",
        [wl("c1-1", "c1", cpu="4"), wl("c1-2", "c1", 1, cpu="4"), wl("c2", "c2", cpu="2")],
        (0, 0.0, {"cpu": "4"}),
        {("c1-1", IN_COHORT_RECLAMATION)},
        id="reclaim borrowed quota from same priority for Any",
    ),
    pytest.param(
        "c1",
        [wl("c1-low", "c1", -1, cpu="3"), wl("c1-mid", "c1", cpu="2"),
         wl("c2-low", "c2", -1, cpu="3"), wl("c2-mid", "c2", cpu="4")],
        (0, 0.0, {"cpu": "4"}),
        {("c1-low", IN_CLUSTER_QUEUE), ("c2-low", IN_COHORT_RECLAMATION)},
        id="preempt from all ClusterQueues in cohort",
    ),
    pytest.param(
        "prevent-starvation",
        [wl("wl1", "prevent-starvation", 2, cpu="2"),
         wl("wl2", "prevent-starvation", 1, at=1.0, created=100.0, cpu="2"),
         wl("wl3", "prevent-starvation", 1, at=0.0, created=100.0, cpu="2")],
        (1, 85.0, {"cpu": "2"}),
        {("wl2", IN_CLUSTER_QUEUE)},
        id="preempt newer workloads with the same priority",
    ),
    pytest.param(
        "a-standard",
        [wl("a-best-effort_low", "a-best-effort", -1, cpu="10"),
         wl("b-best-effort_low", "b-best-effort", -1, cpu="1")],
        (0, 0.0, {"cpu": "10"}),
        {("a-best-effort_low", IN_COHORT_RECLAIM_WHILE_BORROWING)},
        id="BorrowWithinCohort: preempt a lower-priority workload of another queue while borrowing",
    ),
    pytest.param(
        "a-standard",
        [wl("b-standard", "b-standard", 1, cpu="10")],
        (2, 0.0, {"cpu": "10"}),
        None,
        id="BorrowWithinCohort: not above MaxPriorityThreshold when still borrowing after it",
    ),
    pytest.param(
        "a-standard",
        [wl("b-standard", "b-standard", 1, cpu="13")],
        (2, 0.0, {"cpu": "1"}),
        {("b-standard", IN_COHORT_RECLAMATION)},
        id="BorrowWithinCohort: above MaxPriorityThreshold when no borrowing is needed after it",
    ),
    pytest.param(
        "a-standard",
        [wl("a-standard", "a-standard", 1, cpu="13")],
        (2, 0.0, {"cpu": "1"}),
        None,
        id="BorrowWithinCohort: not its own queue's workloads (withinClusterQueue Never)",
    ),
    pytest.param(
        "b-standard",
        [wl("a-standard_1", "a-standard", 1, cpu="10"),
         wl("a-standard_2", "a-standard", 1, cpu="1"),
         wl("b-standard_1", "b-standard", 1, cpu="1"),
         wl("b-standard_2", "b-standard", 2, cpu="1")],
        (3, 0.0, {"cpu": "1"}),
        {("b-standard_1", IN_CLUSTER_QUEUE)},
        id="BorrowWithinCohort: only its own queue when none below threshold and above nominal",
    ),
    pytest.param(
        "b-standard",
        [wl("b-standard_high", "b-standard", 2, cpu="10"),
         wl("b-standard_mid", "b-standard", 1, cpu="1"),
         wl("a-best-effort_low", "a-best-effort", -1, cpu="1"),
         wl("a-best-effort_lower", "a-best-effort", -2, cpu="1")],
        (2, 0.0, {"cpu": "2"}),
        {("b-standard_mid", IN_CLUSTER_QUEUE),
         ("a-best-effort_lower", IN_COHORT_RECLAIM_WHILE_BORROWING)},
        id="BorrowWithinCohort: its own queue and others below the threshold",
    ),
    pytest.param(
        "lend1",
        [wl("lend1-low", "lend1", -1, cpu="3"), wl("lend2-mid", "lend2", cpu="3"),
         wl("lend2-high", "lend2", 1, cpu="4")],
        (1, 0.0, {"cpu": "3"}),
        {("lend2-mid", IN_COHORT_RECLAMATION)},
        id="reclaim quota from lender",
    ),
]  # fmt: skip


@pytest.mark.parametrize("prefiltered", [False, True], ids=["all candidates", "prefiltered"])
@pytest.mark.parametrize(("queue", "admitted", "incoming", "want"), CASES)
def test_kueue_preemption_cases(
    queue: str,
    admitted: list[Candidate],
    incoming: tuple[int, float, dict[str, str]],
    want: set[tuple[str, str]] | None,
    prefiltered: bool,
) -> None:
    """`prefiltered`: as admission calls it, with candidates only from `candidate_queues`
    (the other queues' workloads left out must not change the plan)."""
    prio, created, req = incoming
    request = {r: quota_value(r, q) for r, q in req.items()}
    cohort = cohort_with(queue, admitted)
    policy = BY_NAME[queue].spec.preemption
    if prefiltered:
        assigned = preemption_flavors(cohort, queue, request)
        needs = frozenset() if assigned is None else assigned[1]
        queues = candidate_queues(cohort, policy, queue, needs)
        assert queue in queues
        admitted = [c for c in admitted if c.queue in queues]
    found = plan(cohort, policy, Preemptor(queue, prio, created, request), admitted)
    got = None if found is None else {(t.candidate.key, t.reason) for t in found.targets}
    assert got == want


TRIO = {
    q.metadata.name: q
    for q in load_manifest_text(
        "\n---\n".join(_queue(name, "trio", (6,), None, LOW) for name in ("t1", "t2", "t3"))
    ).queue_objects
    if isinstance(q, ClusterQueue)
}


def _trio(admitted: list[Candidate]) -> Cohort:
    (cohort,) = cohorts_of(list(TRIO.values())).values()
    for c in admitted:
        usage = cohort.usage.setdefault(c.queue, {})
        for fr, amount in c.usage.items():
            usage[fr] = usage.get(fr, 0) + amount
    return cohort


def test_only_the_own_queue_and_the_cohorts_borrowers_can_lose_workloads() -> None:
    # Three queues of 6 cpu each; t2 borrows 3 of t3's.
    needs = frozenset({("default", "cpu")})
    policy = TRIO["t1"].spec.preemption
    borrower = wl("t2-big", "t2", -1, cpu="9")
    # t1 under its nominal quota may reclaim from t2, the borrower; never from t3.
    cohort = _trio([wl("t1-low", "t1", -1, cpu="4"), borrower])
    assert candidate_queues(cohort, policy, "t1", needs) == {"t1", "t2"}
    # At its nominal quota, classical preemption (no borrowWithinCohort) evicts from its
    # own queue only; fair sharing may still reclaim from the borrower.
    admitted = [wl("t1-low", "t1", -1, cpu="6"), borrower]
    cohort = _trio(admitted)
    assert candidate_queues(cohort, policy, "t1", needs) == {"t1"}
    assert candidate_queues(cohort, policy, "t1", needs, classical=False) == {"t1", "t2"}
    preemptor = Preemptor("t1", 0, 0.0, {"cpu": 4000})  # 3 cpu free in the cohort
    found = plan(cohort, policy, preemptor, admitted)
    assert found is not None
    assert {t.candidate.key for t in found.targets} == {"t1-low"}
    assert plan(cohort, policy, preemptor, admitted[:1]) == found
    # Nobody borrows: only its own workloads.
    cohort = _trio([wl("t1-low", "t1", -1, cpu="4")])
    assert candidate_queues(cohort, policy, "t1", needs) == {"t1"}
    # A queue that never reclaims keeps to its own workloads, borrowers or not.
    never = BY_NAME["standalone"].spec.preemption
    assert candidate_queues(_trio([borrower]), never, "t1", needs) == {"t1"}


def test_the_plan_leaves_the_cohort_as_it_found_it() -> None:
    admitted = [
        wl("low", "c1", -1, cpu="3"),
        wl("c2-mid", "c2", cpu="3"),
        wl("hi", "c2", 1, cpu="6"),
    ]
    cohort = cohort_with("c1", admitted)
    before = {q: dict(u) for q, u in cohort.usage.items()}
    assert plan(
        cohort, BY_NAME["c1"].spec.preemption, Preemptor("c1", 1, 0.0, {"cpu": 3000}), admitted
    )
    assert cohort.usage == before


def test_a_refused_candidate_is_passed_over_for_the_next() -> None:
    """A PodDisruptionBudget refuses the first choice ("low"): the plan takes "mid" instead,
    and with every candidate refused there is no plan."""
    admitted = [wl("low", "standalone", -1, cpu="2"), wl("mid", "standalone", cpu="2")]
    policy = BY_NAME["standalone"].spec.preemption
    preemptor = Preemptor("standalone", 1, 0.0, {"cpu": 4000})
    cohort = cohort_with("standalone", [*admitted, wl("x", "standalone", 1, cpu="2")])
    found = plan(cohort, policy, preemptor, admitted, may_evict=lambda c: c.key != "low")
    assert found is None  # 2 cpu freed is not enough for 4
    preemptor = Preemptor("standalone", 1, 0.0, {"cpu": 2000})
    found = plan(cohort, policy, preemptor, admitted, may_evict=lambda c: c.key != "low")
    assert found is not None
    assert [t.candidate.key for t in found.targets] == ["mid"]
    assert plan(cohort, policy, preemptor, admitted, may_evict=lambda c: False) is None


def test_workloads_already_being_evicted_go_first() -> None:
    admitted = [
        wl("low", "standalone", -1, cpu="2"),
        Candidate("leaving", "standalone", 0, 0.0, 0.0, {("default", "cpu"): 2000}, evicting=True),
        wl("x", "standalone", 1, cpu="2"),
    ]
    found = plan(
        cohort_with("standalone", admitted),
        BY_NAME["standalone"].spec.preemption,
        Preemptor("standalone", 1, 0.0, {"cpu": 2000}),
        admitted,
    )
    assert found is not None
    assert [t.candidate.key for t in found.targets] == ["leaving"]
