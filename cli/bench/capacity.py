"""`berth bench --mode distributed --model`: what each replica costs, and what W workers and M
binders would reach.

Three runs of the same workload in one sitting (1 worker + 1 binder, 2 + 1, 2 + 2) give each
process's CPU per pod bound. A second replica of a role does half of the role's deciding (or
binding) and all of its following (every replica reads every change of the cluster), so per
role, from the run before and after the role gained its second replica:

    one replica:  decide + follow            two replicas: decide + 2 * follow (summed)
    follow = two - one                       decide = one - follow

Redis and the broker serve every reader: their CPU per pod grows by `per_reader` with each
further worker or binder (the mean of the two steps), over a `base` for the rest of the
pipeline. The queue does the same work however many workers and binders there are.

Idle cost apart: each run first watches the loaded stack idle (`idle_cpu_ms_per_s`: consumers
polling, heartbeats), a cost per second, not per pod. It is taken out of each process's CPU
per pod (times the measured window, over the pods) before the split above, and fitted the
same way (per replica; per server a base and a cost per reader).

Projection, each process on a core of its own: a role saturates its replicas' cores when
idle + rate * (decide / replicas + follow) = 1 s per s; Redis when idle(readers) + rate *
(base + readers * per_reader) = 1 s per s; and so on. The projected rate is the least of these;
the role that sets it is the bottleneck. Differences of measured figures can come out negative
on noisy cores: they are clamped at zero, and the raw figures are kept beside the model.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODEL_RUNS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (2, 2))
"""(workers, binders) of the three runs the model is fitted to."""
PROJECTIONS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (2, 2), (4, 2), (8, 4), (16, 8))


@dataclass(frozen=True, slots=True)
class RoleCost:
    """CPU ms per pod bound: `scaled` is split among the role's replicas, `per_replica` is
    paid by each of them; `idle`: CPU ms per second each replica spends idle."""

    scaled: float
    per_replica: float
    idle: float = 0.0

    def ms_per_pod(self, replicas: int) -> float:
        """CPU ms per cluster pod on each of `replicas` cores."""
        return self.scaled / max(replicas, 1) + self.per_replica

    def limit(self, replicas: int) -> float:
        """pods/s at which each replica's core is full."""
        return _rate(self.idle, self.ms_per_pod(replicas))


@dataclass(frozen=True, slots=True)
class ServerCost:
    """CPU ms per pod bound of a shared server: `base`, plus `per_reader` per worker or
    binder reading from it; idle CPU ms per second likewise."""

    base: float
    per_reader: float
    idle_base: float = 0.0
    idle_per_reader: float = 0.0

    def ms_per_pod(self, readers: int) -> float:
        return self.base + readers * self.per_reader

    def limit(self, readers: int) -> float:
        return _rate(self.idle_base + readers * self.idle_per_reader, self.ms_per_pod(readers))


def _rate(idle_ms_per_s: float, ms_per_pod: float) -> float:
    """pods/s that fill one core (1,000 ms per s) on top of its idle cost."""
    room = max(1000.0 - idle_ms_per_s, 0.0)
    return room / ms_per_pod if ms_per_pod > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class CapacityModel:
    worker: RoleCost
    binder: RoleCost
    queue: RoleCost
    redis: ServerCost
    broker: ServerCost

    def limits(self, workers: int, binders: int) -> dict[str, float]:
        """pods/s each part of the pipeline would allow with `workers` and `binders`, each
        process on a core of its own."""
        readers = workers + binders
        return {
            "workers": self.worker.limit(workers),
            "binders": self.binder.limit(binders),
            "queue": self.queue.limit(1),
            "redis": self.redis.limit(readers),
            "broker": self.broker.limit(readers),
        }

    def project(self, workers: int, binders: int) -> tuple[float, str]:
        """(projected pods/s, the part that sets it)."""
        limits = self.limits(workers, binders)
        bottleneck = min(limits, key=lambda name: limits[name])
        return limits[bottleneck], bottleneck


def _busy(run: Mapping[str, Any]) -> dict[str, float]:
    """Each process's CPU ms per pod bound without its idle cost (per second, times the
    window the CPU was measured over, spread over the pods)."""
    cpu: Mapping[str, float] = run["cpu_ms_per_pod"]
    idle: Mapping[str, float] = run.get("idle_cpu_ms_per_s", {})
    window = float(run.get("cpu_window_seconds", 0.0))
    pods = max(int(run.get("bound", 0)), 1)
    return {
        name: max(value - idle.get(name, 0.0) * window / pods, 0.0)
        for name, value in cpu.items()
        if name != "total"
    }


