"""One round of quota admission over a cohort tree: which ClusterQueue's head is admitted next
(DRF across queues, priority then creation time within one), which heads are parked or block
their queue, when a head preempts, and what an admission changes in the backlog."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from services.queue.quota import backlog as quota_backlog
from services.queue.quota import fair as quota_fair
from services.queue.quota.assign import assign_pods
from services.queue.quota.cohorts import Cohort, FlavorResource
from services.queue.quota.effects import place_on_flavors
from services.queue.quota.evict import preempt
from services.queue.quota.flavor_assign import FIT, PREEMPT_MODE, Assignment
from services.queue.quota.heads import Backlog, Heads
from services.queue.quota.workload import Verdict, Workload
from shared.models.kueue import STOP_NONE

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission

_Best = tuple[
    int, tuple[int, float, str], Workload, dict[str, dict[str, str]], dict[FlavorResource, int]
]
"""A queue's candidate in a round: share, order, workload, each pod's flavors, its usage."""


async def cohort_round(self: Admission, backlog: Backlog, cohort: Cohort, verdict: Verdict) -> None:
    """One cohort tree: while some ClusterQueue's head fits, admit the one whose queue
    would have the lowest share (DRF); heads that do not fit are parked (BestEffortFIFO)
    or block their queue (StrictFIFO, or pods are leaving for it)."""
    queues = [q for q in cohort.queues if q in backlog.queues and q in self.queues]
    for queue in queues:
        if quota_fair.fair(self, queue):
            backlog.queues[queue].reorder(backlog.workloads, quota_backlog.sort_key(self, queue))
    one_round = _Round(self, backlog, cohort)
    kept: dict[str, tuple[_Best | None, int]] = {}
    """Each queue's candidate (and how many holds the round had made then), until an
    admission may have changed it (`_Round.still`) or a pod change came during the round's
    awaits."""
    changes = self.changes
    try:
        while True:
            if self.changes != changes:
                kept.clear()
                changes = self.changes
            best: _Best | None = None
            for queue in queues:
                if queue in kept and one_round.still(queue, kept[queue][0]):
                    candidate = kept[queue][0]
                else:
                    holds = len(one_round.held)
                    candidate = await one_round.candidate(queue)
                    kept[queue] = (candidate, holds)
                if candidate is not None and (best is None or candidate[:2] < best[:2]):
                    best = candidate
            if best is None:
                break
            _, _, wl, flavors, _ = best
            if kept[wl.queue][1] != len(one_round.held):
                del kept[wl.queue]  # worked out before quota was held for a preemptor
                continue
            del kept[wl.queue]  # its heads move on
            await _admit(self, backlog, wl, flavors, verdict)
    finally:
        one_round.let_go()


@dataclass
class _Round:
    """What one cohort round remembers between its queues' turns."""

    admission: Admission
    backlog: Backlog
    cohort: Cohort
    reclaim_tried: set[str] = field(default_factory=set)
    """Queues whose first unfit head has looked for preemption targets this round."""
    blocked: set[str] = field(default_factory=set)
    """Queues whose turn is held this round (StrictFIFO head, pods leaving for it)."""
    held: list[tuple[str, dict[FlavorResource, int]]] = field(default_factory=list)
    """Quota held for the round's preemptors whose victims are leaving (`hold`)."""
    unfit: dict[tuple[str, str, int], Assignment] = field(default_factory=dict)
    """(queue, shape, quota version) -> the assignment of a workload that did not fit: a
    backlog of like workloads costs one assignment per shape, not one per workload."""

    async def candidate(self, queue: str) -> _Best | None:
        """The queue's head that fits, with the share its admission would give the queue;
        heads before it that wait or do not fit are parked, or block the queue."""
        admission = self.admission
        spec = admission.queues[queue].spec
        if queue in self.blocked or spec.stop_policy != STOP_NONE:
            return None  # Kueue: an inactive queue admits nothing
        heads = self.backlog.queues[queue]
        now = time.time()
        while (key := heads.head()) is not None:
            wl = self.backlog.workloads[key]
            if self._waits(queue, key, wl, heads, now):
                continue
            version = admission.quota_version
            assignment, flavors = self._assign(queue, wl, version)
            if assignment.mode != FIT:
                if await self._does_not_fit(queue, key, wl, heads, assignment, version):
                    return None
                continue
            share = self.cohort.share(queue, assignment.usage)
            return (share, wl.order, wl, flavors, assignment.usage)
        return None

    def hold(self, queue: str, assignment: Assignment) -> None:
        """For the rest of the round, what `queue`'s head, which pods are leaving for, may
        take is held for it (Kueue's resourcesToReserve: up to its nominal quota, or up to
        its borrowing limit when it borrows): quota its first victims free is not given to
        other workloads of the cohort before the last ones leave. Without it, medium and
        small workloads took that quota, the preemptor evicted them in turn, and Kueue's
        baseline could churn through ~80 evictions a second for most of a run."""
        usage: dict[FlavorResource, int] = {}
        for fr, amount in assignment.usage.items():
            limits = self.cohort.queues[queue].limits.get(fr)
            if limits is None:
                continue
            used = self.cohort.used(queue, fr)
            if not assignment.borrowing:
                usage[fr] = max(0, min(amount, limits.nominal - used))
            elif limits.borrowing is None:
                usage[fr] = amount
            else:
                usage[fr] = max(0, min(amount, limits.nominal + limits.borrowing - used))
        self.cohort.add_usage(queue, usage)
        self.held.append((queue, usage))

    def let_go(self) -> None:
        """The round's holds end with it (the next round holds again while pods leave)."""
        for queue, usage in self.held:
            self.cohort.add_usage(queue, usage, -1)
        self.held.clear()

    def still(self, queue: str, candidate: _Best | None) -> bool:
        """Whether `candidate`, the queue's answer before the round's latest admissions, is
        what `candidate()` would answer now, without working it out again (with 6 queues a
        cohort, each admission worked out 6 assignments). None stays None: admissions free no
        quota and park no head of another queue. A head that fit still fits in the same
        flavors while each takes no more than is available now (availability only shrinks
        within a round; a flavor that did not fit before does not fit now), and its share
        (the queue's own usage) and order are the same, unless fair sharing orders the
        queue's heads by usage."""
        if candidate is None:
            return True
        if quota_fair.fair(self.admission, queue):
            return False
        usage = candidate[4]
        return all(self.cohort.available(queue, fr) >= amount for fr, amount in usage.items())

    def _waits(self, queue: str, key: str, wl: Workload, heads: Heads, now: float) -> bool:
        """Parks a head that is not ready to be admitted (pods not ready after an eviction,
        a gang short of members) with its reason."""
        admission = self.admission
        reasons = self.backlog.reasons
        if why := admission.readiness.waiting_reason(wl, now):
            reasons[key] = (admission.round_no, why)
            heads.park(key)
            self.backlog.held[key] = queue
            return True
        group = key.removeprefix("podgroup:") if key.startswith("podgroup:") else ""
        if group:
            wl.admitted_members = sum(
                1 for rec in admission.admitted.values() if rec.get("group") == group
            )
        missing = wl.min_member - wl.admitted_members - len(wl.pods)
        if missing > 0:  # looked at again when one of its pods comes
            reasons[key] = (admission.round_no, f"gang waiting for {missing} more pod(s)")
            heads.park(key)
            return True
        return False

    def _assign(
        self, queue: str, wl: Workload, version: int
    ) -> tuple[Assignment, dict[str, dict[str, str]]]:
        """The workload's flavor assignment, or the remembered unfit one of its shape."""
        admission = self.admission
        shape = wl.shape()
        memo = None if shape is None else (queue, shape, version)
        known = None if memo is None else self.unfit.get(memo)
        if known is not None:
            return known, {}
        assignment, flavors = assign_pods(
            self.cohort,
            admission.queues[queue],
            admission.flavors,
            wl.requests,
            wl.placements,
            fair_sharing=bool(admission.fair_sharing),
        )
        if memo is not None and assignment.mode != FIT:
            self.unfit[memo] = assignment
        return assignment, flavors

    async def _does_not_fit(
        self,
        queue: str,
        key: str,
        wl: Workload,
        heads: Heads,
        assignment: Assignment,
        version: int,
    ) -> bool:
        """Records why a head does not fit, preempts for it when it may, and parks it;
        True when it holds its queue's turn instead (StrictFIFO, or pods leaving for it)."""
        admission = self.admission
        shape = wl.shape()
        text = assignment.message() or "waiting for quota"
        if shape is not None:
            self.backlog.group_reasons[(queue, shape)] = (admission.round_no, text)
        # Preempt for the first head of a queue that does not fit, once a round, when its
        # flavors allow.
        reclaiming = False
        if queue not in self.reclaim_tried and assignment.mode == PREEMPT_MODE:
            self.reclaim_tried.add(queue)
            why, reclaiming = await preempt(admission, self.cohort, wl, assignment)
            if reclaiming:
                text = why
            elif why:  # blocked: the shortfall, and why nothing was evicted
                text += f"; {why}"
        self.backlog.reasons[key] = (admission.round_no, text)
        # A workload that pods are leaving for holds its queue's turn.
        if reclaiming:
            self.hold(queue, assignment)
        if admission.queues[queue].spec.queueing_strategy == "StrictFIFO" or reclaiming:
            self.blocked.add(queue)
            return True
        if admission.quota_version == version and key in self.backlog.workloads:
            # until quota changes in its tree (with its shape's group when the queue's
            # order is static)
            grouped = shape is not None and not quota_fair.fair(admission, queue)
            heads.park(key, wl.order, shape if grouped else None)
        return False


