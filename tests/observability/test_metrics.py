"""shared.observability.metrics: upstream names and labels, the helpers, and consumer lag on a real
broker."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared.messaging.kafka import Topics, ensure_topics, make_producer
from shared.observability.metrics import (
    BerthMetrics,
    MetricsError,
    consumer_lag_by_topic,
    default_metrics,
    report_consumer_lag,
)


@pytest.fixture
def metrics() -> BerthMetrics:
    return BerthMetrics(CollectorRegistry())


def sample(metrics: BerthMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def families(metrics: BerthMetrics) -> dict[str, tuple[str, set[str]]]:
    """name -> (type, label names) as a scraper parses the exposition."""
    text = generate_latest(metrics.registry).decode()
    out: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        labels = {k for s in family.samples for k in s.labels} - {"le"}
        out[family.name] = (family.type, labels)
    return out


@pytest.mark.parametrize(
    ("name", "kind", "labels"),
    [
        pytest.param("scheduler_pending_pods", "gauge", {"queue"}, id="pending"),
        pytest.param(
            "scheduler_schedule_attempts", "counter", {"result", "profile"}, id="attempts"
        ),
        pytest.param(
            "scheduler_scheduling_attempt_duration_seconds",
            "histogram",
            {"result", "profile"},
            id="e2e",
        ),
        pytest.param(
            "scheduler_framework_extension_point_duration_seconds",
            "histogram",
            {"extension_point", "status", "profile"},
            id="extension-points",
        ),
        pytest.param("berth_conflicts", "counter", {"reason"}, id="conflicts"),
        pytest.param("berth_binding_duration_seconds", "histogram", {"result"}, id="binding"),
        pytest.param("berth_consumer_lag", "gauge", {"topic"}, id="lag"),
    ],
)
def test_families_are_named_like_kube_scheduler(
    metrics: BerthMetrics, name: str, kind: str, labels: set[str]
) -> None:
    metrics.set_pending({})
    metrics.record_attempt("scheduled", 0.01)
    metrics.observe_extension_point("Filter", 0.001)
    metrics.conflict("reserve")
    metrics.record_binding("bound", 0.02)
    metrics.set_consumer_lag({"berth.schedule": 4})
    assert families(metrics)[name] == (kind, labels)


def test_counters_are_exposed_with_the_total_suffix(metrics: BerthMetrics) -> None:
    metrics.record_attempt("unschedulable")
    metrics.conflict("reserve")
    metrics.conflict("reserve")
    text = generate_latest(metrics.registry).decode()
    assert (
        'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"}'
        in (text)
    )
    assert 'berth_conflicts_total{reason="reserve"} 2.0' in text


def test_set_pending_sets_all_four_queues(metrics: BerthMetrics) -> None:
    metrics.set_pending({"active": 3, "unschedulable": 2, "gated": 1, "backoff": 5})
    metrics.set_pending({"active": 4})
    values = {q: sample(metrics, "scheduler_pending_pods", queue=q) for q in ("active", "backoff")}
    assert values == {"active": 4.0, "backoff": 0.0}
    assert sample(metrics, "scheduler_pending_pods", queue="gated") == 0.0


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        pytest.param("set_pending", {"waiting": 1}, id="unknown-queue"),
        pytest.param("record_attempt", "bound", id="unknown-result"),
    ],
)
def test_unknown_label_values_are_refused(metrics: BerthMetrics, call: str, arg: object) -> None:
    with pytest.raises(MetricsError):
        getattr(metrics, call)(arg)


@pytest.mark.parametrize(
    ("result", "seconds", "count", "e2e_count"),
    [
        pytest.param("scheduled", 0.5, 1.0, 1.0, id="with-latency"),
        pytest.param("conflict", None, 1.0, None, id="count-only"),
    ],
)
def test_record_attempt(
    metrics: BerthMetrics,
    result: str,
    seconds: float | None,
    count: float,
    e2e_count: float | None,
) -> None:
    metrics.record_attempt(result, seconds, profile="batch")
    labels = {"result": result, "profile": "batch"}
    assert sample(metrics, "scheduler_schedule_attempts_total", **labels) == count
    assert (
        sample(metrics, "scheduler_scheduling_attempt_duration_seconds_count", **labels)
        == e2e_count
    )


def test_time_extension_point_records_the_status(metrics: BerthMetrics) -> None:
    with metrics.time_extension_point("Filter"):
        pass
    with metrics.time_extension_point("Filter", profile="batch") as timer:
        timer.status = "Unschedulable"
    with pytest.raises(ValueError, match="boom"), metrics.time_extension_point("Score"):
        raise ValueError("boom")
    name = "scheduler_framework_extension_point_duration_seconds_count"
    expected = {
        ("Filter", "Success", "default-scheduler"): 1.0,
        ("Filter", "Unschedulable", "batch"): 1.0,
        ("Score", "Error", "default-scheduler"): 1.0,
    }
    for (point, status, profile), count in expected.items():
        labels = {"extension_point": point, "status": status, "profile": profile}
        assert sample(metrics, name, **labels) == count
    bucket = sample(
        metrics,
        "scheduler_framework_extension_point_duration_seconds_bucket",
        extension_point="Filter",
        status="Success",
        profile="default-scheduler",
        le="0.0001",
    )
    assert bucket is not None  # upstream buckets: exponential from 0.1 ms


def test_default_metrics_is_one_instance_on_the_global_registry() -> None:
    assert default_metrics() is default_metrics()
    assert default_metrics().registry is REGISTRY


# ----------------------------------------------------------------------- consumer lag
async def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = make_producer(bootstrap)
    await producer.start()
    try:
        for i in range(count):
            await producer.send(topic, f"m{i}".encode(), key=b"k", partition=0)
        await producer.flush()
    finally:
        await producer.stop()


async def test_consumer_lag_is_highwater_minus_position(
    kafka_bootstrap: str, topics: Topics, group_id: str, metrics: BerthMetrics
) -> None:
    await ensure_topics(kafka_bootstrap, [topics.proposals], partitions=1)
    await _produce(kafka_bootstrap, topics.proposals, 10)
    consumer = AIOKafkaConsumer(
        topics.proposals,
        bootstrap_servers=kafka_bootstrap,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=1500,
        heartbeat_interval_ms=300,
    )
    await consumer.start()
    try:
        consumed = 0
        for _ in range(100):
            batches = await consumer.getmany(timeout_ms=200, max_records=3)
            consumed += sum(len(records) for records in batches.values())
            if consumed:
                break
        assert consumed == 3
        assert await consumer_lag_by_topic(consumer) == {topics.proposals: 7}

        task = asyncio.create_task(report_consumer_lag(consumer, metrics, interval=0.01))
        for _ in range(200):
            if sample(metrics, "berth_consumer_lag", topic=topics.proposals) is not None:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert sample(metrics, "berth_consumer_lag", topic=topics.proposals) == 7.0
    finally:
        await consumer.stop()


async def test_consumer_lag_is_zero_for_a_topic_without_partitions_here() -> None:
    class Unassigned:
        def subscription(self) -> frozenset[str]:
            return frozenset({"berth.schedule"})

        def assignment(self) -> frozenset[object]:
            return frozenset()

    assert await consumer_lag_by_topic(Unassigned()) == {"berth.schedule": 0}


# ------------------------------------------------------------ upstream names, labels, buckets
def _exp(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


@pytest.mark.parametrize(
    ("name", "kind", "labels", "buckets"),
    [
        # kubernetes/kubernetes pkg/scheduler/metrics/metrics.go
        ("scheduler_schedule_attempts", "counter", ["result", "profile"], None),
        (
            "scheduler_scheduling_attempt_duration_seconds",
            "histogram",
            ["result", "profile"],
            _exp(0.001, 2, 15),
        ),
        ("scheduler_scheduling_algorithm_duration_seconds", "histogram", [], _exp(0.001, 2, 15)),
        ("scheduler_preemption_victims", "histogram", [], _exp(1, 2, 7)),
        ("scheduler_preemption_attempts", "counter", [], None),
        ("scheduler_pending_pods", "gauge", ["queue"], None),
        (
            "scheduler_pod_scheduling_sli_duration_seconds",
            "histogram",
            ["attempts"],
            _exp(0.01, 2, 20),
        ),
        ("scheduler_pod_scheduling_attempts", "histogram", [], _exp(1, 2, 5)),
        (
            "scheduler_framework_extension_point_duration_seconds",
            "histogram",
            ["extension_point", "status", "profile"],
            _exp(0.0001, 2, 12),
        ),
        (
            "scheduler_plugin_execution_duration_seconds",
            "histogram",
            ["plugin", "extension_point", "status"],
            _exp(0.00001, 1.5, 20),
        ),
        ("scheduler_queue_incoming_pods", "counter", ["queue", "event"], None),
        ("scheduler_permit_wait_duration_seconds", "histogram", ["result"], _exp(0.001, 2, 15)),
        ("scheduler_scheduler_cache_size", "gauge", ["type"], None),
        ("scheduler_unschedulable_pods", "gauge", ["plugin", "profile"], None),
        ("berth_signature_reuse", "counter", ["profile", "result"], None),
        # kubernetes-sigs/kueue pkg/metrics/metrics.go
        ("kueue_admission_attempts", "counter", ["result"], None),
        ("kueue_pending_workloads", "gauge", ["cluster_queue", "status"], None),
        ("kueue_quota_reserved_workloads", "counter", ["cluster_queue"], None),
        (
            "kueue_quota_reserved_wait_time_seconds",
            "histogram",
            ["cluster_queue"],
            [1.0, *_exp(2.5, 2, 13)],
        ),
        ("kueue_admitted_workloads", "counter", ["cluster_queue"], None),
        (
            "kueue_admission_wait_time_seconds",
            "histogram",
            ["cluster_queue"],
            [1.0, *_exp(2.5, 2, 13)],
        ),
        ("kueue_evicted_workloads", "counter", ["cluster_queue", "reason"], None),
        ("kueue_reserving_active_workloads", "gauge", ["cluster_queue"], None),
        ("kueue_admitted_active_workloads", "gauge", ["cluster_queue"], None),
        ("kueue_cluster_queue_status", "gauge", ["cluster_queue", "status"], None),
        (
            "kueue_cluster_queue_resource_reservation",
            "gauge",
            ["cohort", "cluster_queue", "flavor", "resource"],
            None,
        ),
        (
            "kueue_cluster_queue_borrowing_limit",
            "gauge",
            ["cohort", "cluster_queue", "flavor", "resource"],
            None,
        ),
        ("kueue_cluster_queue_weighted_share", "gauge", ["cluster_queue"], None),
        (
            "kueue_preempted_workloads",
            "counter",
            ["preempting_cluster_queue", "reason"],
            None,
        ),
        (
            "kueue_local_queue_pending_workloads",
            "gauge",
            ["name", "namespace", "status"],
            None,
        ),
        ("kueue_local_queue_reserving_active_workloads", "gauge", ["name", "namespace"], None),
        ("kueue_local_queue_admitted_active_workloads", "gauge", ["name", "namespace"], None),
        ("kueue_local_queue_quota_reserved_workloads", "counter", ["name", "namespace"], None),
        ("kueue_local_queue_admitted_workloads", "counter", ["name", "namespace"], None),
        (
            "kueue_local_queue_evicted_workloads",
            "counter",
            ["name", "namespace", "reason"],
            None,
        ),
        (
            "kueue_local_queue_admission_wait_time_seconds",
            "histogram",
            ["name", "namespace"],
            [1.0, *_exp(2.5, 2, 13)],
        ),
        (
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "histogram",
            ["name", "namespace"],
            [1.0, *_exp(2.5, 2, 13)],
        ),
        ("kueue_local_queue_status", "gauge", ["name", "namespace", "active"], None),
    ],
)
def test_upstream_names_labels_and_buckets(
    metrics: BerthMetrics,
    name: str,
    kind: str,
    labels: list[str],
    buckets: list[float] | None,
) -> None:
    (family,) = [f for f in metrics.registry.collect() if f.name == name]
    assert family.type == kind
    registered = metrics.registry._names_to_collectors
    collector: Any = registered[name + ("_total" if kind == "counter" else "")]
    assert list(collector._labelnames) == labels
    if buckets is not None:
        assert list(collector._upper_bounds[:-1]) == pytest.approx(buckets)


def test_no_family_uses_a_name_kueue_does_not_define(metrics: BerthMetrics) -> None:
    kueue = {f.name for f in metrics.registry.collect() if f.name.startswith("kueue_")}
    assert "kueue_cluster_queue_borrowing" not in kueue


@pytest.mark.parametrize("reason", ["reserve", "cross_node", "kept_changing", "api"])
def test_conflicts_by_reason(metrics: BerthMetrics, reason: str) -> None:
    metrics.conflict(reason)
    assert sample(metrics, "berth_conflicts_total", reason=reason) == 1


def test_an_unknown_conflict_reason_is_refused(metrics: BerthMetrics) -> None:
    with pytest.raises(MetricsError, match="unknown conflict reason 'node'"):
        metrics.conflict("node")


def test_record_scheduled_labels_the_sli_by_attempts(metrics: BerthMetrics) -> None:
    metrics.record_scheduled(3, 12.5)
    metrics.record_scheduled(0, None)  # an attempt count of 0 is counted as 1
    assert sample(metrics, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="3") == 1
    assert sample(metrics, "scheduler_pod_scheduling_attempts_count") == 2
    assert sample(metrics, "scheduler_pod_scheduling_attempts_bucket", le="1.0") == 1