def _role_total(values: Mapping[str, float], role: str) -> float:
    """The summed figure of every process of a role ("worker-0", "binder-1", ...)."""
    return sum(v for k, v in values.items() if k.startswith(role + "-"))


def _role_idle(runs: Sequence[Mapping[str, Any]], role: str) -> float:
    """Mean idle CPU ms per second of one replica of `role`, over every run."""
    values = [
        v
        for run in runs
        for k, v in run.get("idle_cpu_ms_per_s", {}).items()
        if k.startswith(role + "-")
    ]
    return sum(values) / len(values) if values else 0.0


def _split(one: float, two: float, idle: float = 0.0) -> RoleCost:
    follow = max(two - one, 0.0)
    return RoleCost(scaled=max(one - follow, 0.0), per_replica=follow, idle=idle)


def _server(values: Sequence[float]) -> tuple[float, float]:
    """(base, per reader) from a server's figure in the three runs (2, 3, 4 readers)."""
    per_reader = max(((values[1] - values[0]) + (values[2] - values[1])) / 2, 0.0)
    return max(values[0] - 2 * per_reader, 0.0), per_reader


def fit(runs: Sequence[Mapping[str, Any]]) -> CapacityModel:
    """The model from the results (`bench_distributed`'s) of the three MODEL_RUNS, in that
    order."""
    if len(runs) != len(MODEL_RUNS):
        raise ValueError(f"the model needs {len(MODEL_RUNS)} runs, got {len(runs)}")
    busy = [_busy(run) for run in runs]
    one_one, two_one, two_two = busy
    worker = _split(
        _role_total(one_one, "worker"), _role_total(two_one, "worker"), _role_idle(runs, "worker")
    )
    binder = _split(
        _role_total(two_one, "binder"), _role_total(two_two, "binder"), _role_idle(runs, "binder")
    )
    queue = RoleCost(
        scaled=sum(_role_total(b, "queue") for b in busy) / len(busy),
        per_replica=0.0,
        idle=_role_idle(runs, "queue"),
    )

    def server(name: str) -> ServerCost:
        base, per_reader = _server([b.get(name, 0.0) for b in busy])
        idle_base, idle_per_reader = _server(
            [float(run.get("idle_cpu_ms_per_s", {}).get(name, 0.0)) for run in runs]
        )
        return ServerCost(base, per_reader, idle_base, idle_per_reader)

    return CapacityModel(worker, binder, queue, server("redis"), server("kafka"))


_MEDIAN_FIGURES = ("pods_per_second", "cpu_window_seconds", "bound", "conflicts")
_FRACTIONAL = frozenset({"pods_per_second", "cpu_window_seconds"})
_MEDIAN_MAPS = ("cpu_ms_per_pod", "idle_cpu_ms_per_s")
_REPEAT_FIGURES = ("runs", "pods_per_second_range", "cpu_ms_per_pod_range")


