"""`berth demo --tenants`: three teams share a cohort of Kueue ClusterQueues, on the whole stack.

    berth demo --tenants [--job-seconds 6] [--timeout 120] [--plot FILE.png] [-o text|json]

The act (`default_scenario`, sizes in CPUs; every job is a 1-CPU pod that "runs" for
`--job-seconds` once bound, then completes: its KWOK `pod-complete.stage.kwok.x-k8s.io/delay`
annotation says so, and the stack's node agent ends it Succeeded, giving back its node and
its quota):

- ClusterQueues `batch` (nominal 4, borrowingLimit 12, weight 1), `prod` (nominal 8,
  borrowingLimit 4, weight 2) and `research` (nominal 6, borrowingLimit 4, weight 1) in the
  cohort `tenants` (18 CPUs in all; the nodes have more, so quota is what limits), each with
  `reclaimWithinCohort: Any`.
- t=0: `batch` bursts with 32 jobs: it borrows the idle quota of the others, up to nominal +
  borrowingLimit (16).
- t=5: `prod` arrives with 20 jobs: it takes what is free, then wants its nominal quota back.
  Where the queue service reclaims, it evicts `batch`'s borrowed pods (they go back to waiting
  and run again later); without reclaim, `prod` waits for `batch`'s jobs to finish, and DRF
  hands the freed quota to `prod` first (its share is lower).
- t=10: `research` arrives with 10 jobs and claims its nominal quota the same way. While a
  queue is idle, the others borrow its quota in proportion to their weights (DRF: `prod`,
  weight 2, borrows about twice what `batch` does).

Every ~0.5 s the demo samples `StackClient.cluster_queue_rows()` (what `berth get
clusterqueues` shows: usage charged by admission, borrowed, weighted share x1000, pods waiting
for quota) and its own view of the jobs (running, done, evicted). The summary prints the time
series and a line per queue; `-o json` prints it all; `--plot` draws usage and share per queue
over time (matplotlib, Agg backend: no display needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TextIO, cast

import yaml

from cli.run import Pipeline, pipeline
from shared.lifecycle.kwok import COMPLETE, delay_annotation
from shared.lifecycle.state import LifecycleState
from shared.models import (
    Container,
    Manifests,
    Namespace,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
    cluster_meta,
    load_manifest_text,
)
from shared.models.kueue import QUEUE_NAME_LABEL

GI = 1024**3
COHORT = "tenants"
FLAVOR = "default"
LOCAL_QUEUE = "jobs"
DRAIN_SECONDS = 5.0
"""After the last job, how long usage may take to come back to 0."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One team: its ClusterQueue (and namespace, and LocalQueue `jobs`), and its jobs."""

    name: str
    nominal: int
    """CPUs."""
    borrowing_limit: int | None
    weight: int
    arrives: float
    """Seconds after the act starts."""
    jobs: int


@dataclass(frozen=True, slots=True)
class Scenario:
    tenants: tuple[Tenant, ...]
    job_seconds: float = 6.0
    """How long a job runs once bound."""
    nodes: int = 4
    node_cpus: int = 8
    sample_seconds: float = 0.5

    @property
    def cohort_quota(self) -> int:
        return sum(t.nominal for t in self.tenants)

    def tenant(self, name: str) -> Tenant:
        return next(t for t in self.tenants if t.name == name)


def default_scenario(job_seconds: float = 6.0) -> Scenario:
    """The act of the module docstring (about 30 s of jobs)."""
    return Scenario(
        (
            Tenant("batch", nominal=4, borrowing_limit=12, weight=1, arrives=0.0, jobs=32),
            Tenant("prod", nominal=8, borrowing_limit=4, weight=2, arrives=5.0, jobs=20),
            Tenant("research", nominal=6, borrowing_limit=4, weight=1, arrives=10.0, jobs=10),
        ),
        job_seconds=job_seconds,
    )


