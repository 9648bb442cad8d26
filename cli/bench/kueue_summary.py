"""Kueue's performance summary and range check, from what the harness recorded (pure).

As Kueue's recorder (test/performance/scheduler/runner/recorder) computes it:

- per ClusterQueue class: `cpuUsed`, the sum over its queues of cpu usage (mCPU) x time (ms);
  `nominalQuota`, the sum of their nominal quotas (mCPU); `cpuAverageUsage`, cpuUsed over the
  monitored time (first event to the last of the class's queues), mCPU;
- per workload class: `count`, `averageTimeToAdmissionMs` (creation to its last admission),
  `averageTimeToFinishMs` (creation to finished) and `totalEvictions`.

And as Kueue's checker (test/performance/scheduler/checker) checks it: wall time at most
`cmd.maxWallMs`, each ClusterQueue class's usage (cpuUsed x 100 / (nominalQuota x monitored
ms)) at least its minimum, each workload class's average time to admission at most its
maximum, and a class the rangespec does not name is a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cli.bench.kueue_config import Plan, RangeSpec


@dataclass(slots=True)
class WorkloadRecord:
    """One workload's life, in ms since the start (config time)."""

    name: str
    queue: str
    class_name: str
    cpu_milli: int
    created_ms: float
    admitted_ms: float | None = None
    finished_ms: float | None = None
    evictions: int = 0
    periods: list[tuple[float, float]] = field(default_factory=list)
    """Admitted from, to (to an eviction or its finish): when it held its quota."""
    started_ms: float | None = None
    """When its node started the run that finished (the agent saw it bound)."""


def summarize(plan: Plan, records: Iterable[WorkloadRecord]) -> dict[str, Any]:
    """Kueue's summary (see the module docstring)."""
    by_queue = {q.name: q for q in plan.queues}
    cq: dict[str, dict[str, Any]] = {}
    for q in plan.queues:
        entry = cq.setdefault(q.class_name, {"cpuUsed": 0.0, "nominalQuota": 0, "last": 0.0})
        entry["nominalQuota"] += q.spec.nominal_milli
    wl: dict[str, dict[str, Any]] = {}
    for r in records:
        cls = cq[by_queue[r.queue].class_name]
        for start, end in r.periods:
            cls["cpuUsed"] += r.cpu_milli * (end - start)
            cls["last"] = max(cls["last"], end)
        w = wl.setdefault(
            r.class_name,
            {"count": 0, "admit": 0.0, "finish": 0.0, "totalEvictions": 0, "start": 0.0, "n": 0},
        )
        w["count"] += 1
        if r.admitted_ms is not None:
            w["admit"] += r.admitted_ms - r.created_ms
        if r.finished_ms is not None:
            w["finish"] += r.finished_ms - r.created_ms
        w["totalEvictions"] += r.evictions
        if r.started_ms is not None and r.finished_ms is not None and r.periods:
            w["start"] += r.started_ms - r.periods[-1][0]
            w["n"] += 1
    classes = {}
    for name, entry in sorted(cq.items()):
        monitored = entry["last"]
        used = int(entry["cpuUsed"])
        classes[name] = {
            "cpuUsed": used,
            "cpuAverageUsage": int(used // monitored) if monitored > 0 else 0,
            "nominalQuota": entry["nominalQuota"],
            "monitoredMs": int(monitored),
            "usagePercent": round(used * 100 / (entry["nominalQuota"] * monitored), 2)
            if monitored > 0 and entry["nominalQuota"]
            else 0.0,
        }
    workloads = {
        name: {
            "count": w["count"],
            "averageTimeToAdmissionMs": int(w["admit"] // w["count"]),
            "averageTimeToFinishMs": int(w["finish"] // w["count"]),
            "totalEvictions": w["totalEvictions"],
            # berth's, not Kueue's: from its last admission to its node starting it (the
            # pipeline's share of the quota it held beyond its runtime).
            "averageAdmissionToStartMs": int(w["start"] // w["n"]) if w["n"] else None,
        }
        for name, w in sorted(wl.items())
    }
    return {"clusterQueueClasses": classes, "workloadClasses": workloads}


def check_range(summary: Mapping[str, Any], wall_ms: int, mcpu: int, spec: RangeSpec) -> list[str]:
    """The rangespec's failures (empty: within the range), in Kueue's checker's words."""
    failures = []
    if spec.max_wall_ms and wall_ms > spec.max_wall_ms:
        failures.append(
            f"Wall time {wall_ms}ms is greater than maximum expected {spec.max_wall_ms}ms"
        )
    if spec.mcpu and mcpu > spec.mcpu:
        failures.append(
            f"Average CPU usage {mcpu}mCpu is greater than maximum expected {spec.mcpu}mCPU"
        )
    for name, cls in summary["clusterQueueClasses"].items():
        if name not in spec.cq_min_usage:
            failures.append(f"ClusterQueue class {name}: Unexpected class")
        elif cls["usagePercent"] < spec.cq_min_usage[name]:
            failures.append(
                f"ClusterQueue class {name}: Usage {cls['usagePercent']:.2f}% is less then "
                f"expected {spec.cq_min_usage[name]:.2f}%"
            )
    for name, w in summary["workloadClasses"].items():
        if name not in spec.wl_max_avg_admission_ms:
            failures.append(f"workload class {name}: Unexpected class")
        elif w["averageTimeToAdmissionMs"] > spec.wl_max_avg_admission_ms[name]:
            failures.append(
                f"workload class {name}: Average wait for admission "
                f"{w['averageTimeToAdmissionMs']}ms is more then expected "
                f"{spec.wl_max_avg_admission_ms[name]}ms"
            )
    return failures
