"""The Kubernetes-mode bench (tests/kube/bench.py) at a small size: every pod is bound
through pods/binding and every figure is reported."""

from __future__ import annotations

import pytest

from tests.kube.bench import bench


@pytest.mark.timeout(300)
async def test_the_kubernetes_mode_bench_binds_every_pod_and_reports_its_figures() -> None:
    result = await bench(10, 60, wait_s=120)
    assert result["bound"] == 60
    assert result["first_list_s"] > 0
    assert result["adapter_synced_s"] is not None
    assert result["pods_per_s"] is None or result["pods_per_s"] > 0
    assert {"adapter-0", "binder-0", "queue-0", "worker-0", "emulator"} <= set(
        result["cpu_ms_per_pod"]
    )
    assert result["adapter_rss_mb"] > 0
