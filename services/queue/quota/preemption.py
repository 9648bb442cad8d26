"""Which admitted workloads a waiting one may evict to be admitted: Kueue's classical
preemption (pkg/scheduler/preemption GetTargets, without fair-sharing strategies), pure.

A workload that does not fit its ClusterQueue may take quota from:

- its own ClusterQueue, under `withinClusterQueue`: `LowerPriority` (strictly lower
  priority) or `LowerOrNewerEqualPriority` (also equal priority created after it);
- the other queues of its cohort that borrow, under `reclaimWithinCohort`: `LowerPriority`
  or `Any`. A queue is a victim only while it borrows a resource the workload needs
  (checked before each eviction, as Kueue does): reclaim takes back what was lent, and an
  eviction takes a queue below its nominal quota by at most part of one workload, since a
  queue whose borrowing is held in large pieces must still give the lender its nominal
  quota back;
- while borrowing itself, other queues' workloads of lower priority than the preemptor (or
  than `borrowWithinCohort.maxPriorityThreshold` + 1), under `borrowWithinCohort:
  LowerPriority`.

Candidates use a (flavor, resource) the workload needs preemption for, and are tried in
Kueue's order: already being evicted, other queues before its own, lower priority, most
recently admitted, key. The plan is minimal the way Kueue's is: candidates are removed in
that order until the workload fits, then each but the last is put back if it still fits.
Kueue's steps, in order: only its own queue's candidates: with borrowing; borrowWithinCohort:
all, with borrowing; its queue under nominal quota: all, without borrowing; last, its own
queue's candidates with borrowing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.queue.quota.cohorts import Cohort, FlavorResource
from shared.models.kueue import (
    PREEMPTION_ANY,
    PREEMPTION_LOWER_OR_NEWER_EQUAL,
    PREEMPTION_LOWER_PRIORITY,
    PREEMPTION_NEVER,
    ClusterQueuePreemption,
)

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
"""Kueue's preemption reasons (the `reason` of a Target)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted workload (a pod, or a gang's pods together)."""

    key: str
    queue: str
    priority: int
    admitted_at: float
    created: float
    usage: Mapping[FlavorResource, int]
    evicting: bool = False
    """Already evicted for another workload and not yet gone."""


@dataclass(frozen=True, slots=True)
class Preemptor:
    queue: str
    priority: int
    created: float
    request: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Target:
    candidate: Candidate
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    flavors: dict[str, str]
    """The flavor of each requested resource, as admission will charge it."""
    targets: tuple[Target, ...] = field(default=())


def preemption_flavors(
    cohort: Cohort, queue: str, request: Mapping[str, int]
) -> tuple[dict[str, str], frozenset[FlavorResource]] | None:
    """Kueue's flavor assignment in preemption mode: per resource, the first flavor (in the
    queue's order) it fits now, else the first whose quota could hold it were the cohort
    empty. Returns the flavors and the (flavor, resource) pairs that need preemption, or
    None when some resource fits no flavor even then."""
    empty = cohort.with_usage({})
    flavors: dict[str, str] = {}
    needs: set[FlavorResource] = set()
    for resource, amount in request.items():
        if amount <= 0:
            continue
        order = cohort.queues[queue].flavors_of.get(resource, ())
        fit = next((f for f in order if cohort.available(queue, (f, resource)) >= amount), None)
        if fit is not None:
            flavors[resource] = fit
            continue
        could = next((f for f in order if empty.available(queue, (f, resource)) >= amount), None)
        if could is None:
            return None
        flavors[resource] = could
        needs.add((could, resource))
    return flavors, frozenset(needs)


def satisfies(policy: str, preemptor: Preemptor, candidate: Candidate) -> bool:
    """Kueue's SatisfiesPreemptionPolicy."""
    if policy == PREEMPTION_ANY:
        return True
    lower = candidate.priority < preemptor.priority
    if policy == PREEMPTION_LOWER_PRIORITY:
        return lower
    if policy == PREEMPTION_LOWER_OR_NEWER_EQUAL:
        newer = candidate.priority == preemptor.priority and preemptor.created < candidate.created
        return lower or newer
    return False


