"""`berth demo`: a multi-tenant batch cluster through the whole distributed pipeline.

    berth demo [--nodes 1000] [--pods 10000] [--workers 1] [--binders 1] [--seed 0] [-o json]

The bundled workload (`demo_workload`, deterministic from the seed): nodes in 3 zones
(standard 8 CPU, large 16 CPU, and a tainted GPU pool with 4 GPUs each), 3 tenants
(namespaces team-a/b/c), and pods of five kinds, shuffled together:

- plain batch pods of assorted sizes;
- web pods spread evenly over zones (DoNotSchedule, maxSkew 1) in apps of 30;
- database pods that refuse to share a node with their replica set (hostname anti-affinity);
- gangs (coscheduling PodGroups, minMember 8): all of a gang's pods bind, or none;
- GPU pods that tolerate the GPU taint and fill every GPU;
- a few pods bigger than any node, which stay pending (and show why).

Then, once those settled, a few high-priority GPU pods arrive: no GPU is free, so each preempts
a batch GPU pod. It runs on the `berth up` machinery (servers and services as processes), shows
a progress bar, and ends with a summary: pods/s, enqueue-to-bound latency p50/p99, conflicts,
preemptions, utilisation per zone, and the top reasons of the pods still pending.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from cli.audit import validate_placement
from cli.commands import Args, invoke
from cli.demo_workload import GANG_SIZE, GPU, TENANTS, ZONE, DemoWorkload, demo_workload
from cli.run import Pipeline, Progress, pipeline
from shared.models import (
    POD_GROUP_LABEL,
    Namespace,
    Node,
    Pod,
    pod_requests,
)
from shared.observability.stats import percentile


# ------------------------------------------------------------------------------ running
@dataclass(slots=True)
class DemoSummary:
    pods: int
    bound: int
    pending: int
    seconds: float
    """From the first pod applied to the last pod bound (both phases)."""
    pods_per_second: float
    latency_p50_ms: float
    latency_p99_ms: float
    conflicts: int
    preemptions: int
    victims: int
    gangs_bound: int
    gangs: int
    utilisation: dict[str, dict[str, float]]
    """zone -> {"cpu": %, "memory": %, GPU: %}."""
    top_pending_reasons: list[tuple[int, str]]
    violations: int
    settled: bool
    phases: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "bound": self.bound,
            "pending": self.pending,
            "seconds": round(self.seconds, 2),
            "podsPerSecond": round(self.pods_per_second, 1),
            "latencyP50Ms": round(self.latency_p50_ms, 1),
            "latencyP99Ms": round(self.latency_p99_ms, 1),
            "conflicts": self.conflicts,
            "preemptions": self.preemptions,
            "victims": self.victims,
            "gangsBound": self.gangs_bound,
            "gangs": self.gangs,
            "utilisation": self.utilisation,
            "topPendingReasons": [{"pods": n, "reason": r} for n, r in self.top_pending_reasons],
            "violations": self.violations,
            "settled": self.settled,
            "phases": {k: round(v, 2) for k, v in self.phases.items()},
        }


class ProgressBar:
    """A one-line progress bar on a terminal (a line per few seconds otherwise)."""

    def __init__(self, total: int, out: TextIO = sys.stderr, width: int = 30) -> None:
        self.total = total
        self.out = out
        self.width = width
        self.started = time.monotonic()
        self._tty = out.isatty()
        self._last_line = 0.0

    def __call__(self, progress: Progress, label: str = "", extra: str = "") -> None:
        done = progress.bound
        elapsed = max(time.monotonic() - self.started, 1e-9)
        filled = self.width * min(done, self.total) // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        text = (
            f"{label:<10} [{bar}] {done:>6,}/{self.total:,} bound, {progress.parked:,} parked, "
            f"{done / elapsed:,.0f} pods/s {extra}"
        )
        if self._tty:
            self.out.write("\r" + text.ljust(110))
            self.out.flush()
        elif time.monotonic() - self._last_line >= 5:
            self._last_line = time.monotonic()
            self.out.write(text + "\n")
            self.out.flush()

    def finish(self) -> None:
        if self._tty:
            self.out.write("\n")
            self.out.flush()


async def run_demo(
    workload: DemoWorkload,
    *,
    workers: int = 1,
    binders: int = 1,
    seconds: float = 600.0,
    progress: bool = True,
    validate: bool = True,
    run_factory: Callable[..., Any] = pipeline,
    dashboard: bool = False,
) -> DemoSummary:
    """Run the workload through a fresh stack and summarise it (see the module docstring);
    `dashboard`: with the dashboard, its URL printed on stderr."""
    total = workload.pod_count
    bar = ProgressBar(total) if progress else None
    phases: dict[str, float] = {}
    async with run_factory(
        workers=workers,
        binders=binders,
        ordered=False,
        single_tenant=None,
        session_ms=3000,
        **({"dashboard": True} if dashboard else {}),
    ) as run:
        run_: Pipeline = run
        if dashboard:
            print(f"dashboard: {run_.stack.dashboard_url}", file=sys.stderr, flush=True)
        started = time.time()

        def show(label: str) -> Callable[[Progress], None]:
            def update(p: Progress) -> None:
                if bar is not None:
                    bar(p, label, f"conflicts {run_.observer.results['conflict']}")

            return update

        await run_.apply(workload.base)
        phases["apply"] = time.time() - started
        settled = await run_.settle(seconds, on_progress=show("bulk"), quiet_seconds=2.0)
        phases["bulk"] = time.time() - started
        await run_.apply(workload.preemptors)
        settled = settled and await run_.settle(
            seconds, on_progress=show("preempt"), quiet_seconds=2.0
        )
        phases["preemption"] = time.time() - started
        if bar is not None:
            bar.finish()
        summary = await _summarise(run_, workload, started, settled, validate)
    summary.phases = phases
    return summary


async def _summarise(
    run: Pipeline, workload: DemoWorkload, started: float, settled: bool, validate: bool
) -> DemoSummary:
    client, observer = run.client, run.observer
    snapshot = await client.store.load_snapshot()
    pods = snapshot.pods
    bound = [p for p in pods if p.spec.node_name]
    latencies = [
        (observer.bound_at[uid] - at) * 1000
        for uid, at in client.published.items()
        if uid in observer.bound_at
    ]
    last_bound = max(observer.bound_at.values(), default=started)
    elapsed = max(last_bound - started, 1e-9)
    pending = await client.queue.pending()
    reasons = Counter(p.message or f"({p.queue})" for p in pending.pods)
    gangs = {g.key for g in workload.base.pod_groups}
    gang_bound = Counter(
        f"{p.metadata.namespace}/{p.metadata.labels[POD_GROUP_LABEL]}"
        for p in bound
        if POD_GROUP_LABEL in p.metadata.labels
    )
    violations = 0
    if validate:
        violations = len(
            validate_placement(
                snapshot.nodes,
                pods,
                namespaces=[n for n in snapshot.of_kind("Namespace") if isinstance(n, Namespace)],
            )
        )
    return DemoSummary(
        pods=workload.pod_count,
        bound=len(bound),
        pending=len(pending.pods),
        seconds=elapsed,
        pods_per_second=len(observer.bound_at) / elapsed,
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        conflicts=observer.results["conflict"],
        preemptions=len(observer.victims),
        victims=sum(len(v) for v in observer.victims.values()),
        gangs_bound=sum(1 for g in gangs if gang_bound[g] >= GANG_SIZE),
        gangs=len(gangs),
        utilisation=zone_utilisation(snapshot.nodes, bound),
        top_pending_reasons=[(n, r) for r, n in reasons.most_common(5)],
        violations=violations,
        settled=settled,
    )


def zone_utilisation(nodes: Sequence[Node], bound: Sequence[Pod]) -> dict[str, dict[str, float]]:
    """zone -> resource -> requested / allocatable, in percent (cpu, memory, GPUs)."""
    zone_of = {n.metadata.name: n.metadata.labels.get(ZONE, "") for n in nodes}
    allocatable: dict[str, Counter[str]] = {}
    requested: dict[str, Counter[str]] = {}
    for node in nodes:
        zone = zone_of[node.metadata.name]
        allocatable.setdefault(zone, Counter()).update(node.status.allocatable)
        requested.setdefault(zone, Counter())
    for pod in bound:
        where = zone_of.get(pod.spec.node_name)
        if where is not None:
            requested[where].update(pod_requests(pod))
    out = {}
    for zone in sorted(allocatable):
        out[zone] = {
            name: round(100 * requested[zone][name] / allocatable[zone][name], 1)
            for name in ("cpu", "memory", GPU)
            if allocatable[zone][name]
        }
    return out


def format_summary(summary: DemoSummary) -> str:
    lines = [
        f"pods          {summary.bound:,} bound of {summary.pods:,} "
        f"({summary.pending:,} pending){'' if summary.settled else '  [timed out]'}",
        f"throughput    {summary.pods_per_second:,.0f} pods/s "
        f"({summary.seconds:.1f} s from first apply to last bind)",
        f"latency       p50 {summary.latency_p50_ms:,.0f} ms, p99 {summary.latency_p99_ms:,.0f} ms "
        "(enqueue to bound)",
        f"conflicts     {summary.conflicts:,} (first retried at once, repeats back off)",
        f"preemptions   {summary.preemptions} pods preempted {summary.victims} victims",
        f"gangs         {summary.gangs_bound}/{summary.gangs} bound whole",
        f"violations    {summary.violations} (validator over the final state)",
        "utilisation   "
        + "; ".join(
            f"{zone}: " + ", ".join(f"{k} {v:.0f}%" for k, v in res.items())
            for zone, res in summary.utilisation.items()
        ),
    ]
    if summary.top_pending_reasons:
        lines.append("still pending, top reasons:")
        for count, reason in summary.top_pending_reasons:
            short = reason if len(reason) <= 150 else reason[:147] + "..."
            lines.append(f"  {count:>6,}  {short}")
    return "\n".join(lines)


def demo_main(argv: Sequence[str] | None = None) -> int:
    """`berth demo ARGV...` (the click group in cli/commands/workloads.py parses;
    `--tenants` runs the quota act, cli/demo_tenants.py)."""
    from cli.commands.workloads import demo as command

    return invoke(command, argv, "berth demo")


def demo_run(args: Args) -> int:
    workload = demo_workload(args.nodes, args.pods, args.seed)
    print(
        f"berth demo: {len(workload.base.nodes):,} nodes in 3 zones, {len(TENANTS)} tenants, "
        f"{workload.pod_count:,} pods ({len(workload.base.pod_groups)} gangs, "
        f"{len(workload.preemptors.pods)} high-priority preemptors); "
        f"{args.workers} worker(s), {args.binders} binder(s)",
        file=sys.stderr,
    )
    summary = asyncio.run(
        run_demo(
            workload,
            workers=args.workers,
            binders=args.binders,
            seconds=args.timeout,
            progress=args.output == "text",
            validate=not args.no_validate,
            dashboard=args.dashboard,
        )
    )
    if args.output == "json":
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_summary(summary))
    return 0 if summary.settled and summary.violations == 0 else 1
