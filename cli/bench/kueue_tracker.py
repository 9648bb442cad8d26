"""The Kueue harness's view of each workload (`berth bench --mode kueue`, cli/bench/kueue.py):
when it was created, admitted (again, after an eviction), finished, and what that adds up to
in Kueue's records, the quota peaks sampled and how close the queue's admission estimates were.
Pure bookkeeping over what the harness reads; the reads and writes stay in cli/bench/kueue.py."""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from cli.bench.kueue_config import Plan, PlannedWorkload
from cli.bench.kueue_summary import WorkloadRecord
from shared.observability.stats import percentile

ESTIMATE = re.compile(r"admission estimated in ~(\d+)s")
"""The queue's estimate in a waiting pod's reason."""


STAGES = ("admittedToDispatched", "dispatchedToProposed", "proposedToBound", "boundToStarted")
"""The hops of admission -> start (`Tracker.stages`)."""


def uid_of(w: PlannedWorkload) -> str:
    return f"uid-{w.queue}-{w.name}"


@dataclass(slots=True)
class Tracker:
    """Each workload's life as the harness sees it, in seconds of wall time."""

    plan: Plan
    scale: float
    started: float = 0.0
    records: dict[str, WorkloadRecord] = field(default_factory=dict)
    """pod key -> its record (ms since the start, config time)."""
    planned: dict[str, PlannedWorkload] = field(default_factory=dict)
    admitted_at: dict[str, float] = field(default_factory=dict)
    """pod key -> the admission (epoch s) it now runs under."""
    raw: dict[str, bytes | str] = field(default_factory=dict)
    finished: int = 0
    last_end: float = 0.0
    peak: dict[str, int] = field(default_factory=dict)
    """ClusterQueue -> the most cpu (mCPU) admission held for it at once, as sampled."""
    cohort_peak: dict[str, int] = field(default_factory=dict)
    predicted: dict[str, float] = field(default_factory=dict)
    """pod key -> when the queue's first estimate said it would be admitted (epoch s)."""
    estimate_errors: list[float] = field(default_factory=list)
    """Admitted minus predicted (seconds), one per estimated workload."""
    inferred: int = 0
    """Admissions no read saw (`finish_unseen`)."""
    finish_after_admission: bool = False
    """Kueue's runner: the harness ends each workload `runtimeMs` after its admission
    (`finish_due`), not the agent after its pod started."""
    due: list[tuple[float, str, float]] = field(default_factory=list)
    """A heap of (when, pod key, the admission it is for): workloads the harness ends."""
    finishing: set[str] = field(default_factory=set)
    """Workloads the harness is ending now: gone from the admitted records meanwhile, they
    were not evicted."""

    def ms(self, at: float) -> float:
        return (at - self.started) * 1000 * self.scale

    def runtime_s(self, key: str) -> float:
        return self.planned[key].runtime_ms / 1000 / self.scale

    def due_now(self, now: float) -> list[tuple[str, float]]:
        """The workloads to end now, each with its admission: the ones whose runtime since
        their current admission is over (one evicted or ended since is left out)."""
        out = []
        while self.due and self.due[0][0] <= now:
            _, key, at = heapq.heappop(self.due)
            if self.admitted_at.get(key) == at:
                out.append((key, at))
        return out

    def due_again(self, key: str, at: float, when: float) -> None:
        heapq.heappush(self.due, (when, key, at))

    def next_due(self) -> float | None:
        return self.due[0][0] if self.due else None

    def created(self, w: PlannedWorkload, at: float) -> None:
        key = f"{w.queue}/{w.name}"
        self.planned[key] = w
        self.records[key] = WorkloadRecord(w.name, w.queue, w.class_name, w.cpu_milli, self.ms(at))

    def _end(self, key: str, at: float) -> None:
        start = self.admitted_at.pop(key)
        self.records[key].periods.append((self.ms(start), self.ms(at)))
        self.last_end = max(self.last_end, at)

    def observe(self, admitted: Mapping[bytes | str, bytes | str], now: float) -> None:
        """The queue's admitted records now: admissions, re-admissions and evictions."""
        seen = set()
        for raw_key, value in admitted.items():
            key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            record = self.records.get(key)
            if record is None or record.finished_ms is not None:
                continue
            seen.add(key)
            if self.raw.get(key) == value:
                continue
            self.raw[key] = value
            at = float(msgpack.unpackb(value, raw=False).get("at", now))
            if key in self.admitted_at:  # admitted again between two reads: evicted once
                record.evictions += 1
                self._end(key, at)
            self.admitted_at[key] = at
            record.admitted_ms = self.ms(at)
            if self.finish_after_admission:
                heapq.heappush(self.due, (at + self.runtime_s(key), key, at))
            if key in self.predicted:
                self.estimate_errors.append(at - self.predicted.pop(key))
        for key in [k for k in self.admitted_at if k not in seen and k not in self.finishing]:
            self.records[key].evictions += 1
            self.raw.pop(key, None)
            self._end(key, now)

    def sample(self, usage: Mapping[bytes | str, bytes | str]) -> None:
        """The queue's usage hash now ("<cq>|<flavor>|<resource>" -> amount): the peaks."""
        cohort_of = {q.name: q.cohort for q in self.plan.queues}
        cohorts: dict[str, int] = {}
        for raw_field, raw_amount in usage.items():
            name = raw_field.decode() if isinstance(raw_field, bytes) else raw_field
            queue, _, resource = name.split("|", 2)
            if resource != "cpu" or queue not in cohort_of:
                continue
            amount = int(raw_amount)
            self.peak[queue] = max(self.peak.get(queue, 0), amount)
            cohorts[cohort_of[queue]] = cohorts.get(cohort_of[queue], 0) + amount
        for cohort, amount in cohorts.items():
            self.cohort_peak[cohort] = max(self.cohort_peak.get(cohort, 0), amount)

    def awaiting_estimates(self) -> dict[str, list[str]]:
        """LocalQueue -> its workloads created, never admitted, with no estimate read yet:
        the only reasons `read_estimates` needs (reading every waiting pod's reason twice a
        second cost the harness and Redis more than the estimates they gave)."""
        out: dict[str, list[str]] = {}
        for key, record in self.records.items():
            if record.admitted_ms is None and key not in self.predicted:
                out.setdefault(record.queue, []).append(key)
        return out

    def read_estimates(self, whys: Mapping[str, bytes | str], now: float) -> None:
        """The queue's reasons of waiting pods: the first estimate of each not yet admitted."""
        for key, blob in whys.items():
            if key in self.predicted or key in self.admitted_at or key not in self.records:
                continue
            if self.records[key].admitted_ms is not None:
                continue
            message = msgpack.unpackb(blob, raw=False).get("msg", "")
            found = ESTIMATE.search(message)
            if found:
                self.predicted[key] = now + int(found.group(1))

    def estimates(self) -> dict[str, Any]:
        """How close the estimates were (config-time ms)."""
        errors = sorted(abs(e) * 1000 * self.scale for e in self.estimate_errors)
        signed = sorted(e * 1000 * self.scale for e in self.estimate_errors)
        if not errors:
            return {"count": 0}
        return {
            "count": len(errors),
            "medianAbsErrorMs": int(percentile(errors, 50)),
            "p90AbsErrorMs": int(percentile(errors, 90)),
            "medianErrorMs": int(percentile(signed, 50)),
        }

    def finish(self, key: str, at: float, started: float | None = None) -> None:
        self._end(key, at)
        self.records[key].finished_ms = self.ms(at)
        if started is not None:
            self.records[key].started_ms = self.ms(started)
        self.raw.pop(key, None)
        self.finished += 1

    def stages(
        self,
        dispatched: Mapping[str, float],
        proposed: Mapping[str, float],
        bound: Mapping[str, float],
    ) -> dict[str, dict[str, int]]:
        """Where admission -> start goes, per class: the average of each hop (config-time
        ms) over the workloads admitted once that finished and were seen at every hop.
        `dispatched` / `proposed` / `bound`: pod uid -> epoch seconds (the run's observer:
        its first schedule request, its first proposal, its "scheduled" outcome)."""
        sums: dict[str, list[float]] = {}
        for key, record in self.records.items():
            uid = uid_of(self.planned[key])
            if (
                record.evictions
                or record.admitted_ms is None
                or record.started_ms is None
                or uid not in dispatched
                or uid not in proposed
                or uid not in bound
            ):
                continue
            hops = (
                self.ms(dispatched[uid]) - record.admitted_ms,
                self.ms(proposed[uid]) - self.ms(dispatched[uid]),
                self.ms(bound[uid]) - self.ms(proposed[uid]),
                record.started_ms - self.ms(bound[uid]),
            )
            total = sums.setdefault(record.class_name, [0.0] * (len(hops) + 1))
            for index, hop in enumerate(hops):
                total[index] += hop
            total[-1] += 1
        return {
            name: {stage: round(total[i] / total[-1]) for i, stage in enumerate(STAGES)}
            for name, total in sorted(sums.items())
        }

    def unseen(self, admitted: Mapping[bytes | str, bytes | str]) -> list[str]:
        """Workloads created, not finished, admitted neither as last observed nor in
        `admitted` (the read about to be observed): one admitted and finished between two
        reads of the admitted records is among them."""
        now_admitted = {k.decode() if isinstance(k, bytes) else k for k in admitted}
        return [
            key
            for key, record in self.records.items()
            if record.finished_ms is None
            and key not in self.admitted_at
            and key not in now_admitted
        ]

    def finish_unseen(self, key: str, at: float) -> None:
        """A completion of a workload whose admission no read saw (it came and went between
        two, the harness being slower than the workload): it held its quota at least for
        its runtime, so it counts as admitted `runtime` before it finished (a lower bound:
        its time to admission is at most that much short), and `inferred` says how many."""
        runtime_s = self.runtime_s(key)
        self.admitted_at[key] = at - runtime_s
        self.records[key].admitted_ms = self.ms(at - runtime_s)
        self.inferred += 1
        self.finish(key, at)
