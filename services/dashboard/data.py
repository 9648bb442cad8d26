"""What the dashboard shows, read from the store (a snapshot, reloaded when the store's
resourceVersion moves, at most once per `refresh_seconds`) and the queue's Redis state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from services.queue.client import (
    PodRow,
    QueueClient,
    cluster_queue_statuses,
    pending_first,
    pod_rows,
)
from shared.models.kueue import ClusterQueue, LocalQueue, ResourceFlavor
from shared.runtime.env import StackSettings
from shared.store import ClusterStore, Snapshot
from shared.store.objects import node_rows, read_heartbeats

MAX_PODS = 500
"""Pods one /api/pods answer lists at most (the total is given beside)."""


class DashboardData:
    def __init__(
        self, redis: Redis, settings: StackSettings, *, refresh_seconds: float = 1.0
    ) -> None:
        self.settings = settings
        self.store = ClusterStore(redis, cluster=settings.cluster, prefix=settings.store_prefix)
        self.queue = QueueClient(redis, settings.queue_prefix)
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

    def invalidate(self) -> None:
        """The next read loads the store afresh (after a write through the API)."""
        self._loaded_at = 0.0

    async def rows(self) -> tuple[Snapshot, list[PodRow]]:
        snapshot = await self.snapshot()
        pending = (await self.queue.pending()).pods
        return snapshot, pod_rows(snapshot, pending, self.scheduler_names)

    async def cluster_queues(self, namespaces: Collection[str] | None = None) -> dict[str, Any]:
        """Every ClusterQueue's status; without any, the tenant queues' counts. `namespaces`:
        only the ClusterQueues their LocalQueues point at (and only their tenant queues)."""
        snapshot, rows = await self.rows()
        queues = cast(list[ClusterQueue], snapshot.of_kind("ClusterQueue"))
        local_queues = cast(list[LocalQueue], snapshot.of_kind("LocalQueue"))
        out: dict[str, Any] = {"resourceVersion": snapshot.resource_version}
        if not queues:
            out["clusterQueues"] = []
            out["tenants"] = await self.tenant_counts(namespaces)
            return out
        statuses = cluster_queue_statuses(
            queues,
            local_queues,
            cast(list[ResourceFlavor], snapshot.of_kind("ResourceFlavor")),
            snapshot.nodes,
            snapshot.pods,
            rows,
            await self.queue.reserved(),
        )
        if namespaces is not None:
            used = {
                lq.spec.cluster_queue for lq in local_queues if lq.metadata.namespace in namespaces
            }
            statuses = [s for s in statuses if s.name in used]
        out["clusterQueues"] = [s.to_json() for s in statuses]
        out["tenants"] = None
        return out

    async def tenant_counts(
        self, namespaces: Collection[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """Per tenant queue (only those named in `namespaces`, when given): its counts."""
        counts = await self.queue.counts()
        return {
            tenant: {**c.to_json(), "pending": c.pending}
            for tenant, c in sorted(counts.items())
            if namespaces is None or tenant in namespaces
        }

    async def queues(
        self, namespaces: Collection[str] | None = None, *, workers: bool = True
    ) -> dict[str, Any]:
        """`berth get queues -o json`: tenant queue counts, and the workers' heartbeats."""
        tenants = await self.tenant_counts(namespaces)
        for counts in tenants.values():
            del counts["pending"]
        beats = {}
        if workers:
            beats = await read_heartbeats(
                self.store.redis, self.settings.store_prefix, self.settings.cluster
            )
        return {
            "tenants": tenants,
            "workers": {name: beat.as_json() for name, beat in beats.items()},
        }

    async def nodes(self) -> list[dict[str, Any]]:
        return node_rows(await self.snapshot())

    async def pods(
        self, query: str = "", namespaces: Sequence[str] | None = None, *, limit: int = MAX_PODS
    ) -> dict[str, Any]:
        """Pods whose "namespace/name", reason or ClusterQueue contains `query` (any case),
        in `namespaces` (all when None), pending first; at most `limit` (0: all)."""
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
            "pods": [row.to_json() for row in (ordered[:limit] if limit > 0 else ordered)],
        }
