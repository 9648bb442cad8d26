"""Where each pod is and why: one row per pod, as `berth get pods` and the dashboard show it.

`pod_rows(snapshot, pending, scheduler_names, now)` joins the store (the pod, its binding and
nomination, its gang's progress, its LocalQueue) with the queue's pending view
(services.queue.views: where the queue holds the pod, attempts, the last failure) and gives each
pod a reason class:

- bound: the pod has a node.
- skipped: no profile serves its schedulerName (upstream's "profile not found" message).
- new: the queue has not heard of it yet.
- gated: it waits in the gated queue (message: the scheduling gates it waits for).
- quota: its ClusterQueue has no room for it yet (the queue holds it gated by the plugin
  "Quota", services/queue/quota/admission.py; the message gives the reason and its position).
- gang: a member of a PodGroup that is not complete, waiting at Permit (it holds a
  reservation) or refused by Coscheduling: "gang NS/G waiting for N more (P of minMember M
  placed)".
- conflict: its last attempt lost a race at the binder (the binder's reason, and the backoff).
- backoff: backing off after a failed attempt: "backoff until <UTC time>: <the FitError>".
- unschedulable: parked, it fits nowhere (the FitError text).
- queued: in the active queue. scheduling: an attempt is in flight.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from services.queue.views import PendingPod
from shared.models import Pod
from shared.models.kueue import QUEUE_NAME_LABEL, LocalQueue
from shared.models.policy import pod_group_key
from shared.store import Snapshot

BOUND = "bound"
SKIPPED = "skipped"
NEW = "new"
GATED = "gated"
QUOTA = "quota"
GANG = "gang"
CONFLICT = "conflict"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
QUEUED = "queued"
SCHEDULING = "scheduling"
PENDING_REASONS = (NEW, GATED, QUOTA, GANG, CONFLICT, BACKOFF, UNSCHEDULABLE, QUEUED, SCHEDULING)
"""The reason classes of a pod that is not bound (and not skipped), in the order the
dashboard lists them."""

COSCHEDULING = "Coscheduling"
QUOTA_PLUGIN = "Quota"
"""What a pod waiting for quota admission names as its failed plugin."""


@dataclass(slots=True)
class PodRow:
    """One pod as `berth get pods` shows it."""

    namespace: str
    name: str
    status: str
    """Bound, Pending, Gated or Skipped."""
    node: str = ""
    queue: str = ""
    attempts: int = 0
    nominated_node: str = ""
    message: str = ""
    priority: int = 0
    tenant: str = ""
    reason: str = ""
    """The reason class (see the module docstring)."""
    reason_message: str = ""
    """The reason in words: the FitError, the backoff's end, the gang's progress."""
    local_queue: str = ""
    cluster_queue: str = ""
    backoff_until: float | None = None
    """Epoch seconds."""
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pending(self) -> bool:
        return self.reason in PENDING_REASONS

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "status": self.status,
            "node": self.node or None,
            "queue": self.queue or None,
            "attempts": self.attempts,
            "nominatedNode": self.nominated_node or None,
            "message": self.message,
            "priority": self.priority,
            "tenant": self.tenant or None,
            "reason": self.reason,
            "reasonMessage": self.reason_message,
            "localQueue": self.local_queue or None,
            "clusterQueue": self.cluster_queue or None,
            "backoffUntil": self.backoff_until,
            "labels": dict(self.labels),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodRow:
        """The row `to_json` gave (a client of the API front door reads them back)."""
        return cls(
            namespace=str(data["namespace"]),
            name=str(data["name"]),
            status=str(data["status"]),
            node=data.get("node") or "",
            queue=data.get("queue") or "",
            attempts=int(data.get("attempts") or 0),
            nominated_node=data.get("nominatedNode") or "",
            message=data.get("message") or "",
            priority=int(data.get("priority") or 0),
            tenant=data.get("tenant") or "",
            reason=data.get("reason") or "",
            reason_message=data.get("reasonMessage") or "",
            local_queue=data.get("localQueue") or "",
            cluster_queue=data.get("clusterQueue") or "",
            backoff_until=data.get("backoffUntil"),
            labels=dict(data.get("labels") or {}),
        )


@dataclass(frozen=True, slots=True)
class GangProgress:
    """A PodGroup's members placed (bound, or holding a reservation) against its minMember."""

    min_member: int
    placed: int

    @property
    def missing(self) -> int:
        return max(0, self.min_member - self.placed)


def gang_progress(snapshot: Snapshot) -> dict[str, GangProgress]:
    """Per PodGroup ("namespace/name"): how many of its members are placed."""
    reserved = {r.pod_key for r in snapshot.reservations}
    placed: Counter[str] = Counter(
        group
        for pod in snapshot.pods
        if (group := pod_group_key(pod)) and (pod.spec.node_name or pod.key in reserved)
    )
    return {
        group.key: GangProgress(group.spec.min_member, placed[group.key])
        for group in snapshot.pod_groups
    }


