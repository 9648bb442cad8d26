"""The queue's public client: what code outside the queue may know of it. The read side (counts,
the pending view, why each pod waits, quota usage) for the CLI and the dashboard, and the lease
verdict for the binder. The queue's key layout stays inside services/queue (the import walls,
tests/test_import_walls.py, let other services import this module only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis

from services.queue.keys import QueueKeys
from services.queue.lease import LEASED, LeaseReader, LeaseVerdict, judge_lease
from services.queue.pod_status import PodRow, pending_first, pod_rows
from services.queue.quota.cohorts import FlavorResource
from services.queue.quota.status import ClusterQueueStatus, cluster_queue_statuses, read_reserved
from services.queue.views import PendingPod, PendingView, QueueCounts, QueueReads
from shared.store.batch import ScriptBatcher

__all__ = [
    "LEASED",
    "ClusterQueueStatus",
    "LeaseVerdict",
    "PendingPod",
    "PendingView",
    "PodRow",
    "QueueClient",
    "QueueCounts",
    "cluster_queue_statuses",
    "judge_lease",
    "lease_reader",
    "pending_first",
    "pod_rows",
]


class QueueClient:
    """Reads a running queue's state (key prefix `prefix`) without knowing its keys."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        self.redis = redis
        self._keys = QueueKeys(prefix)
        self._reads = QueueReads(redis, self._keys)

    async def pending(self, tenant: str | None = None) -> PendingView:
        """Every pending pod, where the queue holds it, its attempts and last failure."""
        return await self._reads.pending(tenant)

    async def counts(self) -> dict[str, QueueCounts]:
        """Pods per tenant in each of the queue's sub-queues."""
        return await self._reads.counts()

    async def reserved(self) -> dict[str, dict[FlavorResource, int]]:
        """What quota admission charged, per ClusterQueue and (flavor, resource)."""
        return await read_reserved(self.redis, self._keys)

    async def admission_records(self) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """In one round trip: quota admission's record of each admitted pod (raw: pod key ->
        msgpack) and its usage counters (raw: "queue|flavor|resource" -> amount)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._keys.quota_admitted)
            pipe.hgetall(self._keys.quota_usage)
            admitted, usage = await pipe.execute()
        return dict(admitted), dict(usage)

    async def quota_waits(self) -> dict[str, str]:
        """Pod key -> why it waits for quota admission, for every pod the queue holds gated
        for quota (the adapter writes it to the pod in Kubernetes mode)."""
        return await self._reads.quota_waits()

    async def why_records(self, wanted: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """Why the pods `wanted` (tenant -> pod keys) wait, in one round trip (raw: pod key
        -> msgpack, services.queue.views); pods without a reason are left out."""
        tenants = [(tenant, keys) for tenant, keys in wanted.items() if keys]
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, keys in tenants:
                pipe.hmget(self._keys.key(tenant, "why"), list(keys))
            replies = await pipe.execute()
        return {
            key: blob
            for (_, keys), blobs in zip(tenants, replies, strict=True)
            for key, blob in zip(keys, blobs, strict=True)
            if blob is not None
        }


def lease_reader(redis: Redis, prefix: str, batcher: ScriptBatcher) -> LeaseReader:
    """The binder's check of a proposal against the queue's lease (services.queue.lease)."""
    return LeaseReader(redis, prefix, batcher)
