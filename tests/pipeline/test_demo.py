"""`berth demo`: the bundled workload, and a small demo end to end on the session's servers."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from cli.demo import format_summary, run_demo
from cli.demo_workload import GANG_SIZE, GPU, GPUS_PER_NODE, demo_workload
from cli.run import pipeline
from cli.servers import DevServers
from shared.models import POD_GROUP_LABEL, pod_requests
from shared.observability.stats import percentile


def test_the_bundled_workload_has_every_kind_of_pod() -> None:
    workload = demo_workload(1000, 10_000, seed=0)
    base = workload.base
    assert len(base.nodes) == 1000
    assert workload.pod_count == 10_000 + len(workload.preemptors.pods)
    zones = Counter(n.metadata.labels["topology.kubernetes.io/zone"] for n in base.nodes)
    assert sorted(zones.values()) == [333, 333, 334]
    assert {p.metadata.namespace for p in base.pods} == {"team-a", "team-b", "team-c"}
    tiers = Counter(p.metadata.labels["tier"] for p in base.pods)
    assert set(tiers) == {"batch", "web", "db", "train", "gpu"}
    assert sum(1 for p in base.pods if p.metadata.name.startswith("huge-")) == 10
    assert tiers["train"] == len(base.pod_groups) * GANG_SIZE
    assert all(
        p.metadata.labels[POD_GROUP_LABEL]
        for p in base.pods
        if p.metadata.labels["tier"] == "train"
    )
    gpus = sum(n.status.allocatable.get(GPU, 0) for n in base.nodes)
    assert (
        gpus
        == tiers["gpu"]
        == sum(GPUS_PER_NODE for n in base.nodes if GPU in n.status.allocatable)
    )
    assert all(pod_requests(p).get(GPU) == 1 for p in workload.preemptors.pods)
    assert demo_workload(1000, 10_000, seed=0).base.pods[0].key == base.pods[0].key


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param([], 50, 0.0, id="empty"),
        pytest.param([5.0], 99, 5.0, id="one"),
        pytest.param([float(v) for v in range(1, 101)], 50, 50.0, id="p50"),
        pytest.param([float(v) for v in range(1, 101)], 99, 99.0, id="p99"),
        pytest.param([3.0, 1.0, 2.0], 100, 3.0, id="max-unsorted"),
    ],
)
def test_percentile(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


async def test_a_small_demo_end_to_end(dev_servers: DevServers) -> None:
    workload = demo_workload(nodes=40, pods=300, seed=5)
    summary = await run_demo(
        workload,
        workers=2,
        seconds=180,
        progress=False,
        run_factory=functools.partial(pipeline, servers=dev_servers),
    )
    assert summary.settled
    assert summary.violations == 0
    assert summary.preemptions == len(workload.preemptors.pods)
    assert summary.gangs_bound == summary.gangs == 1
    assert summary.pods_per_second > 0
    assert 0 < summary.latency_p50_ms <= summary.latency_p99_ms
    assert set(summary.utilisation) == {"zone-a", "zone-b", "zone-c"}
    assert summary.pending == 1  # the pod bigger than any node
    ((count, reason),) = summary.top_pending_reasons
    assert count == 1
    assert "Insufficient cpu" in reason
    text = format_summary(summary)
    assert "pods/s" in text
    assert "p50" in text
    assert "Insufficient cpu" in text