def order(queue: str) -> Callable[[Candidate], tuple[bool, bool, int, float, str]]:
    """Kueue's candidatesOrdering, as a sort key."""
    return lambda c: (not c.evicting, c.queue == queue, c.priority, -c.admitted_at, c.key)


def candidates_for(
    cohort: Cohort,
    policy: ClusterQueuePreemption,
    preemptor: Preemptor,
    admitted: Iterable[Candidate],
    needs: frozenset[FlavorResource],
    may_evict: Callable[[Candidate], bool],
) -> tuple[Cohort, list[Candidate]]:
    """A copy of the cohort to simulate evictions on, and the admitted workloads the policy
    lets `preemptor` evict for the (flavor, resource) pairs it `needs`, in Kueue's order
    (classical and fair-sharing preemption both start here)."""
    sim = cohort.with_usage({q: dict(u) for q, u in cohort.usage.items()})
    in_cohort = bool(cohort.queues[preemptor.queue].cohort)
    candidates = sorted(
        (
            c
            for c in admitted
            if any(fr in needs for fr in c.usage)
            and allowed(policy, preemptor, c, sim, needs, in_cohort)
            and may_evict(c)
        ),
        key=order(preemptor.queue),
    )
    return sim, candidates


def plan(
    cohort: Cohort,
    policy: ClusterQueuePreemption,
    preemptor: Preemptor,
    admitted: Iterable[Candidate],
    *,
    may_evict: Callable[[Candidate], bool] = lambda _: True,
    assigned: tuple[Mapping[FlavorResource, int], frozenset[FlavorResource]] | None = None,
) -> Plan | None:
    """The workloads to evict so that `preemptor` fits, or None (see the module docstring).
    `may_evict` refuses candidates for reasons of their own (a PodDisruptionBudget).
    `assigned`: the flavor assignment's usage and the (flavor, resource) pairs that need
    preemption (services.queue.quota.flavor_assign); without it, `preemption_flavors` decides."""
    if assigned is None:
        computed = preemption_flavors(cohort, preemptor.queue, preemptor.request)
        if computed is None:
            return None
        flavors, needs = computed
        request = {(flavors[r], r): a for r, a in preemptor.request.items() if r in flavors}
    else:
        request = dict(assigned[0])
        needs = assigned[1]
        flavors = {r: f for f, r in request}
    if not needs:
        return Plan(flavors)
    sim, candidates = candidates_for(cohort, policy, preemptor, admitted, needs, may_evict)
    queue = preemptor.queue
    if not candidates:
        return None
    own = [c for c in candidates if c.queue == queue]

    def minimal(chosen: Sequence[Candidate], borrow: bool, threshold: int | None) -> Plan | None:
        targets = _minimal(sim, queue, request, needs, chosen, borrow, threshold)
        return Plan(flavors, tuple(targets)) if targets else None

    if len(own) == len(candidates):
        return minimal(candidates, True, None)
    borrow_policy = policy.borrow_within_cohort
    under_nominal = _under_nominal(sim, queue, needs)
    if borrow_policy.policy != PREEMPTION_NEVER:
        threshold = preemptor.priority
        limit = borrow_policy.max_priority_threshold
        if limit is not None and limit < threshold:
            threshold = limit + 1
        if not under_nominal:
            candidates = [c for c in candidates if c.queue == queue or c.priority < threshold]
        return minimal(candidates, True, threshold)
    if under_nominal:
        found = minimal(candidates, False, None)
        if found is not None:
            return found
    return minimal(own, True, None)


