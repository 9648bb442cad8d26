"""Preemption under fair sharing: Kueue's fairPreemptions (pkg/scheduler/preemption), pure.

The same candidates as classical preemption (services.queue.quota.preemption: the preemptor's own
queue under withinClusterQueue, other queues of the cohort while they borrow a needed resource
under reclaimWithinCohort). The queues holding candidates are visited by dominant resource
share, highest first (shares recomputed as workloads are taken):

- from its own queue, the next candidate is taken;
- from another queue, its first candidate (in Kueue's order) that the strategy allows:
  `LessThanOrEqualToFinalShare`: the preemptor's share with its request is at most the
  victim queue's share without the victim; `LessThanInitialShare`: it is below the victim
  queue's share now. A workload under borrowWithinCohort's priority threshold may always be
  taken. Then the queues are ordered again.

When the first strategy is not enough, the second (if any) is tried on the candidates the
first passed over, one per queue. Once the preemptor fits, each target but the last is put
back if it still fits (Kueue's fillBackWorkloads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.queue.quota.cohorts import Cohort, FlavorResource
from services.queue.quota.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    Candidate,
    Plan,
    Preemptor,
    Target,
    candidates_for,
)
from shared.models.kueue import PREEMPTION_NEVER, ClusterQueuePreemption

IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
DEFAULT_STRATEGIES = STRATEGIES

Strategy = Callable[[int, int, int], bool]
"""(preemptor's share with its request, victim queue's share now, and without the victim)."""

RULES: dict[str, Strategy] = {
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: lambda mine, _, theirs_after: mine <= theirs_after,
    LESS_THAN_INITIAL_SHARE: lambda mine, theirs_now, _: mine < theirs_now,
}


@dataclass
class _Queue:
    name: str
    share: int
    order: int
    workloads: list[Candidate] = field(default_factory=list)


def _fits(cohort: Cohort, queue: str, request: Mapping[FlavorResource, int]) -> bool:
    return all(amount <= cohort.available(queue, fr) for fr, amount in request.items())


def _charge(cohort: Cohort, c: Candidate, sign: int) -> None:
    usage = cohort.usage.setdefault(c.queue, {})
    for fr, amount in c.usage.items():
        usage[fr] = usage.get(fr, 0) + sign * amount


def _heap(cohort: Cohort, candidates: Sequence[Candidate], first_only: bool) -> list[_Queue]:
    queues: dict[str, _Queue] = {}
    for c in candidates:
        q = queues.get(c.queue)
        if q is None:
            queues[c.queue] = _Queue(c.queue, cohort.share(c.queue), len(queues), [c])
        elif not first_only:
            q.workloads.append(c)
    return list(queues.values())


def _pop(heap: list[_Queue]) -> _Queue:
    best = max(heap, key=lambda q: (q.share, -q.order))
    heap.remove(best)
    return best


def fair_plan(
    cohort: Cohort,
    policy: ClusterQueuePreemption,
    preemptor: Preemptor,
    admitted: Iterable[Candidate],
    assigned: tuple[Mapping[FlavorResource, int], frozenset[FlavorResource]],
    *,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    may_evict: Callable[[Candidate], bool] = lambda _: True,
) -> Plan | None:
    """The workloads to evict under fair sharing, or None (see the module docstring)."""
    request, needs = dict(assigned[0]), assigned[1]
    flavors = {r: f for f, r in request}
    if not needs:
        return Plan(flavors)
    sim, candidates = candidates_for(cohort, policy, preemptor, admitted, needs, may_evict)
    queue = preemptor.queue
    below: int | None = None
    borrow = policy.borrow_within_cohort
    if borrow.policy != PREEMPTION_NEVER:
        below = preemptor.priority
        if borrow.max_priority_threshold is not None and borrow.max_priority_threshold < below:
            below = borrow.max_priority_threshold + 1
    rules = [RULES[s] for s in strategies]
    targets: list[Target] = []
    fits = False
    mine = sim.share(queue, request)
    retry: list[Candidate] = []
    heap = _heap(sim, candidates, False)
    while heap and not fits:
        cand = _pop(heap)
        if cand.name == queue:
            victim = cand.workloads.pop(0)
            _charge(sim, victim, -1)
            targets.append(Target(victim, IN_CLUSTER_QUEUE))
            if _fits(sim, queue, request):
                fits = True
                break
            mine = sim.share(queue, request)
            if cand.workloads:
                cand.share = sim.share(cand.name)
                heap.append(cand)
            continue
        for i, victim in enumerate(cand.workloads):
            under = below is not None and victim.priority < below
            after = sim.share(cand.name, {fr: -a for fr, a in victim.usage.items()})
            if under or (rules and rules[0](mine, cand.share, after)):
                _charge(sim, victim, -1)
                reason = IN_COHORT_RECLAIM_WHILE_BORROWING if under else IN_COHORT_FAIR_SHARING
                targets.append(Target(victim, reason))
                if _fits(sim, queue, request):
                    fits = True
                    break
                cand.workloads = cand.workloads[i + 1 :]
                if cand.workloads and any(sim.borrowed(cand.name, fr) > 0 for fr in needs):
                    cand.share = after
                    heap.append(cand)
                break
            retry.append(victim)
    if not fits and len(rules) > 1:
        heap = _heap(sim, retry, True)
        while heap and not fits:
            cand = _pop(heap)
            if rules[1](mine, cand.share, 0):
                victim = cand.workloads[0]
                _charge(sim, victim, -1)
                targets.append(Target(victim, IN_COHORT_FAIR_SHARING))
                fits = _fits(sim, queue, request)
    if not fits:
        return None
    for i in range(len(targets) - 2, -1, -1):  # put back what is not needed
        _charge(sim, targets[i].candidate, 1)
        if _fits(sim, queue, request):
            targets[i] = targets[-1]
            targets.pop()
        else:
            _charge(sim, targets[i].candidate, -1)
    return Plan(flavors, tuple(targets))
