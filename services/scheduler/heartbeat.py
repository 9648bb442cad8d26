"""What a scheduler worker reports about itself: its counts (WorkerStats), its entry in the
workers' heartbeat hash (`<prefix>{<cluster>}:workers`, a shared.store.objects.WorkerHeartbeat),
and its view's gauges (cache size, follow lag, signature reuse)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from redis.asyncio import Redis

from scheduling.cache.cache import ClusterCache
from scheduling.framework.runtime import Framework
from services.scheduler.instrument import report_reuse
from shared.observability.metrics import BerthMetrics
from shared.store import ClusterStore, StoreKeys
from shared.store.objects import WorkerHeartbeat


def heartbeat_key(prefix: str, cluster: str) -> str:
    """The hash of the workers' heartbeats (one field per worker): the store's `workers` key."""
    return StoreKeys(prefix, cluster).workers


@dataclass(slots=True)
class WorkerStats:
    pods: int = 0
    proposals: int = 0
    preemptions: int = 0
    outcomes: int = 0
    dead_letters: int = 0
    cycle_seconds: float = 0.0
    barrier_waits: int = 0
    corrections: int = 0
    """Snapshot reloads because a conflict showed the view counting short of the store."""


async def report_view(
    view: ClusterCache,
    store: ClusterStore,
    metrics: BerthMetrics,
    frameworks: dict[str, Framework],
    reuse_seen: dict[tuple[str, str], int],
    view_name: str,
) -> None:
    """scheduler_scheduler_cache_size, berth_view_follow_lag (from the view) and
    berth_signature_reuse_total."""
    cache = metrics.cache_size
    cache.labels(type="nodes").set(len(view.nodes))
    cache.labels(type="pods").set(len(view.pods))
    cache.labels(type="assumed_pods").set(len(view.assumed))
    behind = max(0, await store.resource_version() - view.resource_version)
    metrics.follow_lag.labels(view=view_name).set(behind)
    report_reuse(frameworks, metrics, reuse_seen)


async def write_heartbeat(
    redis: Redis, key: str, worker_id: str, view: ClusterCache, stats: WorkerStats, now: float
) -> None:
    """This worker's entry: how far its view is, what it counts, its counters."""
    beat = WorkerHeartbeat(
        resource_version=view.resource_version,
        at=now,
        pid=os.getpid(),
        assumed=len(view.assumed),
        nodes=len(view.nodes),
        pods=stats.pods,
        proposals=stats.proposals,
        preemptions=stats.preemptions,
        outcomes=stats.outcomes,
        dead_letters=stats.dead_letters,
        cycle_seconds=round(stats.cycle_seconds, 3),
        corrections=stats.corrections,
    )
    await redis.hset(key, worker_id, beat.encode())
