"""`berth bench --mode distributed` on a small cluster (the real figures are in the README)."""

from __future__ import annotations

from cli.bench.distributed import bench_distributed_async, cpu_seconds
from cli.servers import DevServers


async def test_a_small_distributed_bench_reports_every_figure(dev_servers: DevServers) -> None:
    result = await bench_distributed_async(nodes=50, pods=200, workers=2, servers=dev_servers)
    assert (result["bound"], result["settled"], result["conflicts"]) == (200, True, 0)
    assert result["pods_per_second"] > 0
    assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"]
    assert set(result["stage_p50_ms"]) == {
        "enqueue_to_dispatch",
        "dispatch_to_proposal",
        "proposal_to_bound",
    }
    assert sum(result["worker_pods"].values()) >= 200
    assert {"queue-0", "binder-0", "worker-0", "worker-1"} <= set(result["cpu_seconds"])


def test_cpu_seconds_of_a_missing_process_is_zero() -> None:
    assert cpu_seconds(None) == 0.0
    assert cpu_seconds(2**22 + 12345) == 0.0
