"""`berth simulate -f CLUSTER -f TRACE [--speed S] [--plot FILE.png] [-o json]`: replay a trace
(cli/simulate_trace.py) on the real stack and report, per tenant (namespace) and ClusterQueue:
CPU in use over time, wait (arrival to bound) and completion (arrival to Succeeded) time
distributions, evictions, and each ClusterQueue's usage and weighted share over time.

The stack is `berth run`'s (servers and services as processes, the node agent included), with
the agent's grace period and heartbeat divided by the speed. The driver applies each event's
pods at its time and fails or recovers nodes as `berth node fail|recover` does; everything
else (binding, completion, taints, eviction, owners' replacements, quota) is the stack's.
The driver samples the store every `--sample` seconds of wall time (a bound time is known to
that precision).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from cli.commands import Args, invoke
from cli.run import Pipeline, pipeline
from cli.simulate_trace import Trace, TraceError, TraceEvent, split_files
from services.agent.config import ENV_GRACE, ENV_HEARTBEAT, ENV_TICK
from shared.lifecycle.node_lifecycle import DEFAULT_GRACE_SECONDS, DEFAULT_HEARTBEAT_SECONDS
from shared.lifecycle.state import FAIL_NOT_READY, FAIL_UNREACHABLE, LifecycleState, PodEvent
from shared.models import ManifestError, Manifests, Node, Pod, load_manifests, pod_requests

EVICTION_REASONS = frozenset({"TaintManagerEviction", "Evicted", "GangEviction"})
ABSENCE_GRACE_SECONDS = 2.0
"""Wall seconds a pod may be missing from the store, with no end recorded, before it counts
as ended. An evicted pod's owner brings it back with a second write after the deletion
(`shared.lifecycle.actions.evict`), so a sample can fall between the two: the pod is not
ended then, only being replaced."""


@dataclass(slots=True)
class PodLife:
    namespace: str
    arrived: float
    bound: float | None = None
    ended: float | None = None
    succeeded: bool = False
    missing_since: tuple[float, float] | None = None
    """(simulated, wall) time of the first sample that did not find the pod, while it has
    no end recorded; cleared when it is found again."""

    def observe(
        self, t: float, wall: float, *, bound: bool | None, finished_at: float | None
    ) -> None:
        """One sample of this pod at simulated time `t`: `bound` is None when the store has
        no pod of its key, else whether it has a node; `finished_at` is the simulated time
        of its recorded end (Succeeded), if any."""
        if self.ended is not None:
            return
        if bound is not None:
            self.missing_since = None
            if bound and self.bound is None:
                self.bound = t
            return
        if finished_at is not None:
            self.ended, self.succeeded = finished_at, True
            return
        if self.missing_since is None:
            self.missing_since = (t, wall)
        elif wall - self.missing_since[1] >= ABSENCE_GRACE_SECONDS:
            self.ended = self.missing_since[0]


@dataclass(slots=True)
class Point:
    t: float
    tenants: dict[str, dict[str, int]]
    """namespace -> {"cpu": millicores bound, "running": n, "pending": n}"""
    queues: dict[str, dict[str, int]]
    """ClusterQueue -> {"usage": millicores, "share": weighted share x1000}"""
    ready_nodes: int


@dataclass
class SimResult:
    speed: float
    capacity_cpu: int
    """Millicores of every node."""
    pods: dict[str, PodLife] = field(default_factory=dict)
    series: list[Point] = field(default_factory=list)
    node_events: list[tuple[float, str]] = field(default_factory=list)
    evictions: list[tuple[float, str, str]] = field(default_factory=list)
    """(t, pod key, reason)."""
    finished: bool = False

    def summary(self) -> dict[str, Any]:
        tenants: dict[str, Any] = {}
        for ns in sorted({p.namespace for p in self.pods.values()}):
            mine = [p for p in self.pods.values() if p.namespace == ns]
            waits = [p.bound - p.arrived for p in mine if p.bound is not None]
            done = [p.ended - p.arrived for p in mine if p.succeeded and p.ended is not None]
            cpu = [pt.tenants.get(ns, {}).get("cpu", 0) for pt in self.series]
            tenants[ns] = {
                "submitted": len(mine),
                "completed": sum(1 for p in mine if p.succeeded),
                "evicted": sum(1 for _, key, _ in self.evictions if key.partition("/")[0] == ns),
                "waitSeconds": distribution(waits),
                "completionSeconds": distribution(done),
                "meanCpuShare": round(statistics.fmean(cpu) / self.capacity_cpu, 4)
                if cpu and self.capacity_cpu
                else 0.0,
            }
        queues: dict[str, Any] = {}
        for name in sorted({q for pt in self.series for q in pt.queues}):
            usage = [pt.queues.get(name, {}).get("usage", 0) for pt in self.series]
            share = [pt.queues.get(name, {}).get("share", 0) for pt in self.series]
            queues[name] = {
                "meanUsageCpu": round(statistics.fmean(usage) / 1000, 3),
                "maxUsageCpu": max(usage) / 1000,
                "meanWeightedShare": round(statistics.fmean(share), 1),
                "maxWeightedShare": max(share),
            }
        return {
            "speed": self.speed,
            "finished": self.finished,
            "tenants": tenants,
            "clusterQueues": queues,
            "evictions": dict(Counter(reason for _, _, reason in self.evictions)),
            "nodeEvents": [{"t": round(t, 2), "event": text} for t, text in self.node_events],
        }

    def to_json(self) -> dict[str, Any]:
        out = self.summary()
        out["series"] = [
            {"t": pt.t, "tenants": pt.tenants, "queues": pt.queues, "readyNodes": pt.ready_nodes}
            for pt in self.series
        ]
        return out


def distribution(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "count": len(ordered),
        "p50": pick(0.5),
        "p90": pick(0.9),
        "max": round(ordered[-1], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


def agent_env(speed: float) -> dict[str, str]:
    return {
        ENV_GRACE: f"{DEFAULT_GRACE_SECONDS / speed:.3f}",
        ENV_HEARTBEAT: f"{DEFAULT_HEARTBEAT_SECONDS / speed:.3f}",
        ENV_TICK: f"{min(0.2, 1 / speed):.3f}",
    }


class Driver:
    """Fires the trace's events on a running stack and samples it."""

    def __init__(self, run: Pipeline, cluster: Manifests, trace: Trace, speed: float) -> None:
        self.run = run
        self.trace = trace
        self.speed = speed
        self.state = LifecycleState(run.client.redis, run.client.store.keys)
        self.nodes: list[Node] = list(cluster.nodes)
        capacity = sum(n.status.allocatable.get("cpu", 0) for n in self.nodes)
        self.result = SimResult(speed, capacity)
        self.started_epoch = 0.0
        self.started = 0.0

    def sim(self, wall: float) -> float:
        return round(wall * self.speed, 3)

    async def fire(self, event: TraceEvent, wall: float) -> None:
        t = self.sim(wall)
        if event.kind == "pods":
            await self.run.client.apply(Manifests(pods=list(event.pods)))
            for pod in event.pods:
                self.result.pods[pod.key] = PodLife(pod.metadata.namespace, t)
            return
        names = event.nodes.resolve(self.nodes)
        for name in names:
            if event.kind == "fail":
                await self.state.fail(name, FAIL_NOT_READY if event.not_ready else FAIL_UNREACHABLE)
            else:
                await self.state.recover(name)
        self.result.node_events.append((t, f"{event.kind} {event.nodes.text()} ({len(names)})"))

    async def sample(self, wall: float) -> bool:
        """One sample; True when every pod that arrived has ended."""
        t = self.sim(wall)
        pods = {p.key: p for p in cast(list[Pod], await self.run.client.store.list("Pod"))}
        finished = await self.state.finished()
        tenants: dict[str, dict[str, int]] = {}
        for pod in pods.values():
            row = tenants.setdefault(pod.metadata.namespace, {"cpu": 0, "running": 0, "pending": 0})
            if pod.spec.node_name:
                row["cpu"] += pod_requests(pod).get("cpu", 0)
                row["running"] += 1
            else:
                row["pending"] += 1
        for key, life in self.result.pods.items():
            stored = pods.get(key)
            record = finished.get(key)
            life.observe(
                t,
                wall,
                bound=None if stored is None else bool(stored.spec.node_name),
                finished_at=None
                if record is None
                else self.sim(float(record["time"]) - self.started_epoch),
            )
        queues = {}
        for row in await self.run.client.cluster_queue_rows():
            resources = cast(list[dict[str, Any]], row.get("resources") or [])
            cpu = next((r for r in resources if r.get("resource") == "cpu"), {})
            queues[str(row["name"])] = {
                "usage": int(cpu.get("usage", 0)),
                "share": int(row.get("share") or 0),
            }
        ready = len(self.nodes) - len(await self.state.failures())
        self.result.series.append(Point(t, tenants, queues, ready))
        return all(life.ended is not None for life in self.result.pods.values())

    async def evictions(self) -> None:
        stream = self.state.keys.event_stream
        entries: Any = await self.run.client.redis.xrange(stream)
        for _id, fields in entries:
            event = PodEvent.parse(fields.get(b"event", b"{}"))
            if event.reason in EVICTION_REASONS:
                key = fields.get(b"pod", b"").decode()
                self.result.evictions.append(
                    (self.sim(event.time - self.started_epoch), key, event.reason)
                )


