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

Projection, each process on a core of its own: a role saturates its replicas' cores when
rate * (decide / replicas + follow) = 1 s per s; Redis when rate * (base + readers * per_reader)
= 1 s per s; and so on. The projected rate is the least of these; the role that sets it is the
bottleneck. Differences of measured figures can come out negative on noisy cores: they are
clamped at zero, and the raw figures are kept beside the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODEL_RUNS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (2, 2))
"""(workers, binders) of the three runs the model is fitted to."""
PROJECTIONS: tuple[tuple[int, int], ...] = ((1, 1), (2, 1), (2, 2), (4, 2), (8, 4), (16, 8))


@dataclass(frozen=True, slots=True)
class RoleCost:
    """CPU ms per pod bound: `scaled` is split among the role's replicas, `per_replica` is
    paid by each of them."""

    scaled: float
    per_replica: float

    def ms_per_pod(self, replicas: int) -> float:
        """CPU ms per cluster pod on each of `replicas` cores."""
        return self.scaled / max(replicas, 1) + self.per_replica


@dataclass(frozen=True, slots=True)
class ServerCost:
    """CPU ms per pod bound of a shared server: `base`, plus `per_reader` per worker or
    binder reading from it."""

    base: float
    per_reader: float

    def ms_per_pod(self, readers: int) -> float:
        return self.base + readers * self.per_reader


@dataclass(frozen=True, slots=True)
class CapacityModel:
    worker: RoleCost
    binder: RoleCost
    queue: float
    redis: ServerCost
    broker: ServerCost

    def limits(self, workers: int, binders: int) -> dict[str, float]:
        """pods/s each part of the pipeline would allow with `workers` and `binders`, each
        process on a core of its own."""
        readers = workers + binders
        costs = {
            "workers": self.worker.ms_per_pod(workers),
            "binders": self.binder.ms_per_pod(binders),
            "queue": self.queue,
            "redis": self.redis.ms_per_pod(readers),
            "broker": self.broker.ms_per_pod(readers),
        }
        return {name: (1000.0 / ms if ms > 0 else float("inf")) for name, ms in costs.items()}

    def project(self, workers: int, binders: int) -> tuple[float, str]:
        """(projected pods/s, the part that sets it)."""
        limits = self.limits(workers, binders)
        bottleneck = min(limits, key=lambda name: limits[name])
        return limits[bottleneck], bottleneck


def _role_total(cpu_ms: Mapping[str, float], role: str) -> float:
    """The summed CPU ms per pod of every process of a role ("worker-0", "binder-1", ...)."""
    return sum(v for k, v in cpu_ms.items() if k.startswith(role + "-"))


def _split(one: float, two: float) -> RoleCost:
    follow = max(two - one, 0.0)
    return RoleCost(scaled=max(one - follow, 0.0), per_replica=follow)


def fit(runs: Sequence[Mapping[str, float]]) -> CapacityModel:
    """The model from the `cpu_ms_per_pod` of the three MODEL_RUNS, in that order."""
    if len(runs) != len(MODEL_RUNS):
        raise ValueError(f"the model needs {len(MODEL_RUNS)} runs, got {len(runs)}")
    one_one, two_one, two_two = runs
    worker = _split(_role_total(one_one, "worker"), _role_total(two_one, "worker"))
    binder = _split(_role_total(two_one, "binder"), _role_total(two_two, "binder"))
    queue = sum(_role_total(run, "queue") for run in runs) / len(runs)

    def server(name: str) -> ServerCost:
        values = [run.get(name, 0.0) for run in runs]
        per_reader = max(((values[1] - values[0]) + (values[2] - values[1])) / 2, 0.0)
        base = max(values[0] - 2 * per_reader, 0.0)  # the first run has two readers
        return ServerCost(base, per_reader)

    return CapacityModel(worker, binder, queue, server("redis"), server("kafka"))


def model_report(runs: Sequence[Mapping[str, Any]], floor: float) -> dict[str, Any]:
    """The model's figures from the three runs' results (`bench_distributed` output)."""
    model = fit([run["cpu_ms_per_pod"] for run in runs])
    roles = {
        "worker": {
            "scales_out_ms": round(model.worker.scaled, 3),
            "every_replica_ms": round(model.worker.per_replica, 3),
        },
        "binder": {
            "scales_out_ms": round(model.binder.scaled, 3),
            "every_replica_ms": round(model.binder.per_replica, 3),
        },
        "queue": {"ms": round(model.queue, 3)},
        "redis": {
            "base_ms": round(model.redis.base, 3),
            "per_reader_ms": round(model.redis.per_reader, 3),
        },
        "broker": {
            "base_ms": round(model.broker.base, 3),
            "per_reader_ms": round(model.broker.per_reader, 3),
        },
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
        lines.append(
            f"{run['workers']}w/{run['binders']}b   {run['pods_per_second']:>9}   "
            f"{run['ratio_to_floor']:>6}x   {run['cpu_ms_per_pod']['total']:>8} "
            f"({run['cpu_floor_units_per_pod']})   {run['conflicts']:>13}"
        )
    lines += ["", "CPU ms per pod     scales out   every replica pays"]
    roles = report["cost_per_pod"]
    for role in ("worker", "binder"):
        lines.append(
            f"{role:<18} {roles[role]['scales_out_ms']:>10}   {roles[role]['every_replica_ms']:>18}"
        )
    lines.append(f"{'queue':<18} {roles['queue']['ms']:>10}")
    for server in ("redis", "broker"):
        lines.append(
            f"{server:<18} {roles[server]['base_ms']:>10}   "
            f"{roles[server]['per_reader_ms']:>12} per reader"
        )
    lines += ["", "projected (one core each)   pods/s   x floor   bottleneck"]
    for row in report["projected"]:
        lines.append(
            f"{row['workers']:>3} workers {row['binders']:>2} binders   "
            f"{row['pods_per_second']:>9}   {row['ratio_to_floor']:>6}x   {row['bottleneck']}"
        )
    return "\n".join(lines)
