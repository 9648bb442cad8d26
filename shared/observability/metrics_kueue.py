"""Kueue's metric families (kubernetes-sigs/kueue pkg/metrics: names, labels, buckets), per
ClusterQueue and per LocalQueue; the queue's quota admission records them
(services/queue/quota/report.py, report_local.py). BerthMetrics (shared/observability/metrics.py)
carries them with the others.

berth counts pods: a pod is a workload, and a coscheduling PodGroup's pods are one workload
whose pods each count (as `kueue_pending_workloads` always has here).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

KUEUE_WAIT_BUCKETS = (1.0, *(2.5 * 2**i for i in range(13)))
"""Kueue's generateExponentialBuckets(14): 1 s, then 2.5 s .. ~2.8 h."""

EVICTION_REASONS = ("Preempted", "PodsReadyTimeout", "ClusterQueueStopped")
"""kueue_evicted_workloads_total's reasons berth has (Kueue's WorkloadEvictedBy*; berth has no
admission checks and no deactivation by spec.active)."""
PREEMPTION_REASONS = (
    "InClusterQueue",
    "InCohortReclamation",
    "InCohortFairSharing",
    "InCohortReclaimWhileBorrowing",
)
"""kueue_preempted_workloads_total's reasons (Kueue's preemption reasons)."""
LOCAL_QUEUE = ["name", "namespace"]


