"""One round of quota admission over a cohort tree: which ClusterQueue's head is admitted next
(DRF across queues, priority then creation time within one), which heads are parked or block
their queue, when a head preempts, and what an admission changes in the backlog."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from services.queue.quota import backlog as quota_backlog
from services.queue.quota import fair as quota_fair
from services.queue.quota.assign import assign_pods
from services.queue.quota.cohorts import Cohort
from services.queue.quota.effects import place_on_flavors
from services.queue.quota.evict import preempt
from services.queue.quota.flavor_assign import FIT, PREEMPT_MODE, Assignment
from services.queue.quota.heads import Backlog
from services.queue.quota.workload import Verdict, Workload
from shared.models.kueue import STOP_NONE

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission

_Best = tuple[int, tuple[int, float, str], Workload, dict[str, dict[str, str]]]
"""A queue's candidate in a round: share, order, workload, each pod's flavors."""


async def cohort_round(self: Admission, backlog: Backlog, cohort: Cohort, verdict: Verdict) -> None:
    """One cohort tree: while some ClusterQueue's head fits, admit the one whose queue
    would have the lowest share (DRF); heads that do not fit are parked (BestEffortFIFO)
    or block their queue (StrictFIFO, or pods are leaving for it)."""
    queues = [q for q in cohort.queues if q in backlog.queues and q in self.queues]
    for queue in queues:
        if quota_fair.fair(self, queue):
            backlog.queues[queue].reorder(backlog.workloads, quota_backlog.sort_key(self, queue))
    reasons = backlog.reasons
    reclaim_tried: set[str] = set()
    blocked: set[str] = set()
    """Queues whose turn is held this round (StrictFIFO head, pods leaving for it)."""
    unfit: dict[tuple[str, str, int], Assignment] = {}
    """(queue, shape, quota version) -> the assignment of a workload that did not fit: a
    backlog of like workloads costs one assignment per shape, not one per workload."""
    while True:
        best: _Best | None = None
        for queue in queues:
            spec = self.queues[queue].spec
            if queue in blocked or spec.stop_policy != STOP_NONE:
                continue  # Kueue: an inactive queue admits nothing
            strict = spec.queueing_strategy == "StrictFIFO"
            heads = backlog.queues[queue]
            now = time.time()
            while (key := heads.head()) is not None:
                wl = backlog.workloads[key]
                if why := self.readiness.waiting_reason(wl, now):
                    reasons[key] = (self.round_no, why)
                    heads.park(key)
                    backlog.held[key] = queue
                    continue
                group = key.removeprefix("podgroup:") if key.startswith("podgroup:") else ""
                if group:
                    wl.admitted_members = sum(
                        1 for rec in self.admitted.values() if rec.get("group") == group
                    )
                missing = wl.min_member - wl.admitted_members - len(wl.pods)
                if missing > 0:  # looked at again when one of its pods comes
                    reasons[key] = (self.round_no, f"gang waiting for {missing} more pod(s)")
                    heads.park(key)
                    continue
                version = self.quota_version
                shape = wl.shape()
                memo = None if shape is None else (queue, shape, version)
                known = None if memo is None else unfit.get(memo)
                flavors: dict[str, dict[str, str]] = {}
                if known is not None:
                    assignment = known
                else:
                    assignment, flavors = assign_pods(
                        cohort,
                        self.queues[queue],
                        self.flavors,
                        wl.requests,
                        wl.placements,
                        fair_sharing=bool(self.fair_sharing),
                    )
                    if memo is not None and assignment.mode != FIT:
                        unfit[memo] = assignment
                if assignment.mode != FIT:
                    text = assignment.message() or "waiting for quota"
                    if shape is not None:
                        backlog.group_reasons[(queue, shape)] = (self.round_no, text)
                    # Preempt for the first head of a queue that does not fit, once a
                    # round, when its flavors allow.
                    reclaiming = False
                    if queue not in reclaim_tried and assignment.mode == PREEMPT_MODE:
                        reclaim_tried.add(queue)
                        why, reclaiming = await preempt(self, cohort, wl, assignment)
                        if reclaiming:
                            text = why
                        elif why:  # blocked: the shortfall, and why nothing was evicted
                            text += f"; {why}"
                    reasons[key] = (self.round_no, text)
                    # A workload that pods are leaving for holds its queue's turn.
                    if strict or reclaiming:
                        blocked.add(queue)
                        break
                    if self.quota_version == version and key in backlog.workloads:
                        # until quota changes in its tree (with its shape's group when
                        # the queue's order is static)
                        grouped = shape is not None and not quota_fair.fair(self, queue)
                        heads.park(key, wl.order, shape if grouped else None)
                    continue
                share = cohort.share(queue, assignment.usage)
                if best is None or (share, wl.order) < (best[0], best[1]):
                    best = (share, wl.order, wl, flavors)
                break  # this queue's candidate: its head, which fits
        if best is None:
            break
        _, _, wl, flavors = best
        pods = dict(wl.pods)  # gate() may add a gang's pod during the awaits below
        await self.write(
            [(pod, wl.queue, wl.requests[key], flavors[key]) for key, pod in pods.items()],
            group=wl.key.removeprefix("podgroup:") if wl.key.startswith("podgroup:") else "",
            created=wl.created,
        )
        self.evicting.pop(wl.key, None)
        # also from a backlog a load() rebuilt during the write (gate runs between awaits)
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
