"""Quota admission's backlog kept per pod change (services.queue.quota.heads): a pending pod
into its workload and its ClusterQueue's heads, out again when admitted or gone; the parked
workloads of a cohort tree back when quota is released there; and every waiting pod's reason,
with its position and estimate (O(backlog): at most once per `reasons_every` seconds)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.queue.quota import fair as quota_fair
from services.queue.quota.estimate import estimates
from services.queue.quota.heads import Backlog, SortKey
from services.queue.quota.workload import Verdict, Workload
from services.queue.records import PodRecord
from shared.messaging.wire import MessageError
from shared.models import POD_GROUP_LABEL
from shared.models.kueue import QUEUE_NAME_LABEL, STOP_NONE

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.cohorts import Cohort


def sort_key(self: Admission, queue: str) -> SortKey:
    """The order of `queue`'s workloads: priority then creation time; least-used LocalQueue
    first under admission fair sharing."""
    usage = self.lq_usage
    if usage is None or queue not in self.queues or not quota_fair.fair(self, queue):
        return lambda wl: wl.order
    weights = self.lq_weights
    return lambda wl: (usage.key(wl.local_queue, weights.get(wl.local_queue, 1.0)), wl.order)


def add(self: Admission, pod: PodRecord) -> None:
    """A managed pending pod (new or changed) into its workload, which becomes active."""
    backlog = self.backlog
    known = backlog.of_pod.get(pod.key)
    if known is not None:
        wl = backlog.workloads.get(known)
        same = wl is not None and pod.key in wl.pods
        if wl is not None and same and wl.pods[pod.key].resource_version == pod.resource_version:
            wl.pods[pod.key] = pod  # the same pod again (a relist): nothing to look at
            return
        remove(self, pod.key)
    backlog.unqueued.pop(pod.key, None)
    queue, problem = self.queue_of(pod)
    if queue is None:
        backlog.unqueued[pod.key] = problem
        return
    try:
        request, created, placement, signature = self._decode(pod, queue)
    except (MessageError, ValueError) as e:  # one unreadable pod waits, with why
        backlog.unqueued[pod.key] = f"cannot read the pod: {e}"
        return
    if known is None:  # new demand (not a change of a pod already waiting), from its creation
        self.arrivals.record(queue, created or time.time(), request, pod.priority)
    group = pod.labels.get(POD_GROUP_LABEL, "")
    key = f"podgroup:{pod.namespace}/{group}" if group else pod.key
    wl = backlog.workloads.get(key)
    if wl is None:
        lq = f"{pod.namespace}/{pod.labels.get(QUEUE_NAME_LABEL, '')}"
        wl = backlog.workloads[key] = Workload(key, queue, pod.priority, created, local_queue=lq)
        if group:
            wl.min_member = self.groups.get(f"{pod.namespace}/{group}", 1)
    wl.pods[pod.key] = pod
    wl.requests[pod.key] = request
    wl.placements[pod.key] = placement
    wl.signatures[pod.key] = signature
    wl.created = min(wl.created, created)
    wl.changed()
    backlog.of_pod[pod.key] = key
    backlog.held.pop(key, None)
    backlog.heads(wl.queue).push(key, sort_key(self, wl.queue)(wl))


def remove(self: Admission, pod_key: str) -> None:
    """A pod out of the backlog (admitted, deleted, bound or no longer managed)."""
    backlog = self.backlog
    backlog.unqueued.pop(pod_key, None)
    key = backlog.of_pod.pop(pod_key, None)
    wl = None if key is None else backlog.workloads.get(key)
    if key is None or wl is None:
        return
    for part in (wl.pods, wl.requests, wl.placements, wl.signatures):
        part.pop(pod_key, None)
    wl.changed()
    if not wl.pods:
        backlog.forget(key)
    else:  # a gang changed: looked at again
        backlog.heads(wl.queue).push(key, sort_key(self, wl.queue)(wl))


def rebuild(self: Admission) -> None:
    """The backlog again from the pending pods (after the quota objects were reloaded:
    Kueue moves every inadmissible workload back then too)."""
    self.backlog = Backlog()
    for pod in list(self.pending.values()):
        add(self, pod)


def unpark_tree(self: Admission, queue: str) -> None:
    """Quota was released in `queue`'s cohort tree: its parked workloads are looked at again."""
    cohort = self.cohorts.get(self.cohort_of.get(queue, ""))
    names = cohort.queues if cohort is not None else (queue,)
    backlog = self.backlog
    for name in names:
        heads = backlog.queues.get(name)
        if heads is not None and heads.parked:
            heads.unpark(backlog.workloads, sort_key(self, name))