class KueueMetrics:
    """Kueue's families, registered on `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        reg = registry
        quota = ["cohort", "cluster_queue", "flavor", "resource"]
        self.cq_pending = Gauge(
            "kueue_pending_workloads",
            "Pods (gangs count per pod) waiting for quota, per ClusterQueue.",
            ["cluster_queue", "status"],
            registry=reg,
        )
        self.cq_admitted_active = Gauge(
            "kueue_admitted_active_workloads",
            "Pods admitted by a ClusterQueue and not yet deleted.",
            ["cluster_queue"],
            registry=reg,
        )
        self.cq_admitted = Counter(
            "kueue_admitted_workloads",
            "Pods admitted, per ClusterQueue.",
            ["cluster_queue"],
            registry=reg,
        )
        self.cq_evicted = Counter(
            "kueue_evicted_workloads",
            "Pods evicted back to waiting, per ClusterQueue and reason (Preempted, "
            "PodsReadyTimeout, ClusterQueueStopped).",
            ["cluster_queue", "reason"],
            registry=reg,
        )
        self.cq_nominal = Gauge(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota (CPU in cores, memory in bytes, others as counted).",
            quota,
            registry=reg,
        )
        self.cq_usage = Gauge(
            "kueue_cluster_queue_resource_usage",
            "Quota charged by admission (same units as the nominal quota).",
            quota,
            registry=reg,
        )
        self.cq_borrowed = Gauge(
            "berth_cluster_queue_borrowed",
            "Usage above the nominal quota (borrowed from the cohort): berth's own, Kueue has "
            "no such family.",
            quota,
            registry=reg,
        )
        self.cq_reservation = Gauge(
            "kueue_cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors "
            "(berth reserves and admits at once: the same as the usage).",
            quota,
            registry=reg,
        )
        self.cq_borrowing_limit = Gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors",
            quota,
            registry=reg,
        )
        self.cq_lending_limit = Gauge(
            "kueue_cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors",
            quota,
            registry=reg,
        )
        self.cq_status = Gauge(
            "kueue_cluster_queue_status",
            "Reports 'cluster_queue' with its 'status' (pending, active or terminating): 1 "
            "for one of the statuses.",
            ["cluster_queue", "status"],
            registry=reg,
        )
        self.cq_reserving_active = Gauge(
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'cluster_queue'",
            ["cluster_queue"],
            registry=reg,
        )
        self.cq_quota_reserved = Counter(
            "kueue_quota_reserved_workloads",
            "The total number of quota reserved workloads per 'cluster_queue'",
            ["cluster_queue"],
            registry=reg,
        )
        self.cq_quota_reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota "
            "reservation, per 'cluster_queue'",
            ["cluster_queue"],
            buckets=KUEUE_WAIT_BUCKETS,
            registry=reg,
        )
        self.cq_admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per "
            "'cluster_queue'",
            ["cluster_queue"],
            buckets=KUEUE_WAIT_BUCKETS,
            registry=reg,
        )
        self.admission_attempts = Counter(
            "kueue_admission_attempts",
            "The total number of attempts to admit workloads (one per quota round with "
            "workloads waiting): 'success' admitted at least one, 'inadmissible' none.",
            ["result"],
            registry=reg,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt, by the result.",
            ["result"],
            registry=reg,
        )
        self.cq_round_errors = Counter(
            "berth_quota_round_errors",
            "Quota admission rounds given up on an unexpected error (logged).",
            registry=reg,
        )
        self.cq_share = Gauge(
            "kueue_cluster_queue_weighted_share",
            "Weighted dominant resource share x1000 (DRF; 0 while within nominal quota).",
            ["cluster_queue"],
            registry=reg,
        )

        self.cq_preempted = Counter(
            "kueue_preempted_workloads",
            "The number of preempted workloads per 'preempting_cluster_queue' and 'reason' "
            "(InClusterQueue, InCohortReclamation, InCohortFairSharing, "
            "InCohortReclaimWhileBorrowing).",
            ["preempting_cluster_queue", "reason"],
            registry=reg,
        )
        self._local_queues(reg)

    def _local_queues(self, reg: CollectorRegistry) -> None:
        """Kueue's local_queue_* families (its LocalQueueMetrics feature)."""
        self.lq_pending = Gauge(
            "kueue_local_queue_pending_workloads",
            "The number of pending workloads, per 'local_queue' and 'status' (active: in the "
            "admission queue; inadmissible: a failed admission attempt).",
            [*LOCAL_QUEUE, "status"],
            registry=reg,
        )
        self.lq_reserving_active = Gauge(
            "kueue_local_queue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'localQueue'",
            LOCAL_QUEUE,
            registry=reg,
        )
        self.lq_admitted_active = Gauge(
            "kueue_local_queue_admitted_active_workloads",
            "The number of admitted Workloads that are active (unsuspended and not finished), "
            "per 'localQueue'",
            LOCAL_QUEUE,
            registry=reg,
        )
        self.lq_quota_reserved = Counter(
            "kueue_local_queue_quota_reserved_workloads",
            "The total number of quota reserved workloads per 'local_queue'",
            LOCAL_QUEUE,
            registry=reg,
        )
        self.lq_admitted = Counter(
            "kueue_local_queue_admitted_workloads",
            "The total number of admitted workloads per 'local_queue'",
            LOCAL_QUEUE,
            registry=reg,
        )
        self.lq_evicted = Counter(
            "kueue_local_queue_evicted_workloads",
            "The number of evicted workloads per 'local_queue' and 'reason' (Preempted, "
            "PodsReadyTimeout, ClusterQueueStopped).",
            [*LOCAL_QUEUE, "reason"],
            registry=reg,
        )
        self.lq_quota_reserved_wait = Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota "
            "reservation, per 'local_queue'",
            LOCAL_QUEUE,
            buckets=KUEUE_WAIT_BUCKETS,
            registry=reg,
        )
        self.lq_admission_wait = Histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per "
            "'local_queue'",
            LOCAL_QUEUE,
            buckets=KUEUE_WAIT_BUCKETS,
            registry=reg,
        )
        self.lq_status = Gauge(
            "kueue_local_queue_status",
            "Reports 'localQueue' with its 'active' status (True, False or Unknown): 1 for one "
            "of the statuses.",
            [*LOCAL_QUEUE, "active"],
            registry=reg,
        )
