"""`berth bench --mode kueue` end to end: the scaled-down Kueue config (examples/kueue-perf/
small) on the whole stack (queue, worker, binder as processes on the real Redis and broker),
time-compressed; the summary must be consistent with itself and with the quotas, and a
rangespec it cannot meet must fail (exit code 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.bench.kueue import run_kueue_async
from cli.bench.kueue_cli import finish_result
from cli.bench.kueue_config import lower_bound_ms, parse_generator, plan_of
from cli.servers import DevServers

SMALL = Path(__file__).resolve().parents[2] / "examples" / "kueue-perf" / "small"


@pytest.mark.parametrize("runtime_from", ["admission", "start"])
async def test_small_kueue_config_end_to_end(dev_servers: DevServers, runtime_from: str) -> None:
    """Workloads run from their admission (Kueue's runner: the harness ends them) or from
    their pod's start (the node agent's pod-complete stage ends them)."""
    plan = plan_of(parse_generator((SMALL / "generator.yaml").read_text()))
    result = await run_kueue_async(
        plan, time_scale=2.0, timeout_s=240, servers=dev_servers, runtime_from=runtime_from
    )
    assert result["settled"]
    assert result["timeScale"] == 2.0
    assert result["runtimeFrom"] == runtime_from
    assert result["created"] == result["admitted"] == result["finished"] == 82
    classes = result["workloadClasses"]
    assert {name: c["count"] for name, c in classes.items()} == {
        "small": 60,
        "medium": 16,
        "large": 6,
    }
    runtime = {"small": 200, "medium": 500, "large": 1000}
    for name, c in classes.items():
        assert c["averageTimeToAdmissionMs"] >= 0
        assert c["averageTimeToFinishMs"] >= c["averageTimeToAdmissionMs"] + runtime[name]
        assert c["totalEvictions"] >= 0
        # from the last admission to the start: never negative (an earlier life's start
        # is not this admission's)
        assert c["averageAdmissionToStartMs"] is None or c["averageAdmissionToStartMs"] >= 0
    # Usage never above what quota allows: a queue within nominal + borrowingLimit, the
    # cohort within its total nominal quota.
    assert set(result["peakUsage"]) == {q.name for q in plan.queues}
    assert all(0 < peak <= 4000 + 4000 for peak in result["peakUsage"].values())
    assert result["peakCohortUsage"] == {"cohort-0": result["peakCohortUsage"]["cohort-0"]}
    assert 0 < result["peakCohortUsage"]["cohort-0"] <= 8000
    cq = result["clusterQueueClasses"]["cq"]
    assert cq["nominalQuota"] == 8000
    assert 0 < cq["usagePercent"] <= 100
    assert cq["cpuAverageUsage"] <= cq["nominalQuota"]
    # No run beats the lower bound the quotas and runtimes allow.
    assert result["lowerBoundWallMs"] == lower_bound_ms(plan) == 6750
    assert result["wallMs"] >= result["lowerBoundWallMs"]
    assert result["wallToLowerBound"] >= 1.0
    assert result["cpuSecondsTotal"] > 0
    assert result["harnessCpuSeconds"] > 0
    # Redis's work per workload: each one's pod is written, admitted, bound and ended by
    # script calls, each request batch read once.
    redis = result["redisUsPerWorkload"]
    assert redis["evalsha"]["calls"] >= 2
    assert redis["evalsha"]["us"] > 0
    assert redis["(reads)"]["calls"] > 0
    # The queue's estimated admission times were read from waiting pods' reasons and
    # compared with the admissions that followed.
    estimates = result["admissionEstimates"]
    assert estimates["count"] > 0
    assert 0 <= estimates["medianAbsErrorMs"] <= estimates["p90AbsErrorMs"]
    # The loose range is met; an impossible one fails with the checker's reasons.
    assert finish_result(dict(result), "small", (SMALL / "rangespec.yaml").read_text()) == 0
    impossible = (
        "cmd: {maxWallMs: 1000}\nclusterQueueClassesMinUsage: {cq: 100}\n"
        "wlClassesMaxAvgTimeToAdmissionMs: {small: 0, medium: 0, large: 0}\n"
    )
    checked = dict(result)
    assert finish_result(checked, "impossible", impossible) == 1
    failures = checked["rangeCheck"]["failures"]
    assert failures[0].startswith("Wall time ")
    assert any("Usage" in f for f in failures)