def queue_manifests(scenario: Scenario) -> Manifests:
    """Nodes, namespaces, the ResourceFlavor, the ClusterQueues and LocalQueues (the Kueue
    objects as a user writes them, loaded and validated like `berth apply -f`)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
        }
    ]
    for t in scenario.tenants:
        cpu: dict[str, Any] = {"name": "cpu", "nominalQuota": t.nominal}
        if t.borrowing_limit is not None:
            cpu["borrowingLimit"] = t.borrowing_limit
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "ClusterQueue",
                "metadata": {"name": t.name},
                "spec": {
                    "cohort": COHORT,
                    "namespaceSelector": {},
                    "fairSharing": {"weight": t.weight},
                    "preemption": {"reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": FLAVOR, "resources": [cpu]}],
                        }
                    ],
                },
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": LOCAL_QUEUE, "namespace": t.name},
                "spec": {"clusterQueue": t.name},
            }
        )
    manifests = load_manifest_text(yaml.safe_dump_all(docs), source="berth demo --tenants")
    manifests.namespaces = [Namespace(metadata=cluster_meta(t.name)) for t in scenario.tenants]
    for i in range(scenario.nodes):
        name = f"node-{i}"
        capacity = {"cpu": scenario.node_cpus * 1000, "memory": 64 * GI, "pods": 110}
        manifests.nodes.append(
            Node(
                metadata=ObjectMeta(
                    name=name, namespace="", labels={"kubernetes.io/hostname": name}
                ),
                spec=NodeSpec(),
                status=NodeStatus(capacity=dict(capacity), allocatable=dict(capacity)),
            )
        )
    return manifests


COMPLETE_DELAY = delay_annotation(COMPLETE)


def tenant_jobs(tenant: Tenant, created: float, job_seconds: float | None = None) -> list[Pod]:
    """The tenant's jobs: 1-CPU pods in its LocalQueue, oldest first; with `job_seconds`,
    each completes that long after it is bound (KWOK's pod-complete stage annotation, which
    the node agent honours)."""
    annotations = {} if job_seconds is None else {COMPLETE_DELAY: f"{job_seconds:g}s"}
    return [
        Pod(
            metadata=ObjectMeta(
                name=f"{tenant.name}-{i:03d}",
                namespace=tenant.name,
                labels={QUEUE_NAME_LABEL: LOCAL_QUEUE, "team": tenant.name},
                annotations=dict(annotations),
                creation_timestamp=created + i / 1000,
            ),
            spec=PodSpec(
                containers=[
                    Container(
                        name="job",
                        image="registry.example.com/job:v1",
                        resources=ResourceRequirements(requests={"cpu": 1000}),
                    )
                ]
            ),
        )
        for i in range(tenant.jobs)
    ]


# ------------------------------------------------------------------------------ the jobs
@dataclass(slots=True)
class JobCounts:
    submitted: int = 0
    running: int = 0
    done: int = 0
    evicted: int = 0
    """Times a running job lost its node without finishing (quota reclaimed)."""


class Jobs:
    """The demo's view of its jobs: each runs from when it is bound until the node agent
    completes it (`job_seconds` later, its KWOK pod-complete annotation; the agent records
    it Succeeded and deletes it, giving back its quota). A bound pod that goes back to
    waiting (unbound, deleted and re-applied, or bound anew) was evicted: the agent starts
    its clock again when it is bound again."""

    def __init__(self, job_seconds: float) -> None:
        self.job_seconds = job_seconds
        self.counts: dict[str, JobCounts] = {}
        self.running: dict[str, tuple[str, int, float]] = {}
        """pod key -> (uid, resourceVersion when seen bound, since)."""
        self.finished: set[str] = set()
        self.mine: dict[str, str] = {}
        """pod key -> tenant, for every job submitted."""

    def submitted(self, tenant: str, pods: Sequence[Pod]) -> None:
        counts = self.counts.setdefault(tenant, JobCounts())
        counts.submitted += len(pods)
        self.mine.update({p.key: tenant for p in pods})

    async def tick(self, run: Pipeline, now: float) -> dict[str, int]:
        """Look at the jobs, complete those that ran long enough; evictions seen, per tenant."""
        stored = {p.key: p for p in cast(list[Pod], await run.client.store.list("Pod"))}
        ended = await LifecycleState(run.client.redis, run.client.store.keys).finished()
        evicted: dict[str, int] = {}
        for key, tenant in self.mine.items():
            if key in self.finished:
                continue
            pod = stored.get(key)
            seen = self.running.get(key)
            if pod is None and key in ended:
                self.running.pop(key, None)
                self.finished.add(key)
                self.counts[tenant].done += 1
                continue
            bound = pod is not None and bool(pod.spec.node_name)
            if seen is not None and (
                not bound
                or pod is None
                or (pod.metadata.uid, pod.metadata.resource_version) != seen[:2]
            ):
                del self.running[key]
                evicted[tenant] = evicted.get(tenant, 0) + 1
                seen = None
            if pod is None or not bound:
                continue
            if seen is None:
                self.running[key] = (pod.metadata.uid, pod.metadata.resource_version, now)
        for tenant, n in evicted.items():
            self.counts[tenant].evicted += n
        for tenant, counts in self.counts.items():
            counts.running = sum(1 for k in self.running if self.mine[k] == tenant)
        return evicted

    @property
    def all_done(self) -> bool:
        return len(self.finished) == len(self.mine)


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


# ------------------------------------------------------------------------------ running
async def run_tenants(
    scenario: Scenario,
    *,
    seconds: float = 120.0,
    run_factory: Callable[..., Any] = pipeline,
    on_sample: Callable[[Sample], None] | None = None,
) -> TenantsResult:
    """Run the act on a fresh stack (see the module docstring) and return its time series."""
    result = TenantsResult(scenario)
    jobs = Jobs(scenario.job_seconds)
    async with run_factory(
        workers=1, binders=1, ordered=False, single_tenant=None, session_ms=3000
    ) as run:
        run_: Pipeline = run
        await run_.client.apply(queue_manifests(scenario))
        started = time.monotonic()
        arrivals = sorted(scenario.tenants, key=lambda t: t.arrives)
        tick = 0
        done_at: float | None = None
        while True:
            now = time.monotonic() - started
            while arrivals and arrivals[0].arrives <= now:
                tenant = arrivals.pop(0)
                pods = tenant_jobs(tenant, time.time(), scenario.job_seconds)
                await run_.client.apply(Manifests(pods=pods))
                jobs.submitted(tenant.name, pods)
                result.events.append((round(now, 2), f"{tenant.name} submits {tenant.jobs} jobs"))
            evicted = await jobs.tick(run_, now)
            for name, n in sorted(evicted.items()):
                result.events.append(
                    (round(now, 2), f"{n} {name} pod(s) evicted (quota reclaimed)")
                )
            sample = sample_of(now, await run_.client.cluster_queue_rows(), jobs, scenario)
            result.samples.append(sample)
            if on_sample is not None:
                on_sample(sample)
            if not arrivals and jobs.all_done:
                # The last deletions release their quota a moment later: sample until the
                # cohort's usage is back to 0 (a few seconds at most).
                done_at = now if done_at is None else done_at
                if sample.cohort_usage == 0 or now - done_at > DRAIN_SECONDS:
                    result.finished = sample.cohort_usage == 0
                    break
            if now > seconds:
                result.events.append((round(now, 2), f"timed out after {seconds:.0f} s"))
                break
            tick += 1
            pause = started + tick * scenario.sample_seconds - time.monotonic()
            await asyncio.sleep(max(0.05, pause))
        result.seconds = time.monotonic() - started
    return result


# ------------------------------------------------------------------------------ output
def format_result(result: TenantsResult, every: float = 2.0) -> str:
    """The time series (a row every `every` seconds and the last one) and a line per queue."""
    sc = result.scenario
    names = [t.name for t in sc.tenants]
    width = 21
    head = "     t  " + "".join(
        f"| {f'{n} (nom {sc.tenant(n).nominal}, w {sc.tenant(n).weight})':<{width}}" for n in names
    )
    sub = "        " + "".join(f"| {'use  +brw share wait':<{width}}" for _ in names)
    lines = [
        f"cohort {COHORT}: {sc.cohort_quota} CPUs of quota; each job 1 CPU for "
        f"{sc.job_seconds:g} s",
        head + "| cohort",
        sub + "|",
    ]
    next_row = 0.0
    for i, s in enumerate(result.samples):
        if s.t + 1e-9 < next_row and i != len(result.samples) - 1:
            continue
        next_row = s.t + every
        cells = "".join(
            f"| {f'{q.usage:>4g} {q.borrowed:>+4g} {q.share:>5} {q.waiting:>4}':<{width}}"
            for q in (s.queues[n] for n in names)
        )
        lines.append(f"{s.t:>6.1f}  {cells}| {s.cohort_usage:g}/{sc.cohort_quota}")
    if result.events:
        lines.append("events:")
        lines += [f"  {t:>6.1f}  {what}" for t, what in result.events]
    lines.append("per queue:")
    for name, row in result.summary().items():
        t = sc.tenant(name)
        limit = "none" if t.borrowing_limit is None else str(t.borrowing_limit)
        first = row["firstAdmittedAt"]
        lines.append(
            f"  {name:<9} nominal {t.nominal}, borrowingLimit {limit}, weight {t.weight}: "
            f"arrived at {t.arrives:g} s (first admitted at "
            f"{'-' if first is None else f'{first:g} s'}), {row['done']}/{row['jobs']} jobs "
            f"done, {row['evicted']} evicted; peak usage {row['peakUsage']:g}, borrowed "
            f"{row['peakBorrowed']:g}, share {row['peakShare']}, waiting {row['peakWaiting']}"
        )
    status = "all jobs done" if result.finished else "NOT all jobs done"
    lines.append(f"{status} in {result.seconds:.1f} s")
    return "\n".join(lines)


class LiveLine:
    """One status line on a terminal while the act runs (nothing otherwise)."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.tty = out.isatty()

    def __call__(self, sample: Sample) -> None:
        if not self.tty:
            return
        text = f"t={sample.t:5.1f}s  " + "  ".join(
            f"{n} {q.usage:g} ({q.borrowed:+g}) share {q.share} wait {q.waiting}"
            for n, q in sample.queues.items()
        )
        self.out.write("\r" + text.ljust(110))
        self.out.flush()

    def finish(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()


def tenants_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="berth demo --tenants",
        description="Three ClusterQueues in a cohort on the distributed stack: borrowing, "
        "reclaim and fair sharing over time.",
    )
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=6.0,
        metavar="SEC",
        help="how long each job runs once bound (default 6)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, metavar="SEC", help="give up after (default 120)"
    )
    parser.add_argument("--plot", metavar="FILE.png", help="draw usage and share over time")
    parser.add_argument("-o", "--output", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    scenario = default_scenario(args.job_seconds)
    print(
        "berth demo --tenants: "
        + ", ".join(
            f"{t.name} (nominal {t.nominal} CPUs, weight {t.weight}, {t.jobs} jobs at "
            f"{t.arrives:g} s)"
            for t in scenario.tenants
        )
        + f" in cohort {COHORT}",
        file=sys.stderr,
    )
    live = LiveLine() if args.output == "text" else None
    result = asyncio.run(run_tenants(scenario, seconds=args.timeout, on_sample=live))
    if live is not None:
        live.finish()
    if args.output == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_result(result))
    if args.plot:
        from cli.demo_plot import plot_tenants

        plot_tenants(result, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0 if result.finished else 1
