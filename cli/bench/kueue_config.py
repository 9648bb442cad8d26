"""Kueue's scheduler performance configs (test/performance/scheduler/configs/*/), read as
Kueue's runner reads them, and turned into berth objects and a workload schedule.

generator.yaml: `cohorts` (className, count, queuesSets), each queue set (className, count,
nominalQuota, borrowingLimit, lendingLimit, reclaimWithinCohort, withinClusterQueue,
workloadsSets), each workloads set (count, creationIntervalMs, initialDelayMs, workloads),
each workload (className, runtimeMs, priority, request: cpu). Names as Kueue's generator gives
them: cohort `<class>-<i>`, ClusterQueue `<class>-<set>-<i>-<cohort>` (its namespace and
LocalQueue have its name), workload `<class>-<set>-<n>-<i>`. Within a workloads set, the n-th
round of its workloads is created at initialDelayMs + (n+1) x creationIntervalMs (Kueue waits
the interval before each creation).

rangespec.yaml: `cmd` (maxWallMs, mCPU, maxrss), `clusterQueueClassesMinUsage` (percent per
ClusterQueue class), `wlClassesMaxAvgTimeToAdmissionMs` (per workload class).

Anything else (TAS `topology`, DRA, nested `children` cohorts, podCount > 1) is refused with
the field's path: berth does not run those configs yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from shared.models.kueue import RECLAIM_POLICIES, WITHIN_CLUSTER_QUEUE_POLICIES, quota_value


class ConfigError(ValueError):
    """A generator or rangespec that cannot be run, naming the file and field."""


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    class_name: str
    runtime_ms: int
    priority: int
    cpu_milli: int


@dataclass(frozen=True, slots=True)
class WorkloadsSet:
    count: int
    interval_ms: int
    initial_delay_ms: int
    workloads: tuple[WorkloadClass, ...]


@dataclass(frozen=True, slots=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_milli: int
    borrowing_milli: int | None
    lending_milli: int | None
    reclaim_within_cohort: str
    within_cluster_queue: str
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True, slots=True)
class CohortSet:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]


@dataclass(frozen=True, slots=True)
class Queue:
    """One generated ClusterQueue."""

    name: str
    class_name: str
    cohort: str
    spec: QueuesSet


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    """One generated workload: created at `at_ms` after the start (config time)."""

    name: str
    queue: str
    class_name: str
    at_ms: int
    runtime_ms: int
    priority: int
    cpu_milli: int


@dataclass(slots=True)
class Plan:
    queues: list[Queue] = field(default_factory=list)
    workloads: list[PlannedWorkload] = field(default_factory=list)

    @property
    def max_request_milli(self) -> int:
        return max((w.cpu_milli for w in self.workloads), default=0)


def _int(value: Any, path: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{path}: must be an integer >= {minimum}, got {value!r}")
    return value


def _cpu(value: Any, path: str) -> int:
    try:
        amount = quota_value("cpu", value if isinstance(value, int) else str(value))
    except ValueError as e:
        raise ConfigError(f"{path}: invalid cpu quantity {value!r}: {e}") from None
    if amount < 0:
        raise ConfigError(f"{path}: must not be negative")
    return amount


def _map(value: Any, path: str, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: must be a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - known)
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}: not supported by berth's Kueue harness")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{path}: must be a non-empty list")
    return value


def _policy(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if value is None or value == "":
        return "Never"
    if value not in allowed:
        raise ConfigError(f"{path}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


WORKLOAD_FIELDS = frozenset({"className", "runtimeMs", "priority", "request", "podCount"})
SET_FIELDS = frozenset({"count", "creationIntervalMs", "initialDelayMs", "workloads"})
QUEUE_FIELDS = frozenset(
    {
        "className",
        "count",
        "nominalQuota",
        "borrowingLimit",
        "lendingLimit",
        "reclaimWithinCohort",
        "withinClusterQueue",
        "workloadsSets",
    }
)
COHORT_FIELDS = frozenset({"className", "count", "queuesSets"})


def _workload(raw: Any, path: str) -> WorkloadClass:
    w = _map(raw, path, WORKLOAD_FIELDS)
    if w.get("podCount", 1) not in (0, 1):
        raise ConfigError(f"{path}.podCount: only 1 pod per workload is supported")
    name = w.get("className")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.className: required")
    return WorkloadClass(
        name,
        _int(w.get("runtimeMs", 0), f"{path}.runtimeMs"),
        _int(w.get("priority", 0), f"{path}.priority", minimum=-(2**31)),
        _cpu(w.get("request", 0), f"{path}.request"),
    )


def _workloads_set(raw: Any, path: str) -> WorkloadsSet:
    s = _map(raw, path, SET_FIELDS)
    workloads = tuple(
        _workload(w, f"{path}.workloads[{i}]")
        for i, w in enumerate(_list(s.get("workloads"), f"{path}.workloads"))
    )
    return WorkloadsSet(
        _int(s.get("count", 0), f"{path}.count"),
        _int(s.get("creationIntervalMs", 0), f"{path}.creationIntervalMs"),
        _int(s.get("initialDelayMs", 0), f"{path}.initialDelayMs"),
        workloads,
    )


def _queues_set(raw: Any, path: str) -> QueuesSet:
    q = _map(raw, path, QUEUE_FIELDS)
    name = q.get("className")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.className: required")
    borrowing = q.get("borrowingLimit")
    lending = q.get("lendingLimit")
    nominal = _cpu(q.get("nominalQuota", 0), f"{path}.nominalQuota")
    lending_milli = None if lending is None else _cpu(lending, f"{path}.lendingLimit")
    if lending_milli is not None and lending_milli > nominal:
        raise ConfigError(f"{path}.lendingLimit: must be <= nominalQuota")
    return QueuesSet(
        name,
        _int(q.get("count", 0), f"{path}.count"),
        nominal,
        None if borrowing is None else _cpu(borrowing, f"{path}.borrowingLimit"),
        lending_milli,
        _policy(q.get("reclaimWithinCohort"), f"{path}.reclaimWithinCohort", RECLAIM_POLICIES),
        _policy(
            q.get("withinClusterQueue"), f"{path}.withinClusterQueue", WITHIN_CLUSTER_QUEUE_POLICIES
        ),
        tuple(
            _workloads_set(s, f"{path}.workloadsSets[{i}]")
            for i, s in enumerate(q.get("workloadsSets") or [])
        ),
    )


def parse_generator(text: str, source: str = "generator") -> list[CohortSet]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not YAML: {e}") from None
    top = _map(raw, source, frozenset({"cohorts", "resourceFlavor"}))
    cohorts = []
    for i, c in enumerate(_list(top.get("cohorts"), f"{source}.cohorts")):
        path = f"{source}.cohorts[{i}]"
        cm = _map(c, path, COHORT_FIELDS)
        name = cm.get("className")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}.className: required")
        sets = tuple(
            _queues_set(q, f"{path}.queuesSets[{j}]")
            for j, q in enumerate(_list(cm.get("queuesSets"), f"{path}.queuesSets"))
        )
        cohorts.append(CohortSet(name, _int(cm.get("count", 0), f"{path}.count"), sets))
    return cohorts


def plan_of(cohorts: list[CohortSet]) -> Plan:
    """The ClusterQueues and the workloads, in creation order (Kueue's names)."""
    plan = Plan()
    for cset in cohorts:
        for ci in range(cset.count):
            cohort = f"{cset.class_name}-{ci}"
            for qsi, qset in enumerate(cset.queues_sets):
                for qi in range(qset.count):
                    name = f"{qset.class_name}-{qsi}-{qi}-{cohort}"
                    plan.queues.append(Queue(name, qset.class_name, cohort, qset))
                    for wsi, wset in enumerate(qset.workloads_sets):
                        step = 0
                        for n in range(wset.count):
                            for i, wl in enumerate(wset.workloads):
                                step += 1
                                plan.workloads.append(
                                    PlannedWorkload(
                                        f"{wl.class_name}-{wsi}-{n}-{i}",
                                        name,
                                        wl.class_name,
                                        wset.initial_delay_ms + step * wset.interval_ms,
                                        wl.runtime_ms,
                                        wl.priority,
                                        wl.cpu_milli,
                                    )
                                )
    plan.workloads.sort(key=lambda w: (w.at_ms, w.queue, w.name))
    return plan


@dataclass(frozen=True, slots=True)
class RangeSpec:
    max_wall_ms: int = 0
    mcpu: int = 0
    maxrss: int = 0
    cq_min_usage: Mapping[str, float] = field(default_factory=dict)
    wl_max_avg_admission_ms: Mapping[str, int] = field(default_factory=dict)


def parse_rangespec(text: str, source: str = "rangespec") -> RangeSpec:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not YAML: {e}") from None
    top = _map(
        raw,
        source,
        frozenset({"cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"}),
    )
    cmd = _map(top.get("cmd") or {}, f"{source}.cmd", frozenset({"maxWallMs", "mCPU", "maxrss"}))
    usage = top.get("clusterQueueClassesMinUsage") or {}
    admission = top.get("wlClassesMaxAvgTimeToAdmissionMs") or {}
    for name, value in (
        ("clusterQueueClassesMinUsage", usage),
        ("wlClassesMaxAvgTimeToAdmissionMs", admission),
    ):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}.{name}: must be a mapping")
    for name, value in usage.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{source}.clusterQueueClassesMinUsage.{name}: must be a number")
    return RangeSpec(
        _int(cmd.get("maxWallMs", 0), f"{source}.cmd.maxWallMs"),
        _int(cmd.get("mCPU", 0), f"{source}.cmd.mCPU"),
        _int(cmd.get("maxrss", 0), f"{source}.cmd.maxrss"),
        {str(k): float(v) for k, v in usage.items()},
        {
            str(k): _int(v, f"{source}.wlClassesMaxAvgTimeToAdmissionMs.{k}")
            for k, v in admission.items()
        },
    )


