"""What `berth demo --tenants` records (cli/demo_tenants.py): each queue's usage and share over
time, and the result its report and plot (cli/demo_plot.py) read."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

from cli.demo_tenants_scenario import JobCounts, Jobs, Scenario

GI = 1024**3
COHORT = "tenants"
FLAVOR = "default"
LOCAL_QUEUE = "jobs"
DRAIN_SECONDS = 5.0
"""After the last job, how long usage may take to come back to 0."""


# ------------------------------------------------------------------------------ samples
@dataclass(slots=True)
class QueuePoint:
    """One ClusterQueue at one moment (CPUs)."""

    usage: float
    borrowed: float
    share: int
    waiting: int
    """Pods waiting for quota (`berth get clusterqueues`' PENDING)."""
    running: int
    done: int
    evicted: int
    """So far."""

    def to_json(self) -> dict[str, Any]:
        return {
            "usage": self.usage,
            "borrowed": self.borrowed,
            "share": self.share,
            "waitingForQuota": self.waiting,
            "running": self.running,
            "done": self.done,
            "evicted": self.evicted,
        }


@dataclass(slots=True)
class Sample:
    t: float
    queues: dict[str, QueuePoint]

    @property
    def cohort_usage(self) -> float:
        return sum(q.usage for q in self.queues.values())


@dataclass(slots=True)
class TenantsResult:
    scenario: Scenario
    samples: list[Sample] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    finished: bool = False
    seconds: float = 0.0

    def series(self, queue: str, what: str) -> list[float]:
        return [float(getattr(s.queues[queue], what)) for s in self.samples]

    def summary(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for t in self.scenario.tenants:
            points = [s.queues[t.name] for s in self.samples]
            last = points[-1] if points else QueuePoint(0, 0, 0, 0, 0, 0, 0)
            first = next(
                (s.t for s in self.samples if s.queues[t.name].usage > 0 and s.t >= t.arrives),
                None,
            )
            out[t.name] = {
                "jobs": t.jobs,
                "done": last.done,
                "evicted": last.evicted,
                "peakUsage": max((p.usage for p in points), default=0.0),
                "peakBorrowed": max((p.borrowed for p in points), default=0.0),
                "peakShare": max((p.share for p in points), default=0),
                "peakWaiting": max((p.waiting for p in points), default=0),
                "firstAdmittedAt": first,
            }
        return out

    def to_json(self) -> dict[str, Any]:
        sc = self.scenario
        return {
            "cohort": COHORT,
            "cohortQuota": sc.cohort_quota,
            "jobSeconds": sc.job_seconds,
            "sampleSeconds": sc.sample_seconds,
            "queues": [
                {
                    "name": t.name,
                    "nominal": t.nominal,
                    "borrowingLimit": t.borrowing_limit,
                    "weight": t.weight,
                    "arrives": t.arrives,
                    "jobs": t.jobs,
                }
                for t in sc.tenants
            ],
            "events": [{"t": t, "what": what} for t, what in self.events],
            "samples": [
                {"t": s.t, "queues": {n: q.to_json() for n, q in s.queues.items()}}
                for s in self.samples
            ],
            "summary": self.summary(),
            "finished": self.finished,
            "seconds": round(self.seconds, 2),
        }


def _cpus(millis: object) -> float:
    return round(int(cast(int, millis)) / 1000, 3)


def sample_of(
    t: float, rows: Sequence[Mapping[str, Any]], jobs: Jobs, scenario: Scenario
) -> Sample:
    """One sample. A queue's CPUs are what quota admission reserved for it (admitted pods,
    bound or about to be): the figure admission, borrowing and reclaim decide by. Borrowed
    and the weighted share follow from it, as Kueue computes them."""
    by_name = {str(r["name"]): r for r in rows}
    lendable = scenario.cohort_quota * 1000
    queues = {}
    for tenant in scenario.tenants:
        row = by_name.get(tenant.name, {})
        cpu: Mapping[str, Any] = next(
            (r for r in row.get("resources", []) if r["resource"] == "cpu"), {}
        )
        reserved = int(cpu.get("reserved", 0))
        borrowed = max(0, reserved - tenant.nominal * 1000)
        share = Fraction(borrowed * 1000, lendable) / Fraction(tenant.weight)
        counts = jobs.counts.get(tenant.name, JobCounts())
        queues[tenant.name] = QueuePoint(
            usage=_cpus(reserved),
            borrowed=_cpus(borrowed),
            share=math.floor(share) if borrowed else 0,
            waiting=int(row.get("pending", {}).get("quota", 0)),
            running=counts.running,
            done=counts.done,
            evicted=counts.evicted,
        )
    return Sample(round(t, 2), queues)
