"""Prometheus metrics of the berth services, named like kube-scheduler's where they correspond.

    metrics = default_metrics()                  # every family, on prometheus_client.REGISTRY
    metrics.set_pending({"active": 3, "backoff": 1})           # queue
    metrics.record_attempt("scheduled", seconds)               # whoever learns the result
    with metrics.time_extension_point("Filter"):               # worker
        ...
    metrics.conflicts.inc()                                    # binder
    metrics.binding_duration.labels(result="bound").observe(seconds)
    lag_task = asyncio.create_task(report_consumer_lag(consumer, metrics))

Upstream names and labels (pkg/scheduler/metrics/metrics.go):

- scheduler_pending_pods{queue}: active, backoff, unschedulable, gated. berth's counts come
  from Redis and are the same on every queue replica: aggregate with max(), not sum().
- scheduler_schedule_attempts_total{result, profile}: scheduled, unschedulable, error; berth
  adds "conflict" (the binder refused a proposal; not the pod's fault).
- scheduler_e2e_scheduling_duration_seconds{result, profile}: from dispatch to the attempt's
  result (upstream's pre-1.23 e2e latency: scheduling algorithm plus binding).
- scheduler_framework_extension_point_duration_seconds{extension_point, status, profile}.

berth's own: berth_conflicts_total, berth_binding_duration_seconds{result} (the binder's
check-and-reserve through PostBind), berth_consumer_lag{topic} (this replica's unconsumed
messages; the HorizontalPodAutoscalers scale on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar, cast

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from shared.observability.metrics_kueue import KueueMetrics

log = logging.getLogger(__name__)

_Family = TypeVar("_Family", Counter, Gauge, Histogram)

PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")
ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error", "conflict")
DEFAULT_PROFILE = "default-scheduler"
SUCCESS = "Success"
"""The `status` label of a successful extension point (upstream: the status code's name)."""


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets."""
    return tuple(start * factor**i for i in range(count))


E2E_BUCKETS = _exponential(0.001, 2, 15)
"""Upstream scheduling_attempt_duration_seconds (and permit_wait_duration_seconds): 1 ms .. 16 s."""
SLI_BUCKETS = _exponential(0.01, 2, 20)
"""Upstream pod_scheduling_sli_duration_seconds: 10 ms .. ~88 min."""
POD_ATTEMPTS_BUCKETS = _exponential(1, 2, 5)
"""Upstream pod_scheduling_attempts: 1 .. 16."""
VICTIMS_BUCKETS = _exponential(1, 2, 7)
"""Upstream preemption_victims: 1 .. 64."""
PLUGIN_BUCKETS = _exponential(0.00001, 1.5, 20)
"""Upstream plugin_execution_duration_seconds: 10 us .. ~22 ms."""
EXTENSION_POINT_BUCKETS = _exponential(0.0001, 2, 12)
"""Upstream framework_extension_point_duration_seconds: 0.1 ms .. 204.8 ms."""
BINDING_BUCKETS = _exponential(0.001, 2, 15)


class MetricsError(ValueError):
    """A label value berth does not define."""


class BerthMetrics(KueueMetrics):
    """Every berth metric family, registered on one registry (each service uses the ones it
    can observe; the others stay empty)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._children: dict[tuple[object, ...], Counter | Gauge | Histogram] = {}
        reg = self.registry
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods; 'gated' means number of gated pods.",
            ["queue"],
            registry=reg,
        )
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem; "
            "'conflict' means the binder refused a worker's proposal.",
            ["result", "profile"],
            registry=reg,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding: from the "
            "start of the worker's cycle to the attempt's result)",
            ["result", "profile"],
            buckets=E2E_BUCKETS,
            registry=reg,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            buckets=E2E_BUCKETS,
            registry=reg,
        )
        self.pod_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue, and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=reg,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=POD_ATTEMPTS_BUCKETS,
            registry=reg,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=reg,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=VICTIMS_BUCKETS,
            registry=reg,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=PLUGIN_BUCKETS,
            registry=reg,
        )
        self.incoming_pods = Counter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=reg,
        )
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "Duration of waiting on permit.",
            ["result"],
            buckets=E2E_BUCKETS,
            registry=reg,
        )
        self.cache_size = Gauge(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=reg,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment "
            "the gauge for all plugins that caused it to not schedule and so this metric have "
            "meaning only when broken down by plugin.",
            ["plugin", "profile"],
            registry=reg,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=EXTENSION_POINT_BUCKETS,
            registry=reg,
        )
        self.conflicts = Counter(
            "berth_conflicts",
            "Proposals the binder refused because the cluster changed since the worker's view "
            "(the pod goes straight back to active), by the reason's kind.",
            ["reason"],
            registry=reg,
        )
        self.dead_letters = Counter(
            "berth_dead_letters",
            "Messages this service sent to the dead-letter topic instead of acting on them.",
            ["topic"],
            registry=reg,
        )
        self.expired_leases = Counter(
            "berth_expired_leases",
            "Pods whose dispatch lease expired without an outcome (sent again).",
            registry=reg,
        )
        self.tenant_pending = Gauge(
            "berth_tenant_pending_pods",
            "Pending pods per tenant and queue (active, backoff, unschedulable, gated, "
            "in_flight). The same on every queue replica: aggregate with max().",
            ["tenant", "queue"],
            registry=reg,
        )
        self.trace_export_failures = Counter(
            "berth_trace_export_failures",
            "Span batches the OTLP exporter failed to deliver (the spans are lost).",
            registry=reg,
        )
        self.leader = Gauge(
            "berth_leader",
            "1 while this replica holds its leader Lease, else 0.",
            ["lease"],
            registry=reg,
        )
        self.follow_lag = Gauge(
            "berth_view_follow_lag",
            "Store changes not yet applied by this replica's view of the cluster "
            "(resourceVersion of the store minus the view's).",
            ["view"],
            registry=reg,
        )
        self.binding_duration = Histogram(
            "berth_binding_duration_seconds",
            "Binding cycle latency in seconds (check-and-reserve, WaitOnPermit, PreBind, Bind, "
            "PostBind), by the result.",
            ["result"],
            buckets=BINDING_BUCKETS,
            registry=reg,
        )
        self.signature_reuse = Counter(
            "berth_signature_reuse",
            "Scheduling cycles by how the worker's signature cache answered them: hit (the "
            "entry of the pod's scheduling signature, brought up to date), build (a new "
            "entry), full (the full cycle: the pod or the cluster made reuse impossible).",
            ["profile", "result"],
            registry=reg,
        )
        self.consumer_lag = Gauge(
            "berth_consumer_lag",
            "Messages not yet consumed by this replica on its assigned partitions of a topic "
            "(highwater mark minus position).",
            ["topic"],
            registry=reg,
        )

        KueueMetrics.__init__(self, reg)

    # ------------------------------------------------------------------------ queue
    def set_pending(self, counts: Mapping[str, int]) -> None:
        """Set all four pending gauges at once (a queue missing from `counts` is 0)."""
        unknown = set(counts) - set(PENDING_QUEUES)
        if unknown:
            raise MetricsError(f"unknown pending queue(s) {sorted(unknown)}: {PENDING_QUEUES}")
        for queue in PENDING_QUEUES:
            self._pending(queue).set(counts.get(queue, 0))

    # --------------------------------------------------------------------- attempts
    def record_attempt(
        self, result: str, seconds: float | None = None, *, profile: str = DEFAULT_PROFILE
    ) -> None:
        """Count one attempt's result, and its e2e latency when known."""
        if result not in ATTEMPT_RESULTS:
            raise MetricsError(f"unknown attempt result {result!r}: {ATTEMPT_RESULTS}")
        self._attempts(result, profile).inc()
        if seconds is not None:
            self._e2e(result, profile).observe(max(0.0, seconds))

    def record_scheduled(self, attempts: int, sli_seconds: float | None) -> None:
        """A pod bound: its attempts, and its SLI latency from its first entry in the queue."""
        attempts = max(1, attempts)
        self.pod_attempts.observe(attempts)
        if sli_seconds is not None:
            # Upstream's label is the attempt count as a string.
            label = str(attempts)
            self._child(self.pod_sli_duration, label).observe(max(0.0, sli_seconds))

    def record_preemption(self, victims: int) -> None:
        self.preemption_attempts.inc()
        if victims:
            self.preemption_victims.observe(victims)

    def observe_plugin(
        self, plugin: str, extension_point: str, seconds: float, status: str = SUCCESS
    ) -> None:
        self._child(self.plugin_duration, plugin, extension_point, status).observe(seconds)

    def conflict(self, reason: str) -> None:
        if reason not in CONFLICT_REASONS:
            raise MetricsError(f"unknown conflict reason {reason!r}: {CONFLICT_REASONS}")
        self._child(self.conflicts, reason).inc()

    # --------------------------------------------------------------------- framework
    def observe_extension_point(
        self,
        extension_point: str,
        seconds: float,
        *,
        status: str = SUCCESS,
        profile: str = DEFAULT_PROFILE,
    ) -> None:
        self._extension_point(extension_point, status, profile).observe(seconds)

    @contextlib.contextmanager
    def time_extension_point(
        self, extension_point: str, *, profile: str = DEFAULT_PROFILE
    ) -> Iterator[ExtensionPointTimer]:
        """Time the block; set `timer.status` to the status code's name ("Unschedulable")
        when it is not a success. An exception is recorded as "Error"."""
        timer = ExtensionPointTimer()
        started = time.perf_counter()
        try:
            yield timer
        except BaseException:
            timer.status = "Error"
            raise
        finally:
            self.observe_extension_point(
                extension_point,
                time.perf_counter() - started,
                status=timer.status,
                profile=profile,
            )

    # ----------------------------------------------------------------------- binder
    def record_binding(self, result: str, seconds: float) -> None:
        self._binding(result).observe(max(0.0, seconds))

    # ------------------------------------------------------------------------ kafka
    def set_consumer_lag(self, lags: Mapping[str, int]) -> None:
        for topic, lag in lags.items():
            self._lag(topic).set(lag)

    # Label children are cached: labels() takes a lock and builds a tuple on every call, and
    # the worker observes several extension points per pod.
    def _pending(self, queue: str) -> Gauge:
        return self._child(self.pending_pods, queue)

    def _attempts(self, result: str, profile: str) -> Counter:
        return self._child(self.schedule_attempts, result, profile)

    def _e2e(self, result: str, profile: str) -> Histogram:
        return self._child(self.attempt_duration, result, profile)

    def _extension_point(self, extension_point: str, status: str, profile: str) -> Histogram:
        return self._child(self.extension_point_duration, extension_point, status, profile)

    def _binding(self, result: str) -> Histogram:
        return self._child(self.binding_duration, result)

    def _lag(self, topic: str) -> Gauge:
        return self._child(self.consumer_lag, topic)

    def _child(self, family: _Family, *values: str) -> _Family:
        key = (id(family), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*values)
        return cast(_Family, child)


