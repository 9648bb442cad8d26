"""What quota admission reports: Kueue's metric families per ClusterQueue (upstream names,
kubernetes-sigs/kueue pkg/metrics): counters after every round, gauges (O(backlog)) when
the round wrote every waiting pod's reason."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING

from services.queue.quota.backlog import pending_counts
from services.queue.quota.report_local import report_local_counters, report_local_gauges
from shared.models.kueue import STOP_NONE
from shared.observability.metrics import BerthMetrics

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Verdict

CQ_STATUSES = ("pending", "active", "terminating")


def report(
    admission: Admission,
    verdict: Verdict,
    metrics: BerthMetrics,
    *,
    seconds: float | None = None,
    now: float | None = None,
) -> None:
    """The counters and histograms of a round that took `seconds` (O(what it admitted and
    evicted)); `report_gauges` sets the gauges."""
    now = time.monotonic() if now is None else now
    since = admission.since
    waited: dict[str, float] = {}
    """Admitted pod key -> how long it waited (the LocalQueue families observe it too)."""
    for pod in verdict.admitted:
        queue = admission.admitted.get(pod.key, {}).get("cq", "")
        waited[pod.key] = max(0.0, now - since.pop(pod.key, now))
        metrics.cq_admitted.labels(cluster_queue=queue).inc()
        metrics.cq_quota_reserved.labels(cluster_queue=queue).inc()
        metrics.cq_admission_wait.labels(cluster_queue=queue).observe(waited[pod.key])
        metrics.cq_quota_reserved_wait.labels(cluster_queue=queue).observe(waited[pod.key])
    if seconds is not None and (verdict.admitted or verdict.waiting or admission.pending):
        result = "success" if verdict.admitted else "inadmissible"
        metrics.admission_attempts.labels(result=result).inc()
        metrics.admission_attempt_duration.labels(result=result).observe(seconds)
    for (queue, _local, reason), count in admission.evictions.items():
        metrics.cq_evicted.labels(cluster_queue=queue, reason=reason).inc(count)
    for (preempting, reason), count in admission.preemptions.items():
        metrics.cq_preempted.labels(preempting_cluster_queue=preempting, reason=reason).inc(count)
    report_local_counters(admission, verdict, metrics, waited)
    admission.evictions.clear()
    admission.preemptions.clear()


def report_gauges(admission: Admission, metrics: BerthMetrics) -> None:
    """Kueue's gauges for every ClusterQueue and LocalQueue, O(backlog): with the reasons
    (at most once per reasons_every). Pending pods are active (among the heads) or
    inadmissible (parked), as Kueue counts its heap and its inadmissible workloads."""
    counts = pending_counts(admission)
    active: dict[str, int] = defaultdict(int)
    for record in admission.admitted.values():
        active[record["cq"]] += 1
    for cohort in admission.cohorts.values():
        for name, quota in cohort.queues.items():
            pending = metrics.cq_pending
            pending.labels(cluster_queue=name, status="inadmissible").set(counts.inadmissible[name])
            pending.labels(cluster_queue=name, status="active").set(counts.active[name])
            metrics.cq_admitted_active.labels(cluster_queue=name).set(active[name])
            metrics.cq_reserving_active.labels(cluster_queue=name).set(active[name])
            metrics.cq_share.labels(cluster_queue=name).set(cohort.share(name))
            # Kueue: a stopped ClusterQueue is pending (it admits nothing).
            spec = admission.queues[name].spec if name in admission.queues else None
            current = "active" if spec is None or spec.stop_policy == STOP_NONE else "pending"
            for status in CQ_STATUSES:
                value = 1 if status == current else 0
                metrics.cq_status.labels(cluster_queue=name, status=status).set(value)
            for (flavor, resource), limits in quota.limits.items():
                labels = {
                    "cohort": quota.cohort,
                    "cluster_queue": name,
                    "flavor": flavor,
                    "resource": resource,
                }
                scale = 1000.0 if resource == "cpu" else 1.0
                fr = (flavor, resource)
                used = cohort.used(name, fr) / scale
                metrics.cq_nominal.labels(**labels).set(limits.nominal / scale)
                metrics.cq_usage.labels(**labels).set(used)
                metrics.cq_reservation.labels(**labels).set(used)
                metrics.cq_borrowed.labels(**labels).set(cohort.borrowed(name, fr) / scale)
                if limits.borrowing is not None:
                    metrics.cq_borrowing_limit.labels(**labels).set(limits.borrowing / scale)
                if limits.lending is not None:
                    metrics.cq_lending_limit.labels(**labels).set(limits.lending / scale)
    report_local_gauges(admission, counts, metrics)
