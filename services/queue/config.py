"""Queue settings: the replica's own settings (flags and environment, QueueSettings), and the
QueueConfig the service runs with (PriorityQueue timings from KubeSchedulerConfiguration plus
service knobs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from msgspec import Meta

from services.queue.hints import QueueingHints
from shared.config import SchedulerConfiguration
from shared.messaging.kafka import Topics
from shared.models import DEFAULT_SCHEDULER_NAME
from shared.runtime.settings import setting

KUEUE_MODE_BERTH = "berth"
KUEUE_MODE_KUEUE = "kueue"
KUEUE_MODES = (KUEUE_MODE_BERTH, KUEUE_MODE_KUEUE)
KueueMode = Literal["berth", "kueue"]
"""Who admits pods to Kueue's queues: berth (its quota admission), or Kueue running in the
cluster (berth admits nothing and schedules what Kueue ungates). README, "Kueue in the
cluster"."""


FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
"""Kueue's fairSharing.preemptionStrategies (services/queue/quota/fair_preemption.py)."""


def tenant_weights(text: str) -> dict[str, int]:
    """`a=3,b=2` -> {"a": 3, "b": 2} (ValueError naming the bad item)."""
    out: dict[str, int] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        tenant, sep, weight = item.partition("=")
        try:
            out[tenant] = int(weight)
        except ValueError:
            sep = ""
        if not sep or not tenant:
            raise ValueError(f"{item!r} is not TENANT=WEIGHT")
    return out


def fair_sharing_strategies(text: str) -> tuple[str, ...]:
    """The strategies named in `text` (comma-separated), refused with the known ones."""
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    for name in names:
        if name not in FAIR_SHARING_STRATEGIES:
            known = ", ".join(FAIR_SHARING_STRATEGIES)
            raise ValueError(f"unknown strategy {name!r} (known: {known})")
    if len(names) > 2 or (len(names) == 2 and names[1] != FAIR_SHARING_STRATEGIES[1]):
        raise ValueError(f"at most two strategies, the second {FAIR_SHARING_STRATEGIES[1]}")
    return names


Seconds = Annotated[float, Meta(ge=0)]


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue replica's own settings (shared.runtime.settings reads them: flag, else variable)."""

    tenant_label: Annotated[
        str | None,
        setting(
            "BERTH_TENANT_LABEL",
            "pod label naming the tenant (default: the namespace)",
            flag="--tenant-label",
        ),
    ] = None
    tenant_weights: Annotated[
        dict[str, int],
        setting(
            "BERTH_TENANT_WEIGHTS",
            "weighted round-robin weights, TENANT=WEIGHT comma-separated",
            flag="--tenant-weight",
            parse=tenant_weights,
            kind="TENANT=WEIGHT,...",
            many=True,
        ),
    ] = field(default_factory=dict)
    max_inflight: Annotated[
        int,
        Meta(ge=0),
        setting(
            "BERTH_MAX_INFLIGHT",
            "leased pods per tenant at most (0: no cap)",
            flag="--max-inflight",
        ),
    ] = 1000
    lease_seconds: Annotated[
        float,
        Meta(gt=0),
        setting(
            "BERTH_LEASE_SECONDS",
            "how long a dispatched pod stays leased without an outcome",
            flag="--lease-seconds",
        ),
    ] = 30.0
    fair_sharing: Annotated[
        tuple[str, ...],
        setting(
            "BERTH_FAIR_SHARING",
            "Kueue's fair sharing preemption strategies, comma-separated "
            "(LessThanOrEqualToFinalShare,LessThanInitialShare); unset: classical preemption",
            flag="--fair-sharing",
            parse=fair_sharing_strategies,
            kind="strategies",
        ),
    ] = ()
    admission_fair_sharing_half_life: Annotated[
        Seconds,
        setting(
            "BERTH_ADMISSION_FAIR_SHARING_HALF_LIFE",
            "Kueue's admission fair sharing: LocalQueue usage half-life in seconds (0: off)",
            flag="--admission-fair-sharing-half-life",
        ),
    ] = 0.0
    kueue_mode: Annotated[
        KueueMode,
        setting(
            "BERTH_KUEUE_MODE",
            "who admits pods to Kueue's queues: berth, or kueue (Kueue runs in the cluster)",
            flag="--kueue-mode",
        ),
    ] = "berth"
    wait_for_pods_ready_timeout: Annotated[
        Seconds,
        setting(
            "BERTH_WAIT_FOR_PODS_READY_TIMEOUT",
            "Kueue's waitForPodsReady: requeue an admitted workload not bound in time (0: off)",
            flag="--wait-for-pods-ready-timeout",
        ),
    ] = 0.0
    wait_for_pods_ready_block: Annotated[
        bool,
        setting(
            "BERTH_WAIT_FOR_PODS_READY_BLOCK",
            "waitForPodsReady.blockAdmission",
            flag="--wait-for-pods-ready-block",
        ),
    ] = False
    requeue_backoff_base: Annotated[
        Seconds,
        setting(
            "BERTH_REQUEUE_BACKOFF_BASE",
            "waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
            flag="--requeue-backoff-base",
        ),
    ] = 60.0
    requeue_backoff_max: Annotated[
        Seconds,
        setting(
            "BERTH_REQUEUE_BACKOFF_MAX",
            "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
            flag="--requeue-backoff-max",
        ),
    ] = 3600.0
    requeue_backoff_limit: Annotated[
        Annotated[int, Meta(ge=0)] | None,
        setting(
            "BERTH_REQUEUE_BACKOFF_LIMIT",
            "waitForPodsReady.requeuingStrategy.backoffLimitCount (unset: no limit)",
            flag="--requeue-backoff-limit",
        ),
    ] = None


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's waitForPodsReady settings (what they do: services/queue/quota/ready.py)."""

    timeout_s: float = 0.0
    """0: off."""
    block_admission: bool = False
    backoff_base_s: float = 60.0
    backoff_max_s: float = 3600.0
    backoff_limit: int | None = None


