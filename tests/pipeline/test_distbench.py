"""`berth bench --mode distributed` on a small cluster (the real figures are in the README)."""

from __future__ import annotations

import pytest

from cli.bench.distributed import bench_distributed_async, cpu_seconds, redis_us_per_pod
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
    # Each pod's creation and binding are change-stream entries, written by scripts.
    redis = result["redis_us_per_pod"]
    assert redis["xadd"]["calls"] >= 2
    assert redis["evalsha"]["us"] > 0
    assert redis["(reads)"]["calls"] > 0
    # The bench's own CPU (apply, observer, waiting) is shown apart from the pipeline's.
    assert result["harness_cpu_ms_per_pod"] > 0
    assert "harness" not in result["cpu_ms_per_pod"]


async def test_steady_load_offers_pods_open_loop(dev_servers: DevServers) -> None:
    """--rate 40 --duration 2: 80 pods offered over ~2 s (not at once), every one bound,
    latency and CPU per pod reported."""
    result = await bench_distributed_async(
        nodes=20, rate=40.0, duration=2.0, workers=1, servers=dev_servers
    )
    assert (result["pods"], result["bound"], result["settled"]) == (80, 80, True)
    assert (result["rate"], result["duration"]) == (40.0, 2.0)
    # Open loop: the last pod was due ~1.975 s after the first, whatever the pipeline did.
    assert result["apply_seconds"] >= 1.9
    assert 0 < result["latency_p50_ms"] <= result["latency_p99_ms"]
    per_pod = result["cpu_ms_per_pod"]
    assert per_pod["total"] == pytest.approx(
        sum(v for k, v in per_pod.items() if k != "total"), abs=0.01
    )
    assert per_pod["worker-0"] > 0


async def test_a_rate_needs_a_duration(dev_servers: DevServers) -> None:
    with pytest.raises(ValueError, match="--rate needs a positive --duration"):
        await bench_distributed_async(nodes=5, rate=10.0, servers=dev_servers)


def test_cpu_seconds_of_a_missing_process_is_zero() -> None:
    assert cpu_seconds(None) == 0.0
    assert cpu_seconds(2**22 + 12345) == 0.0


def test_redis_time_per_pod_is_the_difference_of_two_readings_ranked() -> None:
    before = {"get": (10, 100), "evalsha": (5, 1_000)}
    after = {"get": (30, 300), "evalsha": (25, 9_000), "xadd": (45, 500), "ping": (1, 0)}
    assert redis_us_per_pod(before, after, pods=10, top=2) == {
        "evalsha": {"us": 800.0, "calls": 2.0},
        "xadd": {"us": 50.0, "calls": 4.5},
    }
    before["(reads)"], after["(reads)"] = (100, 0), (160, 0)
    assert redis_us_per_pod(before, after, pods=10, top=1) == {
        "evalsha": {"us": 800.0, "calls": 2.0},
        "(reads)": {"us": 0.0, "calls": 6.0},
    }