async def simulate(
    cluster: Manifests,
    trace: Trace,
    *,
    speed: float = 1.0,
    sample_seconds: float = 0.25,
    wall_limit: float = 600.0,
    run_factory: Callable[..., Any] = pipeline,
    on_sample: Callable[[Point], None] | None = None,
) -> SimResult:
    """Run the (already speed-scaled) trace on a fresh stack."""
    async with run_factory(
        ordered=False, single_tenant=None, session_ms=3000, extra_env=agent_env(speed)
    ) as run:
        driver = Driver(run, cluster, trace, speed)
        await run.client.apply(cluster)
        pending = list(trace.events)
        driver.started, driver.started_epoch = time.monotonic(), time.time()
        while True:
            wall = time.monotonic() - driver.started
            while pending and pending[0].at <= wall:
                await driver.fire(pending.pop(0), wall)
            all_ended = await driver.sample(wall)
            if on_sample is not None:
                on_sample(driver.result.series[-1])
            if not pending and all_ended and trace.duration is None:
                driver.result.finished = True
                break
            if trace.duration is not None and wall >= trace.duration:
                driver.result.finished = all_ended and not pending
                break
            if wall >= wall_limit:
                break
            await asyncio.sleep(sample_seconds)
        await driver.evictions()
        return driver.result