def median_run(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One result for several runs of one shape (`--repeat`): each figure the model reads is
    the median of the runs' (each process's CPU per pod and idle CPU on its own, the total
    too), with `runs` and the range of pods/s and of the total CPU per pod beside it. One
    run's figures move by up to 2x on these shared cores; the median of three is steadier
    than any one, and a difference of medians (the model's split) than one of single runs."""
    first = runs[0]
    out: dict[str, Any] = {"workers": first["workers"], "binders": first["binders"]}
    for name in _MEDIAN_FIGURES:
        middle = statistics.median(float(run.get(name, 0)) for run in runs)
        out[name] = middle if name in _FRACTIONAL else round(middle)
    for name in _MEDIAN_MAPS:
        keys = sorted({key for run in runs for key in run.get(name, {})})
        out[name] = {
            key: round(statistics.median(float(run.get(name, {}).get(key, 0.0)) for run in runs), 3)
            for key in keys
        }
    rates = [float(run["pods_per_second"]) for run in runs]
    totals = [float(run["cpu_ms_per_pod"]["total"]) for run in runs]
    out["runs"] = len(runs)
    out["pods_per_second_range"] = [min(rates), max(rates)]
    out["cpu_ms_per_pod_range"] = [min(totals), max(totals)]
    return out


def model_report(runs: Sequence[Mapping[str, Any]], floor: float) -> dict[str, Any]:
    """The model's figures from the three runs' results (`bench_distributed` output)."""
    model = fit(runs)

    def role(cost: RoleCost) -> dict[str, float]:
        return {
            "scales_out_ms": round(cost.scaled, 3),
            "every_replica_ms": round(cost.per_replica, 3),
            "idle_ms_per_s": round(cost.idle, 1),
        }

    def server(cost: ServerCost) -> dict[str, float]:
        return {
            "base_ms": round(cost.base, 3),
            "per_reader_ms": round(cost.per_reader, 3),
            "idle_base_ms_per_s": round(cost.idle_base, 1),
            "idle_per_reader_ms_per_s": round(cost.idle_per_reader, 1),
        }

    roles = {
        "worker": role(model.worker),
        "binder": role(model.binder),
        "queue": {"ms": round(model.queue.scaled, 3), "idle_ms_per_s": round(model.queue.idle, 1)},
        "redis": server(model.redis),
        "broker": server(model.broker),
    }
    floor_ms = 1000.0 / floor if floor > 0 else 0.0
    projections = []
    for workers, binders in PROJECTIONS:
        rate, bottleneck = model.project(workers, binders)
        projections.append(
            {
                "workers": workers,
                "binders": binders,
                "pods_per_second": round(rate, 1),
                "ratio_to_floor": round(rate / floor, 2) if floor > 0 else None,
                "bottleneck": bottleneck,
            }
        )
    measured = [
        {
            "workers": run["workers"],
            "binders": run["binders"],
            "pods_per_second": run["pods_per_second"],
            "ratio_to_floor": round(run["pods_per_second"] / floor, 2) if floor > 0 else None,
            "cpu_ms_per_pod": run["cpu_ms_per_pod"],
            "cpu_floor_units_per_pod": (
                round(run["cpu_ms_per_pod"]["total"] / floor_ms, 2) if floor_ms else None
            ),
            "conflicts": run["conflicts"],
            **{k: run[k] for k in _REPEAT_FIGURES if k in run},
        }
        for run in runs
    ]
    return {
        "mode": "distributed-model",
        "floor_pods_per_s": round(floor, 1),
        "floor_ms_per_pod": round(floor_ms, 3),
        "measured": measured,
        "cost_per_pod": roles,
        "worker_follow_floor_units": (
            round(model.worker.per_replica / floor_ms, 3) if floor_ms else None
        ),
        "idle_cpu_ms_per_s": [run.get("idle_cpu_ms_per_s", {}) for run in runs],
        "projected": projections,
    }


def model_table(report: Mapping[str, Any]) -> str:
    """The report as the README shows it."""
    lines = [
        f"floor: {report['floor_pods_per_s']} pods/s ({report['floor_ms_per_pod']} ms CPU/pod)",
        "",
        "measured   pods/s   x floor   CPU ms/pod (floor units)   conflicts",
    ]
    for run in report["measured"]:
        line = (
            f"{run['workers']}w/{run['binders']}b   {run['pods_per_second']:>9}   "
            f"{run['ratio_to_floor']:>6}x   {run['cpu_ms_per_pod']['total']:>8} "
            f"({run['cpu_floor_units_per_pod']})   {run['conflicts']:>13}"
        )
        if "runs" in run:
            low, high = run["cpu_ms_per_pod_range"]
            line += f"   median of {run['runs']} runs (CPU {low}-{high})"
        lines.append(line)
    lines += [
        "",
        "CPU ms per pod     scales out   every replica pays   idle ms/s (each replica)",
    ]
    roles = report["cost_per_pod"]
    for role in ("worker", "binder"):
        lines.append(
            f"{role:<18} {roles[role]['scales_out_ms']:>10}   "
            f"{roles[role]['every_replica_ms']:>18}   {roles[role]['idle_ms_per_s']:>10}"
        )
    queue = roles["queue"]
    lines.append(f"{'queue':<18} {queue['ms']:>10}   {'':>18}   {queue['idle_ms_per_s']:>10}")
    for server in ("redis", "broker"):
        lines.append(
            f"{server:<18} {roles[server]['base_ms']:>10}   "
            f"{roles[server]['per_reader_ms']:>12} per reader   "
            f"idle {roles[server]['idle_base_ms_per_s']} + "
            f"{roles[server]['idle_per_reader_ms_per_s']} per reader"
        )
    lines += ["", "projected (one core each)   pods/s   x floor   bottleneck"]
    for row in report["projected"]:
        lines.append(
            f"{row['workers']:>3} workers {row['binders']:>2} binders   "
            f"{row['pods_per_second']:>9}   {row['ratio_to_floor']:>6}x   {row['bottleneck']}"
        )
    return "\n".join(lines)
