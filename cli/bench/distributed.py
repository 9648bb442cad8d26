"""`berth bench --mode distributed`: the whole pipeline on real Redis and broker, timed.

    berth bench --mode distributed --workers N --binders M [--nodes 5000] [--pods 10000]
                [--workload scheduling-basic] [--percentage 100] [--profile DIR]
                [--rate R --duration S]

A fresh stack (servers and services as processes, as `berth up` runs them); the workload's
nodes (and running pods) are applied and every worker has loaded them; then all pending pods
are applied at once (or, with --rate, R per second for S seconds, open loop), and the clock
runs from the first pod applied to the last pod bound.
Latency is per pod, enqueue (its event published) to bound (the binder's "scheduled" outcome,
broker timestamp). `--profile DIR` leaves a cProfile dump per service process in DIR.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cli.bench.workloads import WORKLOADS
from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from shared.models import Manifests
from shared.observability.stats import percentile
from shared.runtime.env import ENV_PROFILE_DIR
from shared.store.objects import read_heartbeats


@contextlib.asynccontextmanager
async def _config_file(percentage: int) -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="berth-bench-") as directory:
        path = Path(directory) / "config.yaml"
        path.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            f"percentageOfNodesToScore: {percentage}\n"
        )
        yield str(path)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_cpu(run: Pipeline) -> dict[str, float]:
    out = {name: cpu_seconds(p.pid) for name, p in run.stack.processes.items()}
    servers = run.running.servers
    if servers is not None:
        for process in servers.processes:
            out[process.name.split(":")[0]] = cpu_seconds(process.popen.pid)
    return out


async def redis_command_usec(redis: Any) -> dict[str, tuple[int, int]]:
    """Redis's calls and microseconds so far, per command (INFO commandstats), and its reads
    of client requests ("(reads)": one per request batch a client sent, whatever it holds;
    each costs Redis a read, a reply write and an event loop turn beside the commands)."""
    stats = await redis.info("commandstats")
    out = {
        name.removeprefix("cmdstat_"): (int(entry["calls"]), int(entry["usec"]))
        for name, entry in stats.items()
        if isinstance(entry, dict)
    }
    reads = (await redis.info("stats")).get("total_reads_processed", 0)
    out[READS] = (int(reads), 0)
    return out


READS = "(reads)"


def redis_us_per_pod(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], pods: int, top: int = 12
) -> dict[str, dict[str, float]]:
    """The `top` commands by Redis time between two readings: microseconds and calls per pod."""
    spent = {
        name: (calls - before.get(name, (0, 0))[0], usec - before.get(name, (0, 0))[1])
        for name, (calls, usec) in after.items()
    }
    ranked = sorted(spent.items(), key=lambda item: -item[1][1])[:top]
    out = {
        name: {"us": round(usec / pods, 2), "calls": round(calls / pods, 2)}
        for name, (calls, usec) in ranked
        if usec > 0
    }
    if READS in spent:
        out[READS] = {"us": 0.0, "calls": round(spent[READS][0] / pods, 2)}
    return out


IDLE_SECONDS = 2.0
"""How long the loaded-but-idle stack is watched before the pods arrive: what each process
spends per second doing nothing (consumers polling, heartbeats, followers waiting), a cost per
second that the capacity model keeps apart from the cost per pod."""

OFFER_TICK_S = 0.01
"""How often the open-loop offer (--rate) applies the pods that are due."""


async def _offer(run: Pipeline, pending: Manifests, rate: float) -> None:
    """Apply the pods open loop: pod i is due at i / rate seconds, whatever the pipeline
    does meanwhile (a closed loop would wait for it, and hide its queueing)."""
    pods = pending.pods
    started = time.time()
    sent = 0
    while sent < len(pods):
        due = min(len(pods), int((time.time() - started) * rate) + 1)
        if due > sent:
            await run.apply(Manifests(pods=pods[sent:due]))
            sent = due
        await asyncio.sleep(OFFER_TICK_S)


async def _run(
    manifests: Manifests, pending: Manifests, run: Pipeline, seconds: float, rate: float
) -> dict[str, Any]:
    await run.apply(manifests)
    # Workers see the nodes before the clock starts (their barrier would wait anyway).
    target = await run.client.store.resource_version()
    while True:
        beats = await read_heartbeats(
            run.client.redis, run.client.settings.store_prefix, run.client.settings.cluster
        )
        if beats and all(b.resource_version >= target for b in beats.values()):
            break
        await asyncio.sleep(0.1)
    idle_before, idle_started = _process_cpu(run), time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    cpu_before = _process_cpu(run)
    redis_before = await redis_command_usec(run.client.redis)
    idle_seconds = time.monotonic() - idle_started
    idle_ms_per_s = {
        name: round((used - idle_before.get(name, 0.0)) * 1000 / idle_seconds, 2)
        for name, used in cpu_before.items()
    }
    started = time.time()
    window_started = time.monotonic()
    harness_before = time.process_time()
    if rate > 0:
        await _offer(run, pending, rate)
    else:
        await run.apply(pending)
    applied = time.time()
    settled = await run.settle(seconds, quiet_seconds=1.0)
    harness_cpu = time.process_time() - harness_before
    redis_after = await redis_command_usec(run.client.redis)
    window = time.monotonic() - window_started
    cpu = {
        name: round(used - cpu_before.get(name, 0.0), 2) for name, used in _process_cpu(run).items()
    }
    observer = run.observer
    uids = {p.metadata.uid for p in pending.pods}
    bound = {uid: at for uid, at in observer.bound_at.items() if uid in uids}
    latencies = [
        (at - run.client.published[uid]) * 1000
        for uid, at in bound.items()
        if uid in run.client.published
    ]
    published = run.client.published
    stages = {
        "enqueue_to_dispatch": (published, observer.dispatched_at),
        "dispatch_to_proposal": (observer.dispatched_at, observer.proposed_at),
        "proposal_to_bound": (observer.proposed_at, bound),
    }
    stage_p50 = {
        name: round(percentile([end[u] - begin[u] for u in end if u in begin], 50) * 1000, 1)
        for name, (begin, end) in stages.items()
    }
    last = max(bound.values(), default=started)
    elapsed = max(last - started, 1e-9)
    beats = await read_heartbeats(
        run.client.redis, run.client.settings.store_prefix, run.client.settings.cluster
    )
    pods_bound = max(len(bound), 1)
    return {
        "pods": len(pending.pods),
        "bound": len(bound),
        "settled": settled,
        "seconds": round(elapsed, 2),
        "pods_per_second": round(len(bound) / elapsed, 1),
        "latency_p50_ms": round(percentile(latencies, 50), 1),
        "latency_p99_ms": round(percentile(latencies, 99), 1),
        "apply_seconds": round(applied - started, 2),
        "conflicts": observer.results["conflict"],
        "stage_p50_ms": stage_p50,
        "worker_cycle_seconds": {name: beat.cycle_seconds for name, beat in sorted(beats.items())},
        "cpu_seconds": cpu,
        # CPU of each process per pod bound: what a pod costs the pipeline, where.
        "cpu_ms_per_pod": {
            **{name: round(used * 1000 / pods_bound, 3) for name, used in cpu.items()},
            "total": round(sum(cpu.values()) * 1000 / pods_bound, 3),
        },
        # What Redis spent per pod, by command (a script's EVALSHA includes the commands
        # it runs, which are also counted under their own names): where its time goes.
        "redis_us_per_pod": redis_us_per_pod(redis_before, redis_after, pods_bound),
        # This process's own CPU in the window (not in the total above): the pods' apply (an
        # API server's part), the observer reading the topics and the wait for the pipeline
        # to settle. It shares the cores with the services, so it is kept small and shown.
        "harness_cpu_ms_per_pod": round(harness_cpu * 1000 / pods_bound, 3),
        "worker_pods": {name: beat.pods for name, beat in sorted(beats.items())},
        # What each process spends per second while idle, and how long the CPU above was
        # measured: the capacity model subtracts the one over the other from the per pod cost.
        "idle_cpu_ms_per_s": idle_ms_per_s,
        "cpu_window_seconds": round(window, 2),
    }


async def bench_distributed_async(
    *,
    workload: str = "scheduling-basic",
    nodes: int = 5000,
    pods: int = 10_000,
    running: int = 0,
    workers: int = 1,
    binders: int = 1,
    percentage: int = 100,
    seed: int = 0,
    profile_dir: str | None = None,
    seconds: float = 900.0,
    servers: DevServers | None = None,
    rate: float = 0.0,
    duration: float = 0.0,
) -> dict[str, Any]:
    """See the module docstring; `servers` reuses running Redis and broker (tests).
    With `rate`, `rate` x `duration` pods are offered open loop instead of `pods` at once."""
    if workload not in WORKLOADS:
        known = ", ".join(sorted(WORKLOADS))
        raise ValueError(f"unknown workload {workload!r} (known: {known})")
    if rate < 0 or (rate > 0 and duration <= 0):
        raise ValueError("--rate needs a positive --duration (seconds of load)")
    if rate > 0:
        pods = max(1, round(rate * duration))
    generated = WORKLOADS[workload](nodes, pods, running)
    cluster = Manifests(nodes=generated.nodes, pods=list(generated.running))
    pending = Manifests(pods=list(generated.pending))
    profile = await asyncio.to_thread(os.path.abspath, profile_dir) if profile_dir else None
    async with (
        _config_file(percentage) as config_path,
        pipeline(
            config_path=config_path,
            workers=workers,
            binders=binders,
            seed=seed,
            ordered=False,
            single_tenant=None,
            session_ms=3000,
            servers=servers,
            extra_env={ENV_PROFILE_DIR: profile} if profile else None,
            # The scheduling pipeline alone: its pods never finish, so the simulated
            # kubelets (services/agent) would only follow the stream, at the cost of one
            # more follower, not part of what is measured.
            agents=0,
        ) as run,
    ):
        result = await _run(cluster, pending, run, seconds, rate)
    return {
        "mode": "distributed",
        "workload": workload,
        "nodes": nodes,
        "pods": pods,
        "workers": workers,
        "binders": binders,
        "percentage_of_nodes_to_score": percentage,
        **({"rate": rate, "duration": duration} if rate > 0 else {}),
        **result,
        **({"profile_dir": profile} if profile else {}),
    }


def bench_distributed(**options: Any) -> dict[str, Any]:
    """`berth bench --mode distributed` (see the module docstring); options as
    `bench_distributed_async`."""
    return asyncio.run(bench_distributed_async(**options))