def lower_bound_ms(plan: Plan) -> int:
    """The shortest wall time the quotas and runtimes allow (config time): no workload ends
    before its creation plus its runtime, and a cohort works at most at its total nominal
    quota, so whatever arrives from time s on needs at least its cpu x ms over that quota
    after s (each ClusterQueue likewise within nominal + borrowingLimit)."""
    by_queue = {q.name: q for q in plan.queues}
    bound = max((w.at_ms + w.runtime_ms for w in plan.workloads), default=0)
    capacity: dict[str, int] = {}
    for q in plan.queues:
        capacity[q.cohort] = capacity.get(q.cohort, 0) + q.spec.nominal_milli
    groups: dict[str, list[PlannedWorkload]] = {}
    limits: dict[str, int] = {}
    for w in plan.workloads:
        q = by_queue[w.queue]
        groups.setdefault(f"cohort {q.cohort}", []).append(w)
        groups.setdefault(f"queue {q.name}", []).append(w)
        limits[f"cohort {q.cohort}"] = capacity[q.cohort]
        most = capacity[q.cohort]
        if q.spec.borrowing_milli is not None:
            most = min(most, q.spec.nominal_milli + q.spec.borrowing_milli)
        limits[f"queue {q.name}"] = most
    for key, workloads in groups.items():
        cap = limits[key]
        if cap <= 0:
            continue
        later = 0  # cpu x ms arriving at or after the current time, scanning backwards
        for w in sorted(workloads, key=lambda w: w.at_ms, reverse=True):
            later += w.cpu_milli * w.runtime_ms
            bound = max(bound, w.at_ms + math.ceil(later / cap))
    return bound
