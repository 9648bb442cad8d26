"""Kueue's LocalQueue metric families (kueue_local_queue_*, labels `name` and `namespace`),
recorded beside the ClusterQueue ones (report.py): counters after every round, gauges when
the round wrote every waiting pod's reason.

Per LocalQueue that exists: its pending pods (active / inadmissible, as the ClusterQueue's),
its admitted pods (reserving and admitted active: berth reserves and admits at once), the
pods admitted and evicted (with Kueue's reason) and their wait, and its status (Active is
False while its ClusterQueue is missing or stopped). A LocalQueue deleted since the last
round has its gauges removed.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from shared.models.kueue import QUEUE_NAME_LABEL, STOP_NONE
from shared.observability.metrics import BerthMetrics

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.backlog import PendingCounts
    from services.queue.quota.workload import Verdict

LQ_STATUSES = ("True", "False", "Unknown")

_REPORTED: weakref.WeakKeyDictionary[Admission, set[str]] = weakref.WeakKeyDictionary()
"""Per admission: the LocalQueues ("ns/name") whose gauges were set (to remove when gone)."""


def local_queue_of(namespace: str, labels: Mapping[str, str]) -> str:
    """A pod's LocalQueue, "ns/name"."""
    return f"{namespace}/{labels.get(QUEUE_NAME_LABEL, '')}"


def _labels(local_queue: str) -> dict[str, str]:
    namespace, _, name = local_queue.partition("/")
    return {"name": name, "namespace": namespace}


def report_local_counters(
    admission: Admission, verdict: Verdict, metrics: BerthMetrics, waited: Mapping[str, float]
) -> None:
    """The kueue_local_queue_* counters and histograms of a round; `waited`: admitted pod
    key -> seconds."""
    for pod in verdict.admitted:
        labels = _labels(local_queue_of(pod.namespace, pod.labels))
        metrics.lq_admitted.labels(**labels).inc()
        metrics.lq_quota_reserved.labels(**labels).inc()
        seconds = waited.get(pod.key, 0.0)
        metrics.lq_admission_wait.labels(**labels).observe(seconds)
        metrics.lq_quota_reserved_wait.labels(**labels).observe(seconds)
    for (_queue, local, reason), count in admission.evictions.items():
        if local:
            metrics.lq_evicted.labels(**_labels(local), reason=reason).inc(count)


def report_local_gauges(admission: Admission, counts: PendingCounts, metrics: BerthMetrics) -> None:
    """The kueue_local_queue_* gauges (O(backlog)), from the pending pods' `counts`."""
    active: Counter[str] = Counter(
        record["lq"] for record in admission.admitted.values() if record.get("lq")
    )
    for local, cluster_queue in admission.local.items():
        labels = _labels(local)
        inadmissible = counts.lq_inadmissible[local]
        metrics.lq_pending.labels(**labels, status="inadmissible").set(inadmissible)
        metrics.lq_pending.labels(**labels, status="active").set(counts.lq_active[local])
        metrics.lq_reserving_active.labels(**labels).set(active[local])
        metrics.lq_admitted_active.labels(**labels).set(active[local])
        cq = admission.queues.get(cluster_queue)
        current = "True" if cq is not None and cq.spec.stop_policy == STOP_NONE else "False"
        for status in LQ_STATUSES:
            metrics.lq_status.labels(**labels, active=status).set(1 if status == current else 0)
    reported = _REPORTED.setdefault(admission, set())
    for gone in reported - admission.local.keys():
        _remove(metrics, _labels(gone))
    reported.clear()
    reported.update(admission.local)


def _remove(metrics: BerthMetrics, labels: Mapping[str, str]) -> None:
    """Drop a deleted LocalQueue's gauges (its counters and histograms stay, as counters do)."""
    name, namespace = labels["name"], labels["namespace"]
    removals = [
        (metrics.lq_reserving_active, (name, namespace)),
        (metrics.lq_admitted_active, (name, namespace)),
        *((metrics.lq_pending, (name, namespace, s)) for s in ("active", "inadmissible")),
        *((metrics.lq_status, (name, namespace, s)) for s in LQ_STATUSES),
    ]
    for family, values in removals:
        with contextlib.suppress(KeyError):
            family.remove(*values)