def cluster_queue_of(local_queues: Iterable[LocalQueue]) -> dict[str, str]:
    """ "namespace/localqueue" -> the name of its ClusterQueue."""
    return {lq.key: lq.spec.cluster_queue for lq in local_queues}


def local_queue_key(pod: Pod) -> str:
    """ "namespace/localqueue" of the LocalQueue the pod joins (its Kueue label), else ""."""
    name = pod.metadata.labels.get(QUEUE_NAME_LABEL, "")
    return f"{pod.metadata.namespace}/{name}" if name else ""


def utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def classify(
    pod: Pod,
    queued: PendingPod | None,
    *,
    served: bool,
    gang: GangProgress | None,
    reserved: bool,
) -> tuple[str, str]:
    """(reason class, reason message) of one pod; see the module docstring."""
    if pod.spec.node_name:
        return BOUND, f"bound to {pod.spec.node_name}"
    if not served:
        return SKIPPED, f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
    if queued is None:
        return NEW, "not in the queue yet"
    where, message = queued.queue, queued.message
    if where == "gated" and QUOTA_PLUGIN in queued.unschedulable_plugins:
        return QUOTA, message or "waiting for quota"
    if where == "gated":
        gates = ", ".join(g.name for g in pod.spec.scheduling_gates)
        return GATED, f"waiting for scheduling gates: {gates}" if gates else "gated"
    waiting_gang = reserved or COSCHEDULING in queued.unschedulable_plugins
    if gang is not None and gang.missing and waiting_gang:
        group = pod_group_key(pod)
        return GANG, (
            f"gang {group} waiting for {gang.missing} more "
            f"({gang.placed} of minMember {gang.min_member} placed)"
        )
    until = ""
    if where == "backoff" and queued.backoff_expires_at is not None:
        until = f"backoff until {utc(queued.backoff_expires_at)}"
    if queued.conflicts and message and not queued.unschedulable_plugins:
        return CONFLICT, "; ".join(part for part in (f"conflict: {message}", until) if part)
    if where == "backoff":
        return BACKOFF, f"{until}: {message}" if message else until
    if where == "unschedulable":
        return UNSCHEDULABLE, message
    if where == "inflight":
        return SCHEDULING, f"attempt {queued.attempts} in flight"
    return QUEUED, "waiting in the active queue"


def pod_rows(
    snapshot: Snapshot,
    pending: Sequence[PendingPod],
    scheduler_names: Collection[str],
) -> list[PodRow]:
    """Every pod of the snapshot, by namespace and name, with where it is and why."""
    by_key = {p.key: p for p in pending}
    gangs = gang_progress(snapshot)
    reserved = {r.pod_key for r in snapshot.reservations}
    cluster_queues = cluster_queue_of(cast(list[LocalQueue], snapshot.of_kind("LocalQueue")))
    rows = []
    for pod in snapshot.pods:
        meta = pod.metadata
        row = PodRow(meta.namespace, meta.name, "Pending", priority=pod.spec.priority or 0)
        row.labels = dict(meta.labels)
        served = pod.spec.scheduler_name in scheduler_names
        queued = by_key.get(pod.key)
        if pod.spec.node_name:
            row.status, row.node = "Bound", pod.spec.node_name
        elif not served:
            row.status = "Skipped"
            row.message = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
        if queued is not None and not pod.spec.node_name:
            row.queue, row.attempts, row.tenant = queued.queue, queued.attempts, queued.tenant
            row.message = queued.message
            row.backoff_until = queued.backoff_expires_at
            if queued.queue == "gated":
                row.status = "Quota" if QUOTA_PLUGIN in queued.unschedulable_plugins else "Gated"
        row.nominated_node = pod.status.nominated_node_name
        row.reason, row.reason_message = classify(
            pod,
            queued,
            served=served,
            gang=gangs.get(pod_group_key(pod)),
            reserved=pod.key in reserved,
        )
        row.local_queue = local_queue_key(pod)
        row.cluster_queue = cluster_queues.get(row.local_queue, "")
        rows.append(row)
    rows.sort(key=lambda r: (r.namespace, r.name))
    return rows


def pending_first(rows: Iterable[PodRow]) -> list[PodRow]:
    """Pending pods first (in the order of PENDING_REASONS), then the others, each by key."""
    order: Mapping[str, int] = {reason: i for i, reason in enumerate(PENDING_REASONS)}
    return sorted(rows, key=lambda r: (order.get(r.reason, len(order)), r.namespace, r.name))
