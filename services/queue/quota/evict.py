"""What quota admission evicts: the workloads a preemption takes quota from, and the pods of
a ClusterQueue whose stopPolicy is HoldAndDrain. Evicted pods go back to waiting (in the
store: unbound, same uid), once each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from services.queue.quota.cohorts import Cohort, FlavorResource
from services.queue.quota.effects import Budgets, admitted_workloads, requeue
from services.queue.quota.fair_preemption import fair_plan
from services.queue.quota.flavor_assign import Assignment
from services.queue.quota.preemption import Candidate, Plan, Preemptor, candidate_queues, plan
from shared.models.kueue import PREEMPTION_NEVER, STOP_HOLD_AND_DRAIN, ClusterQueuePreemption

PREEMPTED = "Preempted"
PODS_READY_TIMEOUT = "PodsReadyTimeout"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
"""Kueue's eviction reasons (WorkloadEvictedBy*) berth has."""

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Workload


async def preempt(
    self: Admission, cohort: Cohort, wl: Workload, assignment: Assignment
) -> tuple[str, bool]:
    """Kueue's preemption (services.queue.quota.preemption): evict admitted workloads of its own
    queue (withinClusterQueue) or of borrowers in its cohort (reclaimWithinCohort,
    borrowWithinCohort) so that `wl` fits, skipping pods a PodDisruptionBudget protects.
    Evicted pods go back to waiting (in the store: unbound, same uid), once: `wl` then
    waits for them to leave. Returns the reason to show ("" when nothing can be
    preempted) and whether pods are leaving for `wl`."""
    policy = self.queues[wl.queue].spec.preemption
    if not self.reclaim or (
        policy.within_cluster_queue == PREEMPTION_NEVER
        and policy.reclaim_within_cohort == PREEMPTION_NEVER
    ):
        return "", False
    pending = self.evicting.get(wl.key)
    if pending and pending & self.admitted.keys():
        return f"preempting: waiting for {len(pending)} evicted pod(s) to leave", True
    already = set().union(*self.evicting.values())
    # Only its own queue's workloads and those of the cohort's borrowers can be preempted
    # for `wl` (preemption.candidate_queues): the others are skipped by one look at their
    # queue instead of being built as candidates.
    needs = assignment.needs_preemption
    queues = candidate_queues(cohort, policy, wl.queue, needs, classical=not self.fair_sharing)
    mine = {key: rec for key, rec in self.admitted.items() if rec["cq"] in queues}
    members = admitted_workloads(mine, already)
    preemptor = Preemptor(wl.queue, wl.priority, wl.created, wl.request())
    candidates = [c for c, _ in members.values()]
    assigned = (assignment.usage, assignment.needs_preemption)
    found = _plan(self, cohort, policy, preemptor, candidates, assigned)
    if found is None:
        return "", False
    # Budgets are read only when a plan exists (they cost a read of every pod); a plan
    # that a budget refuses is made again without the pods it protects.
    budgets = await Budgets.load(self.store)
    if not all(budgets.may_evict(members[t.candidate.key][1]) for t in found.targets):
        found = _plan(
            self,
            cohort,
            policy,
            preemptor,
            candidates,
            assigned,
            may_evict=lambda c: budgets.may_evict(members[c.key][1]),
        )
        if found is None:
            return budgets.refusal, False
    victims: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    for target in found.targets:
        for key in members[target.candidate.key][1]:
            victims[key] = self.admitted[key]
            reasons[key] = target.reason
    leaving: set[str] = set()
    for key, rec in victims.items():
        if key in already:
            leaving.add(key)
        elif await budgets.evict(key):  # budgets may have moved since the plan
            await evict(self, key, rec["uid"])
            count_eviction(self, rec, PREEMPTED)
            self.preemptions[wl.queue, reasons[key]] += 1
            leaving.add(key)
    if not leaving:
        return budgets.refusal, False
    self.evicting[wl.key] = leaving
    owners = sorted({victims[key]["cq"] for key in leaving})
    verb = "preempting" if wl.queue in owners else "reclaiming quota"
    return f"{verb}: evicted {len(leaving)} pod(s) of {', '.join(owners)}", True


async def evict(self: Admission, key: str, uid: str) -> None:
    """Put an admitted pod back to waiting (quota_effects.requeue), remembering it: if a
    proposal already in flight binds it anyway, admission evicts it again instead of
    charging it (a pod bound outside admission is otherwise charged on sight)."""
    await requeue(self.store, key, uid)
    self.requeued[key] = uid


def count_eviction(self: Admission, record: Mapping[str, Any], reason: str) -> None:
    """One pod evicted, for kueue_evicted_workloads_total (its ClusterQueue's and its
    LocalQueue's, with Kueue's reason)."""
    self.evictions[record["cq"], record.get("lq", ""), reason] += 1
    self.evicted += 1


def _plan(
    self: Admission,
    cohort: Cohort,
    policy: ClusterQueuePreemption,
    preemptor: Preemptor,
    candidates: list[Candidate],
    assigned: tuple[Mapping[FlavorResource, int], frozenset[FlavorResource]],
    may_evict: Callable[[Candidate], bool] = lambda _: True,
) -> Plan | None:
    """Classical preemption, or fair sharing's when its strategies are configured."""
    if self.fair_sharing:
        return fair_plan(
            cohort,
            policy,
            preemptor,
            candidates,
            assigned,
            strategies=self.fair_sharing,
            may_evict=may_evict,
        )
    return plan(cohort, policy, preemptor, candidates, may_evict=may_evict, assigned=assigned)


async def drain(self: Admission) -> None:
    """Evict, once, every admitted pod of a ClusterQueue with stopPolicy HoldAndDrain (Kueue
    evicts a stopped queue's workloads; they wait until the queue is started again)."""
    self.draining &= self.admitted.keys()
    draining = {
        name for name, cq in self.queues.items() if cq.spec.stop_policy == STOP_HOLD_AND_DRAIN
    }
    if not draining:
        return
    for key, rec in list(self.admitted.items()):
        if rec["cq"] in draining and key not in self.draining:
            await evict(self, key, rec["uid"])
            count_eviction(self, rec, CLUSTER_QUEUE_STOPPED)
            self.draining.add(key)
