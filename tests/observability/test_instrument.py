"""The worker's framework instrumentation (services/scheduler/instrument.py): kube-scheduler's
extension point and plugin histograms, and a span per extension point and per plugin under a
traced scheduling cycle, read back from an OTLP receiver."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry

from scheduling.cache.local import LocalCluster
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.framework.status import Code, Status
from scheduling.plugins.registry import in_tree_registry
from services.scheduler.cycle import decide
from services.scheduler.instrument import CycleSampler, instrument, report_reuse, status_label
from shared.config import load_config
from shared.messaging.messages import ScheduleRequest
from shared.models import Pod, encode
from shared.observability.metrics import BerthMetrics
from shared.observability.tracing import (
    ATTR_EXTENSION_POINT,
    ATTR_PLUGIN,
    ATTR_STATUS_CODE,
    SPAN_SCHEDULING_CYCLE,
    scheduling_cycle_span,
)
from shared.observability.tracing_setup import Tracing
from tests.builders import make_node, make_pod
from tests.observability.otlp_receiver import OtlpReceiver

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
PROFILE = "default-scheduler"


def request(pod: Pod) -> ScheduleRequest:
    return ScheduleRequest(
        tenant=pod.metadata.namespace,
        pod_key=pod.key,
        uid=pod.metadata.uid,
        attempt=1,
        scheduling_cycle=1,
        priority=0,
        timestamp=0.0,
        initial_attempt_timestamp=0.0,
        lease_expires_at=0.0,
        pod=encode(pod),
    )


def cluster() -> tuple[LocalCluster, dict[str, Framework]]:
    cache = LocalCluster([make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in range(3)])
    return cache, build_frameworks(load_config(HEADER), in_tree_registry(), cache)


@pytest.mark.parametrize(
    ("result", "label"),
    [
        pytest.param(Status(), "Success", id="status"),
        pytest.param(Status(Code.UNSCHEDULABLE, ("no",)), "Unschedulable", id="unschedulable"),
        pytest.param((None, Status(Code.ERROR, ("x",))), "Error", id="tuple"),
        pytest.param(None, "Success", id="nothing"),
        pytest.param(42, "Success", id="a-number"),
    ],
)
def test_status_label(result: object, label: str) -> None:
    assert status_label(result) == label


def test_extension_points_and_plugins_are_timed_once_per_call() -> None:
    registry = CollectorRegistry()
    metrics = BerthMetrics(registry)
    cache, frameworks = cluster()
    sampler = instrument(frameworks, metrics, CycleSampler(100))
    instrument(frameworks, metrics, sampler)  # idempotent: nothing is timed twice
    fits, unfit = make_pod("fits").req(cpu="1").obj(), make_pod("big").req(cpu="64").obj()
    for pod in (fits, unfit):
        sampler.begin_cycle()
        decide(frameworks, cache, request(pod), now=0.0)
    points = "scheduler_framework_extension_point_duration_seconds_count"

    def count(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    # (the unfit pod runs PreFilter and Filter again outside the signature cache)
    assert count(points, extension_point="PreFilter", status="Success", profile=PROFILE) >= 2
    assert count(points, extension_point="Filter", status="Success", profile=PROFILE) >= 2
    # PostFilter's dry run is part of PostFilter, not counted as more PreFilter/Filter runs
    assert count(points, extension_point="PostFilter", status="Unschedulable", profile=PROFILE) == 1
    # only the pod that fits reached Reserve and Permit (its scores came from the signature
    # cache, which calls the Score plugins itself: no run of the Score extension point)
    assert count(points, extension_point="Reserve", status="Success", profile=PROFILE) == 1
    assert count(points, extension_point="Permit", status="Success", profile=PROFILE) == 1
    plugin = "scheduler_plugin_execution_duration_seconds_count"
    fit_filter = {"plugin": "NodeResourcesFit", "extension_point": "Filter"}
    assert count(plugin, **fit_filter, status="Success") >= 1
    assert count(plugin, **fit_filter, status="UnschedulableAndUnresolvable") >= 1


def test_plugins_are_timed_in_the_sampled_cycles_only() -> None:
    registry = CollectorRegistry()
    metrics = BerthMetrics(registry)
    cache, frameworks = cluster()
    sampler = instrument(frameworks, metrics, CycleSampler(0))
    sampler.begin_cycle()
    decide(frameworks, cache, request(make_pod("p").req(cpu="1").obj()), now=0.0)
    plugin = "scheduler_plugin_execution_duration_seconds_count"
    assert not any(s.name == plugin for f in registry.collect() for s in f.samples if s.value)
    assert CycleSampler(10, random.Random(1)).percent == 10


def test_a_traced_cycle_has_a_span_per_extension_point_and_plugin(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    cache, frameworks = cluster()
    instrument(frameworks, BerthMetrics(CollectorRegistry()))
    unfit = make_pod("big").req(cpu="64").obj()
    with scheduling_cycle_span(request(unfit)):
        decide(frameworks, cache, request(unfit), now=0.0)
    tracing.shutdown()
    spans = receiver.wait_for(4)
    (cycle,) = receiver.by_name(SPAN_SCHEDULING_CYCLE)
    points = {s.name: s for s in spans if s.parent_span_id == cycle.span_id}
    assert {"PreFilter", "Filter", "PostFilter"} <= set(points)
    assert all(s.attributes[ATTR_EXTENSION_POINT] == n for n, s in points.items())
    plugins = [s for s in spans if s.parent_span_id == points["Filter"].span_id]
    by_plugin = {s.attributes[ATTR_PLUGIN]: s for s in plugins}
    fit = by_plugin["NodeResourcesFit"]
    assert fit.attributes[ATTR_STATUS_CODE] == "UnschedulableAndUnresolvable"
    assert fit.status_code == 0  # a plugin rejecting nodes did not fail
    assert by_plugin["NodeName"].attributes[ATTR_STATUS_CODE] == "Success"
    post_filter = [s for s in spans if s.parent_span_id == points["PostFilter"].span_id]
    assert [s.attributes[ATTR_PLUGIN] for s in post_filter] == ["DefaultPreemption"]


def test_signature_reuse_is_counted_by_result() -> None:
    """berth_signature_reuse_total: the first pod of a signature builds its entry, the next
    ones hit it, the cache's fallbacks are full cycles; each report adds only what happened
    since the last."""
    registry = CollectorRegistry()
    metrics = BerthMetrics(registry)
    cache, frameworks = cluster()
    seen: dict[tuple[str, str], int] = {}
    for i in range(3):
        decide(frameworks, cache, request(make_pod(f"same-{i}").req(cpu="1").obj()), now=0.0)
    report_reuse(frameworks, metrics, seen)
    report_reuse(frameworks, metrics, seen)  # nothing new: nothing added

    def count(result: str) -> float:
        labels = {"profile": PROFILE, "result": result}
        return registry.get_sample_value("berth_signature_reuse_total", labels) or 0.0

    assert (count("build"), count("hit"), count("full")) == (1.0, 2.0, 0.0)
    # A pod the cache gives up on (here: a nominated pod in the cluster) takes the full cycle.
    signatures = frameworks[PROFILE].signatures
    assert signatures is not None
    signatures.stats.fallbacks["nominated pods"] += 1
    report_reuse(frameworks, metrics, seen)
    assert (count("build"), count("hit"), count("full")) == (1.0, 2.0, 1.0)
