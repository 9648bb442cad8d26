"""Kubernetes mode at scale, end to end through the API emulator (issue 20, item 7).

    python -m tests.kube.bench [--nodes 5000] [--pods 20000] [--workers 1] [--binders 1]
                               [--timeout 1800] [--profile FILE] [--profile-services DIR] [-o json]

The emulator (tests/kube/emulator.py) runs in this process and serves N Ready nodes and P
pending pods of berth's profile ("berth"); a whole stack (Redis, the broker, queue, workers,
binders and the adapter as processes, as `berth up --kubeconfig` runs them) schedules them,
binding each through pods/binding. Reported:

- first_list_s: one paginated list of every pod through berth's client (resourceVersion=0,
  500 a page), timed in this process before the stack starts: the API side of the adapter's
  first relist;
- adapter_synced_s: from the stack's start until the adapter's store holds every pod (its
  first relist, store writes included);
- pods_per_s: pods bound through pods/binding per second, first binding to last;
- cpu_ms_per_pod by process (berth's services, Redis, the broker) and for the emulator (this
  process, which also does the bookkeeping of the run): CPU seconds are steadier than wall
  time on a shared machine;
- adapter_rss_mb / adapter_peak_rss_mb: the adapter's memory at the end, and its peak.

With --profile FILE the emulator's process is profiled (cProfile): when the emulator is the
bottleneck, its top functions say so. --profile-services DIR leaves a cProfile dump per
service process in DIR (BERTH_PROFILE_DIR).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import kmock

from cli.bench.distributed import cpu_seconds
from cli.supervisor import RunningStack, start_stack
from shared.kube.client import KubeApi, load_config
from shared.runtime.env import ENV_PROFILE_DIR
from shared.runtime.redisconn import connect
from shared.store import ClusterStore
from tests.kube.conftest import write_kubeconfig
from tests.kube.emulator import ApiEmulator

PROFILE = "berth"
CONFIG = (
    "apiVersion: kubescheduler.config.k8s.io/v1\n"
    "kind: KubeSchedulerConfiguration\n"
    f"profiles: [{{schedulerName: {PROFILE}}}]\n"
    # kube-scheduler's defaults (50/100) would cap each binder at 50 bindings a second, as
    # they cap kube-scheduler: scale tests raise them (scheduler_perf uses 5000).
    "clientConnection: {qps: 5000, burst: 5000}\n"
)


def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pending_pod(i: int) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "128Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": f"team-{i % 10}"},
        "spec": {
            "schedulerName": PROFILE,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Pending"},
    }


def rss_mb(pid: int | None) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB (Linux /proc)."""
    if pid is None:
        return 0.0, 0.0
    found = {"VmRSS": 0.0, "VmHWM": 0.0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in found:
                found[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return found["VmRSS"], found["VmHWM"]


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu(running: RunningStack) -> dict[str, float]:
    out = {name: cpu_seconds(p.pid) for name, p in running.stack.processes.items()}
    if running.servers is not None:
        for process in running.servers.processes:
            out[process.name.split(":")[0]] = cpu_seconds(process.popen.pid)
    return out


async def bench(
    nodes: int,
    pods: int,
    *,
    workers: int = 1,
    binders: int = 1,
    wait_s: float = 1800.0,
    profile_dir: str = "",
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="berth-kube-bench-"))
    config = workdir / "config.yaml"
    config.write_text(CONFIG)
    emu = ApiEmulator(history_limit=max(10_000, 4 * (nodes + pods)), bookmark_interval=30.0)
    async with emu, kmock.Server(emu) as server:
        url = str(server.url).rstrip("/")
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", url)
        for i in range(nodes):
            emu.upsert(node(i))
        for i in range(pods):
            emu.upsert(pending_pod(i))
        api = KubeApi(load_config(str(kubeconfig)))
        started = time.monotonic()
        listed, _version = await api.list("Pod")
        first_list_s = time.monotonic() - started
        await api.close()
        assert len(listed) == pods

        emulator_cpu_before = self_cpu()
        stack_started = time.monotonic()
        running = await start_stack(
            workers=workers,
            binders=binders,
            config_path=str(config),
            kube=str(kubeconfig),
            session_ms=3000,
            ready_seconds=600.0,
            extra_env={ENV_PROFILE_DIR: profile_dir} if profile_dir else None,
        )
        try:
            cpu_before = _cpu(running)
            store = ClusterStore(
                connect(running.settings.redis_url, running.settings.redis_security),
                cluster=running.settings.cluster,
                prefix=running.settings.store_prefix,
            )
            synced_s = None
            first_bound = last_bound = None
            bound = 0
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                now = time.monotonic()
                bound = sum(
                    1
                    for (plural, _, _), obj in emu.objects.items()
                    if plural == "pods" and obj.get("spec", {}).get("nodeName")
                )
                if bound and first_bound is None:
                    first_bound = now
                if synced_s is None and (len((await store.load_snapshot()).pods) >= pods or bound):
                    synced_s = now - stack_started
                if bound >= pods:
                    last_bound = now
                    break
                await asyncio.sleep(0.5)
            cpu_after = _cpu(running)
            adapter = next(
                (p for name, p in running.stack.processes.items() if name.startswith("adapter")),
                None,
            )
            rss, peak = rss_mb(adapter.pid if adapter is not None else None)
            await store.redis.aclose()
        finally:
            await running.close()
        emulator_cpu = self_cpu() - emulator_cpu_before
    shutil.rmtree(workdir, ignore_errors=True)
    window = (last_bound - first_bound) if last_bound and first_bound else None
    cpu = {name: cpu_after.get(name, 0.0) - used for name, used in cpu_before.items()}
    per_pod = {name: round(used * 1000 / max(bound, 1), 3) for name, used in cpu.items()}
    per_pod["emulator"] = round(emulator_cpu * 1000 / max(bound, 1), 3)
    return {
        "nodes": nodes,
        "pods": pods,
        "bound": bound,
        "first_list_s": round(first_list_s, 3),
        "adapter_synced_s": round(synced_s, 2) if synced_s is not None else None,
        "pods_per_s": round(bound / window, 1) if window else None,
        "bind_window_s": round(window, 2) if window else None,
        "cpu_ms_per_pod": per_pod,
        "berth_cpu_ms_per_pod": round(
            sum(v for k, v in per_pod.items() if k.split("-")[0] in SERVICES), 3
        ),
        "adapter_rss_mb": round(rss, 1),
        "adapter_peak_rss_mb": round(peak, 1),
        "machine": "shared (2 cores, other sessions running): CPU figures, not wall time, "
        "are the comparable ones",
    }


SERVICES = ("queue", "worker", "binder", "adapter")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kube.bench")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--profile", metavar="FILE", help="cProfile the emulator's process")
    parser.add_argument(
        "--profile-services", metavar="DIR", default="", help="a cProfile dump per service"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    result = asyncio.run(
        bench(
            args.nodes,
            args.pods,
            workers=args.workers,
            binders=args.binders,
            wait_s=args.timeout,
            profile_dir=args.profile_services,
        )
    )
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(25)
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0 if result["bound"] == result["pods"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