@dataclass(frozen=True, slots=True)
class QueueConfig:
    key_prefix: str = "berth:q:"
    """Prefix of every Redis key (tests use a unique one each)."""
    initial_backoff_seconds: float = 1.0
    """podInitialBackoffSeconds."""
    max_backoff_seconds: float = 10.0
    """podMaxBackoffSeconds."""
    max_in_unschedulable_seconds: float = 300.0
    """podMaxInUnschedulablePodsDuration (upstream's default: 5 minutes)."""
    lease_seconds: float = 30.0
    """How long a dispatched pod stays leased without an outcome before it is dispatched again."""
    max_inflight_per_tenant: int = 1000
    """Leased pods per tenant at most (0: no cap)."""
    dispatch_batch: int = 512
    """Pods popped per tenant per dispatch round, times the tenant's weight."""
    message_batch: int = 64
    """Schedule requests per `berth.schedule` message."""
    tenant_label: str | None = None
    """Pod label naming the tenant; the pod's namespace when unset or absent."""
    single_tenant: str | None = None
    """Every pod in this one tenant queue (`berth run`: one global queue, as kube-scheduler
    has, so the distributed pipeline orders pods exactly as `berth schedule` does)."""
    tenant_weights: Mapping[str, int] = field(default_factory=dict)
    """Weighted round-robin weights (default_tenant_weight for the others)."""
    default_tenant_weight: int = 1
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME})
    """Profiles' schedulerNames: pods naming another scheduler are not queued."""
    backoff_flush_interval: float = 1.0
    leftover_flush_interval: float = 30.0
    lease_check_interval: float = 1.0
    dispatch_concurrency: int = 2
    """Dispatch rounds in flight at once: one pops while another publishes."""
    dispatch_idle_interval: float = 0.05
    """How often an idle dispatcher looks for pods other replicas made active."""
    hints: QueueingHints = field(default_factory=QueueingHints.default)
    reclaim_by_requeue: bool = True
    """Quota reclaim (reclaimWithinCohort) evicts a borrower's pod by putting it back to
    waiting in the store. Off in Kubernetes mode, where the API server owns the pods."""
    fair_sharing_strategies: tuple[str, ...] = ()
    """Kueue's fairSharing.preemptionStrategies: preemption across a cohort by dominant
    resource share (services.queue.quota.fair_preemption); () keeps classical preemption."""
    admission_fair_sharing_half_life_s: float = 0.0
    """Kueue's admissionFairSharing.usageHalfLifeTime: LocalQueues' usage decays with this
    half-life, and orders the workloads of UsageBasedAdmissionFairSharing ClusterQueues
    (0: off)."""
    quota_round_interval: float = 0.05
    """Quota admission runs a round at most this often: events that come faster are taken
    together by the next round. A round reads every ClusterQueue's head; one round per event
    kept the queue's core busy on Kueue's baseline (40,000 rounds for 15,000 workloads)."""
    quota_reasons_interval: float = 1.0
    """Every waiting pod's reason (position, why, estimate) and the quota gauges are written
    at most this often: they cost O(backlog), a round between them O(what changed)."""
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    """Kueue's waitForPodsReady for quota-admitted workloads (services/queue/quota/ready.py)."""
    kueue_mode: str = KUEUE_MODE_BERTH
    """KUEUE_MODES: "kueue" turns berth's quota admission off (Kueue admits)."""
    topics: Topics = field(default_factory=Topics)
    group_id: str = "berth-queue"
    """Kafka consumer group of the queue replicas."""
    topic_partitions: int = 8

    def weight(self, tenant: str) -> int:
        return max(1, self.tenant_weights.get(tenant, self.default_tenant_weight))

    @classmethod
    def from_scheduler_config(cls, config: SchedulerConfiguration, **overrides: Any) -> QueueConfig:
        names = frozenset(p.scheduler_name for p in config.profiles) or frozenset(
            {DEFAULT_SCHEDULER_NAME}
        )
        base = cls(
            initial_backoff_seconds=float(config.pod_initial_backoff_seconds),
            max_backoff_seconds=float(config.pod_max_backoff_seconds),
            max_in_unschedulable_seconds=float(
                config.pod_max_in_unschedulable_pods_duration_seconds
            ),
            scheduler_names=names,
        )
        return replace(base, **overrides)