def wake_held(self: Admission) -> None:
    """waitForPodsReady's parked workloads back (their backoff or block may be over)."""
    backlog = self.backlog
    for key, queue in list(backlog.held.items()):
        wl = backlog.workloads.get(key)
        if wl is not None:
            backlog.heads(queue).push(key, sort_key(self, queue)(wl))
    backlog.held.clear()


@dataclass
class PendingCounts:
    """Waiting pods per ClusterQueue and per LocalQueue ("ns/name"): active (among the
    heads, not tried or holding their queue) and inadmissible (parked, or with no
    ClusterQueue: counted under "")."""

    active: Counter[str] = field(default_factory=Counter)
    inadmissible: Counter[str] = field(default_factory=Counter)
    lq_active: Counter[str] = field(default_factory=Counter)
    lq_inadmissible: Counter[str] = field(default_factory=Counter)


def pending_counts(self: Admission) -> PendingCounts:
    """O(waiting workloads), for the gauges."""
    backlog = self.backlog
    out = PendingCounts()
    for name, heads in backlog.queues.items():
        for keys, per_cq, per_lq in (
            (heads.live, out.active, out.lq_active),
            (heads.parked, out.inadmissible, out.lq_inadmissible),
        ):
            for key in keys:
                wl = backlog.workloads.get(key)
                if wl is not None:
                    per_cq[name] += len(wl.pods)
                    per_lq[wl.local_queue] += len(wl.pods)
    for pod_key in backlog.unqueued:
        pod = self.pending.get(pod_key)
        if pod is not None:
            out.inadmissible[""] += 1
            out.lq_inadmissible[f"{pod.namespace}/{pod.labels.get(QUEUE_NAME_LABEL, '')}"] += 1
    return out


def unqueued_reasons(self: Admission, verdict: Verdict) -> None:
    """The reasons of the waiting pods that are in no ClusterQueue's line (`reasons` gives
    the others', a cohort at a time)."""
    for pod_key, why in self.backlog.unqueued.items():
        pod = self.pending.get(pod_key)
        if pod is not None:
            verdict.waiting[pod_key] = (pod, why)


def reasons(self: Admission, cohort: Cohort, verdict: Verdict) -> None:
    """The reason of every pod waiting in the cohort's ClusterQueues into `verdict`: its
    position in its ClusterQueue (and in its cohort), why it waits (the last round's finding)
    and its estimated admission time."""
    backlog = self.backlog
    by_queue: dict[str, list[Workload]] = {}
    for queue in cohort.queues:
        heads = backlog.queues.get(queue)
        if heads is None or not len(heads):
            continue
        waiting = [backlog.workloads[k] for k in heads if k in backlog.workloads]
        waiting.sort(key=sort_key(self, queue))
        by_queue[queue] = waiting
    everyone = sorted((wl for w in by_queue.values() for wl in w), key=lambda w: w.order)
    overall = {wl.key: i for i, wl in enumerate(everyone, start=1)}
    shared = cohort.queues[everyone[0].queue].cohort if everyone else ""
    for queue, waiting in by_queue.items():
        spec = self.queues[queue].spec
        stopped = spec.stop_policy != STOP_NONE
        eta = {} if stopped else estimates(self, cohort, queue, waiting)
        for position, wl in enumerate(waiting, start=1):
            if stopped:  # Kueue: an inactive queue admits nothing
                reason = f"ClusterQueue {queue} is inactive ({spec.stop_policy})"
            else:
                why = backlog.reason(queue, wl.key) or "waiting for quota"
                reason = why + eta.get(wl.key, "")
            where = f"position {position} of {len(waiting)}"
            if shared:  # and across the cohort, in priority then creation order
                where += f"; {overall[wl.key]} of {len(everyone)} in cohort {shared}"
            message = f"Waiting for quota in ClusterQueue {queue} ({where}): {reason}"
            for pod in wl.pods.values():
                verdict.waiting[pod.key] = (pod, message)