def candidate_queues(
    cohort: Cohort,
    policy: ClusterQueuePreemption,
    queue: str,
    needs: Iterable[FlavorResource],
    *,
    classical: bool = True,
) -> frozenset[str]:
    """The queues whose workloads a plan can evict for a preemptor from `queue`: its own,
    and, when it is in a cohort and may reclaim, the cohort's queues that borrow what it
    `needs` (`allowed`), unless `classical` preemption (`plan`, not fair sharing's) would
    look at its own queue only: no borrowWithinCohort and the queue at or above its nominal
    quota. A caller builds candidates only from these (building one costs more than this
    look at its queue; in a busy cohort most queues lend rather than borrow)."""
    needs = tuple(needs)
    if not cohort.queues[queue].cohort or policy.reclaim_within_cohort == PREEMPTION_NEVER:
        return frozenset((queue,))
    if (
        classical
        and policy.borrow_within_cohort.policy == PREEMPTION_NEVER
        and not _under_nominal(cohort, queue, needs)
    ):
        return frozenset((queue,))  # `plan` then evicts from its own queue only
    return frozenset(q for q in cohort.queues if q == queue or _borrowing(cohort, q, needs))


def allowed(
    policy: ClusterQueuePreemption,
    preemptor: Preemptor,
    c: Candidate,
    cohort: Cohort,
    needs: frozenset[FlavorResource],
    in_cohort: bool,
) -> bool:
    if c.queue == preemptor.queue:
        return satisfies(policy.within_cluster_queue, preemptor, c)
    if not in_cohort or c.queue not in cohort.queues:
        return False
    return _borrowing(cohort, c.queue, needs) and satisfies(
        policy.reclaim_within_cohort, preemptor, c
    )


def _under_nominal(cohort: Cohort, queue: str, needs: Iterable[FlavorResource]) -> bool:
    limits = cohort.queues[queue].limits
    return all(fr in limits and cohort.used(queue, fr) < limits[fr].nominal for fr in needs)


def _borrowing(cohort: Cohort, queue: str, needs: Iterable[FlavorResource]) -> bool:
    return any(cohort.borrowed(queue, fr) > 0 for fr in needs)


def _fits(cohort: Cohort, queue: str, request: Mapping[FlavorResource, int], borrow: bool) -> bool:
    """Kueue's workloadFits."""
    for fr, amount in request.items():
        if not borrow and cohort.used(queue, fr) + amount > cohort.queues[queue].limits[fr].nominal:
            return False
        if amount > cohort.available(queue, fr):
            return False
    return True


def _minimal(
    cohort: Cohort,
    queue: str,
    request: Mapping[FlavorResource, int],
    needs: frozenset[FlavorResource],
    candidates: Sequence[Candidate],
    borrow: bool,
    threshold: int | None,
) -> list[Target]:
    """Kueue's minimalPreemptions on `cohort` (restored before returning)."""
    targets: list[Target] = []
    fits = False
    for c in candidates:
        reason = IN_CLUSTER_QUEUE
        if c.queue != queue:
            if not _borrowing(cohort, c.queue, needs):
                continue
            reason = IN_COHORT_RECLAMATION
            if threshold is not None:
                if c.priority >= threshold:
                    borrow = False  # a victim at or above the threshold: no borrowing after all
                else:
                    reason = IN_COHORT_RECLAIM_WHILE_BORROWING
        _charge(cohort, c, -1)
        targets.append(Target(c, reason))
        if _fits(cohort, queue, request, borrow):
            fits = True
            break
    if fits:
        for i in range(len(targets) - 2, -1, -1):  # put back what is not needed, newest first
            _charge(cohort, targets[i].candidate, 1)
            if _fits(cohort, queue, request, borrow):
                del targets[i]
            else:
                _charge(cohort, targets[i].candidate, -1)
    for t in targets:
        _charge(cohort, t.candidate, 1)
    return targets if fits else []


def _charge(cohort: Cohort, c: Candidate, sign: int) -> None:
    usage = cohort.usage.setdefault(c.queue, {})
    for fr, amount in c.usage.items():
        usage[fr] = usage.get(fr, 0) + sign * amount
