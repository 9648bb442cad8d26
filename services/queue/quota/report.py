"""What quota admission reports: Kueue's metric families per ClusterQueue."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from shared.metrics import BerthMetrics

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Verdict


def report(admission: Admission, verdict: Verdict, metrics: BerthMetrics) -> None:
    """Kueue's metric families for every ClusterQueue, after a round."""
    waiting: dict[str, int] = defaultdict(int)
    for pod in admission.pending.values():
        queue, _ = admission.queue_of(pod)
        waiting[queue or ""] += 1
    active: dict[str, int] = defaultdict(int)
    for record in admission.admitted.values():
        active[record["cq"]] += 1
    for pod in verdict.admitted:
        queue = admission.admitted.get(pod.key, {}).get("cq", "")
        metrics.cq_admitted.labels(cluster_queue=queue).inc()
    for cohort in admission.cohorts.values():
        for name, quota in cohort.queues.items():
            metrics.cq_pending.labels(cluster_queue=name, status="inadmissible").set(waiting[name])
            metrics.cq_admitted_active.labels(cluster_queue=name).set(active[name])
            metrics.cq_share.labels(cluster_queue=name).set(cohort.share(name))
            for (flavor, resource), limits in quota.limits.items():
                labels = {
                    "cohort": quota.cohort,
                    "cluster_queue": name,
                    "flavor": flavor,
                    "resource": resource,
                }
                scale = 1000.0 if resource == "cpu" else 1.0
                fr = (flavor, resource)
                metrics.cq_nominal.labels(**labels).set(limits.nominal / scale)
                metrics.cq_usage.labels(**labels).set(cohort.used(name, fr) / scale)
                metrics.cq_borrowing.labels(**labels).set(cohort.borrowed(name, fr) / scale)
    for queue, count in admission.evictions.items():
        metrics.cq_evicted.labels(cluster_queue=queue, reason="Preempted").inc(count)
    admission.evictions.clear()
