"""Probe (not collected: run it by path): Redis's own time per call of the store's two hottest
scripts, apply (pods created) and check-and-reserve (bound at once), on the session's Redis
(appendonly as `berth up` runs it), 5,000 nodes and 10,000 pods of scheduling-basic, calls
pipelined 200 at a time as the binder's ScriptBatcher sends them.

    PYTHONPATH=$PWD pytest -q -s tests/store/probe_scripts.py
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

from cli.bench.workloads import WORKLOADS
from shared.models import Pod
from shared.store import ClusterStore, PodCharge, ReserveRequest, ReserveStatus

NODES, PODS, AT_ONCE = 5000, 10_000, 200


def _report(what: str, stats: dict[str, Any], per: int) -> None:
    print(f"\n{what}: Redis's time per pod, by command (EVALSHA includes the others)")
    for name, entry in sorted(stats.items(), key=lambda item: -item[1]["usec"])[:8]:
        calls, usec = entry["calls"] / per, entry["usec"] / per
        print(f"  {name.removeprefix('cmdstat_'):10} {calls:6.2f} calls {usec:7.2f} us")


async def test_probe(redis_client: aioredis.Redis, redis_prefix: str) -> None:
    store = ClusterStore(redis_client, cluster="c1", prefix=redis_prefix)
    workload = WORKLOADS["scheduling-basic"](NODES, PODS, 0)
    await store.apply(workload.nodes)
    await redis_client.config_resetstat()
    await store.apply(workload.pending)
    _report("apply", await redis_client.info("commandstats"), PODS)

    async def reserve(index: int, pod: Pod) -> ReserveStatus:
        charge = PodCharge.of(pod)
        request = ReserveRequest(
            pod_key=pod.key,
            uid=pod.metadata.uid,
            attempt=1,
            node=workload.nodes[index % NODES].metadata.name,
            priority=0,
            charge=charge,
            check=sorted(charge.requests.items()),
            tolerations=pod.spec.tolerations,
            bind_at_once=True,
        )
        return (await store.bindings.reserve(request, 1000.0)).status

    await redis_client.config_resetstat()
    statuses: list[ReserveStatus] = []
    pods = workload.pending
    for start in range(0, PODS, AT_ONCE):
        chunk = pods[start : start + AT_ONCE]
        statuses += await asyncio.gather(*(reserve(start + i, p) for i, p in enumerate(chunk)))
    _report("check-and-reserve", await redis_client.info("commandstats"), PODS)
    assert set(statuses) == {ReserveStatus.BOUND_AT_ONCE}  # the path the figures are for
