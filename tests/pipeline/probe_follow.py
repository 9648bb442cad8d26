"""Probe (not collected: run it by path): what a view (a worker's or a binder's) pays to follow
the change stream, per cluster pod, in CPU of its own process.

scheduling-basic's pods are written to a real Redis as the pipeline writes them (created
unbound, then bound at once by check-and-reserve), then a ClusterCache loaded from the
snapshot taken before the pods follows the stream through CacheSync, reading `--count`
changes per XREAD (the pipeline's followers read about 36: 560 XREADs per 10,000 pods).
Each figure is also given in floor units (cli/bench/floor.py, measured first in the same
process): issue 18 asks at most 0.10 per cluster pod for each further worker.

    PYTHONPATH=$PWD python tests/pipeline/probe_follow.py [--nodes 5000] [--pods 10000]
        [--count 40] [--profile FILE]

BERTH_REDIS_URL: a Redis to use (else a local one is started and stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import time
import uuid
from collections.abc import Sequence

from cli.bench.floor import floor_pods_per_s
from cli.bench.workloads import scheduling_basic
from scheduling.cache.cache import WORKER_HOLDER, ClusterCache
from scheduling.cache.sync import CacheSync
from shared.models import Pod
from shared.runtime.redisconn import connect
from shared.runtime.service import GC_THRESHOLD_YOUNG
from shared.store import ClusterStore, PodCharge, ReserveRequest, ReserveStatus

WRITE_BATCH = 200


async def _write_pods(store: ClusterStore, nodes: list[str], pods: Sequence[Pod]) -> None:
    for start in range(0, len(pods), WRITE_BATCH):
        batch = pods[start : start + WRITE_BATCH]
        applied = await store.apply(batch)
        calls = []
        for offset, (pod, done) in enumerate(zip(batch, applied, strict=True)):
            node = nodes[(start + offset) % len(nodes)]
            request = ReserveRequest(
                pod_key=pod.key,
                uid=done.uid,
                attempt=1,
                node=node,
                priority=0,
                charge=PodCharge.of(pod),
                bind_at_once=True,
            )
            calls.append(store.bindings.submit_reserve(request, time.time()))
        for result in await asyncio.gather(*calls):
            assert result.status is ReserveStatus.BOUND_AT_ONCE, result


async def main(args: argparse.Namespace, url: str) -> None:
    gc.set_threshold(GC_THRESHOLD_YOUNG, 20, 20)
    redis = connect(url)
    prefix = f"probe-follow:{uuid.uuid4().hex[:8]}:"
    store = ClusterStore(redis, prefix=prefix, stream_maxlen=10 * args.pods + 10 * args.nodes)
    workload = scheduling_basic(args.nodes, args.pods)
    floor_us = 1e6 / floor_pods_per_s()
    print(f"floor: {floor_us:.0f} µs of CPU per pod (the naive numpy cycle, this run)")
    try:
        for start in range(0, len(workload.nodes), WRITE_BATCH):
            await store.apply(workload.nodes[start : start + WRITE_BATCH])
        snapshot = await store.load_snapshot()
        names = [n.metadata.name for n in workload.nodes]
        await _write_pods(store, names, workload.pending)
        end = await store.resource_version()

        for holder in (WORKER_HOLDER, "binder-1"):
            best = float("inf")
            for _ in range(args.rounds):
                cache = ClusterCache(holder)
                cache.load(snapshot)
                # As a service runs (shared/runtime/service.py): a young collection every
                # GC_THRESHOLD_YOUNG allocations, and what start() loaded frozen.
                gc.collect()
                gc.freeze()
                sync = CacheSync(store, cache, count=args.count, block_ms=100)
                profiler = cProfile.Profile() if args.profile else None
                started = time.process_time()
                if profiler:
                    profiler.enable()
                # CacheSync.start would load the store's snapshot as of now (every pod in
                # it): the view follows from the snapshot before the pods instead.
                sync._task = asyncio.create_task(sync._follow())
                assert await cache.wait_for(end, 120.0)
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(f"{args.profile}.{holder or 'worker'}")
                spent = time.process_time() - started
                await sync.stop()
                gc.unfreeze()
                assert len(cache.pods) == args.pods
                best = min(best, spent)
            label = "worker" if holder == WORKER_HOLDER else "binder"
            per_pod = best / args.pods * 1e6
            print(
                f"{label}: {per_pod:5.1f} µs of CPU per cluster pod (best of {args.rounds}) ="
                f" {per_pod / floor_us:.3f} floor units"
            )
    finally:
        keys = [k async for k in redis.scan_iter(f"{prefix}*")]
        for start in range(0, len(keys), 500):
            await redis.delete(*keys[start : start + 500])
        await redis.aclose()


def run() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="")
    args = parser.parse_args()
    url = os.environ.get("BERTH_REDIS_URL", "")
    if url:
        asyncio.run(main(args, url))
        return
    from cli.servers import start_dev_servers

    servers = start_dev_servers()
    try:
        asyncio.run(main(args, servers.redis_url))
    finally:
        servers.stop()


if __name__ == "__main__":
    run()