def format_summary(summary: Mapping[str, Any]) -> str:
    lines = [f"simulated at x{summary['speed']:g}; all pods ended: {summary['finished']}"]
    for t in summary["nodeEvents"]:
        lines.append(f"  t={t['t']:>7.1f}s  {t['event']}")
    lines.append("")
    lines.append(
        f"{'TENANT':<14}{'PODS':>6}{'DONE':>6}{'EVICTED':>9}{'WAIT p50/p90':>16}"
        f"{'RUN+WAIT p50/p90':>20}{'CPU SHARE':>11}"
    )
    for name, t in summary["tenants"].items():
        wait, done = t["waitSeconds"], t["completionSeconds"]
        lines.append(
            f"{name:<14}{t['submitted']:>6}{t['completed']:>6}{t['evicted']:>9}"
            f"{_pair(wait):>16}{_pair(done):>20}{t['meanCpuShare']:>11.1%}"
        )
    if summary["clusterQueues"]:
        lines.append("")
        lines.append(f"{'CLUSTERQUEUE':<16}{'MEAN CPU':>10}{'MAX CPU':>9}{'MEAN SHARE':>12}")
        for name, q in summary["clusterQueues"].items():
            lines.append(
                f"{name:<16}{q['meanUsageCpu']:>10.2f}{q['maxUsageCpu']:>9.2f}"
                f"{q['meanWeightedShare']:>12.1f}"
            )
    if summary["evictions"]:
        lines.append("")
        lines.append("evictions: " + ", ".join(f"{k} {v}" for k, v in summary["evictions"].items()))
    return "\n".join(lines)


def _pair(d: Mapping[str, float]) -> str:
    if not d.get("count"):
        return "-"
    return f"{d['p50']:g}/{d['p90']:g}s"


def simulate_main(argv: Sequence[str] | None = None) -> int:
    """`berth simulate ARGV...` (the click command in cli/commands/workloads.py parses)."""
    from cli.commands.workloads import simulate as command

    return invoke(command, argv, "berth simulate")


def simulate_run(args: Args) -> int:
    if args.speed <= 0:
        print("error: --speed must be positive", file=sys.stderr)
        return 1
    try:
        cluster_files, trace = split_files(args.file)
        cluster = load_manifests(*cluster_files)
    except (TraceError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not cluster.nodes:
        print("error: the cluster files hold no Node", file=sys.stderr)
        return 1
    result = asyncio.run(
        simulate(
            cluster,
            trace.scaled(args.speed),
            speed=args.speed,
            sample_seconds=args.sample,
            wall_limit=args.timeout,
        )
    )
    if args.plot:
        from cli.simulate_plot import plot_simulation

        plot_simulation(result, args.plot)
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_summary(result.summary()))
    return 0 if result.finished else 1
