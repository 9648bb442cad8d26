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

import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from cli.commands import Args, invoke
from cli.demo_tenants_samples import Sample, TenantsResult, sample_of
from cli.demo_tenants_scenario import (
    COHORT,
    DRAIN_SECONDS,
    Jobs,
    Scenario,
    default_scenario,
    queue_manifests,
    tenant_jobs,
)
from cli.run import Pipeline, pipeline
from shared.models import (
    Manifests,
)


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
    """`berth demo --tenants ARGV...` (the click command in cli/commands/workloads.py
    parses)."""
    from cli.commands.workloads import demo as command

    return invoke(command, ["tenants", *(sys.argv[1:] if argv is None else argv)], "berth demo")


def tenants_run(args: Args) -> int:
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