async def _admit(
    self: Admission,
    backlog: Backlog,
    wl: Workload,
    flavors: dict[str, dict[str, str]],
    verdict: Verdict,
) -> None:
    """Writes the workload's admission, forgets it as waiting, lets its pods go on, and
    reorders or wakes the heads behind it."""
    pods = dict(wl.pods)  # gate() may add a gang's pod during the awaits below
    await self.write(
        [(pod, wl.queue, wl.requests[key], flavors[key]) for key, pod in pods.items()],
        group=wl.key.removeprefix("podgroup:") if wl.key.startswith("podgroup:") else "",
        created=wl.created,
        defer=True,  # flushed at the round's end (Admission.admit_pods)
    )
    self.evicting.pop(wl.key, None)
    # also from a backlog a load() rebuilt during the round's awaits (gate runs between them)
    for each in {id(backlog): backlog, id(self.backlog): self.backlog}.values():
        each.forget(wl.key)
        for key in pods:
            each.of_pod.pop(key, None)
    for late in [p for k, p in wl.pods.items() if k not in pods]:
        quota_backlog.add(self, late)  # came during the write: it waits on its own
    for pod in pods.values():
        self.pending.pop(pod.key, None)
        self.decoded.pop(pod.key, None)
        self.written.pop(pod.key, None)
        if not await place_on_flavors(self.store, self.flavors, pod, flavors[pod.key]):
            verdict.admitted.append(replace(pod, quota_wait=""))
    quota_fair.admitted(self, wl)
    heads = backlog.heads(wl.queue)
    order = quota_backlog.sort_key(self, wl.queue)
    if quota_fair.fair(self, wl.queue):
        heads.reorder(backlog.workloads, order)
    elif (shape := wl.shape()) is not None:  # the next of its shape may fit too
        heads.wake(shape, backlog.workloads, order)