CONFLICT_REASONS = ("reserve", "cross_node", "kept_changing", "reservation_lost", "api")
"""The `reason` label of berth_conflicts_total: check-and-reserve refused (resources, ports,
nomination), the binder's InterPodAffinity/PodTopologySpread check failed, the pod or node
kept changing, the reservation was lost before Bind, the API server refused the binding."""


class ExtensionPointTimer:
    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status = SUCCESS


@functools.cache
def default_metrics() -> BerthMetrics:
    """The process's metrics, on prometheus_client's global REGISTRY (which also carries the
    process_* and python_* collectors). Created once."""
    return BerthMetrics(REGISTRY)


# ---------------------------------------------------------------------------- consumer lag
async def consumer_lag_by_topic(consumer: Any) -> dict[str, int]:
    """Unconsumed messages per topic over `consumer`'s assigned partitions (an aiokafka
    AIOKafkaConsumer): highwater minus position. Subscribed topics with no partition here
    report 0, so a replica that lost its partitions stops counting their lag."""
    from aiokafka.errors import IllegalStateError

    lags: dict[str, int] = dict.fromkeys(consumer.subscription() or (), 0)
    for tp in consumer.assignment():
        lags.setdefault(tp.topic, 0)
        # The embedded broker's end_offsets is wrong: the highwater of the last fetch is not.
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        try:
            position = await consumer.position(tp)
        except IllegalStateError:  # revoked since assignment() was read
            continue
        lags[tp.topic] += max(0, highwater - position)
    return lags


async def report_consumer_lag(
    consumer: Any, metrics: BerthMetrics | None = None, *, interval: float = 5.0
) -> None:
    """Refresh berth_consumer_lag every `interval` seconds until cancelled (run it as a task
    beside the consumer loop)."""
    metrics = metrics if metrics is not None else default_metrics()
    while True:
        try:
            metrics.set_consumer_lag(await consumer_lag_by_topic(consumer))
        except asyncio.CancelledError:
            raise
        except Exception:  # a metrics refresh must never stop a service
            log.exception("berth_consumer_lag: refresh failed")
        await asyncio.sleep(interval)
