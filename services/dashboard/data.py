"""What the dashboard shows, read from the store (a snapshot, reloaded when the store's
resourceVersion moves, at most once per `refresh_seconds`) and the queue's Redis state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio import Redis

from shared.env import StackSettings
from shared.models.kueue import ClusterQueue, LocalQueue, ResourceFlavor
from shared.pod_status import PodRow, pending_first, pod_rows
from shared.queue_keys import QueueKeys
from shared.queue_views import QueueReads
from shared.quota_status import cluster_queue_statuses
from shared.store import ClusterStore, Snapshot

MAX_PODS = 500
"""Pods one /api/pods answer lists at most (the total is given beside)."""


class DashboardData:
    def __init__(
        self, redis: Redis, settings: StackSettings, *, refresh_seconds: float = 1.0
    ) -> None:
        self.settings = settings
        self.store = ClusterStore(redis, cluster=settings.cluster, prefix=settings.store_prefix)
        self.queue = QueueReads(redis, QueueKeys(settings.queue_prefix))
        self.scheduler_names = settings.scheduler_names()
        self.refresh_seconds = refresh_seconds
        self._snapshot: Snapshot | None = None
        self._loaded_at = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self) -> Snapshot:
        """The store as of now, or as of at most `refresh_seconds` ago."""
        async with self._lock:
            fresh = time.monotonic() - self._loaded_at < self.refresh_seconds
            if self._snapshot is not None and fresh:
                return self._snapshot
            if (
                self._snapshot is None
                or await self.store.resource_version() != self._snapshot.resource_version
            ):
                self._snapshot = await self.store.load_snapshot()
            self._loaded_at = time.monotonic()
            return self._snapshot

    async def rows(self) -> tuple[Snapshot, list[PodRow]]:
        snapshot = await self.snapshot()
        pending = (await self.queue.pending()).pods
        return snapshot, pod_rows(snapshot, pending, self.scheduler_names)

    async def cluster_queues(self) -> dict[str, Any]:
        """Every ClusterQueue's status; without any, the tenant queues' counts."""
        snapshot, rows = await self.rows()
        queues = cast(list[ClusterQueue], snapshot.of_kind("ClusterQueue"))
        out: dict[str, Any] = {"resourceVersion": snapshot.resource_version}
        if not queues:
            counts = await self.queue.counts()
            out["clusterQueues"] = []
            out["tenants"] = {
                tenant: {**c.to_json(), "pending": c.pending}
                for tenant, c in sorted(counts.items())
            }
            return out
        statuses = cluster_queue_statuses(
            queues,
            cast(list[LocalQueue], snapshot.of_kind("LocalQueue")),
            cast(list[ResourceFlavor], snapshot.of_kind("ResourceFlavor")),
            snapshot.nodes,
            snapshot.pods,
            rows,
        )
        out["clusterQueues"] = [s.to_json() for s in statuses]
        out["tenants"] = None
        return out

    async def pods(
        self, query: str = "", namespaces: Sequence[str] | None = None, *, limit: int = MAX_PODS
    ) -> dict[str, Any]:
        """Pods whose "namespace/name", reason or ClusterQueue contains `query` (any case),
        in `namespaces` (all when None), pending first."""
        snapshot, rows = await self.rows()
        needle = query.strip().lower()
        wanted = [
            row
            for row in rows
            if (namespaces is None or row.namespace in namespaces)
            and (
                not needle
                or needle in row.key.lower()
                or needle == row.reason
                or needle in row.cluster_queue.lower()
            )
        ]
        ordered = pending_first(wanted)
        return {
            "resourceVersion": snapshot.resource_version,
            "total": len(ordered),
            "pods": [row.to_json() for row in ordered[:limit]],
        }
