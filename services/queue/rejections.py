"""Which plugins keep pods out: `scheduler_unschedulable_pods{plugin, profile}` derived from
the queue's Redis state.

Upstream (kube-scheduler's scheduling queue) raises the gauge for every plugin that rejected a
pod (its UnschedulablePlugins and PendingPlugins, or the PreEnqueue plugin that gates it) when
the pod comes back to the queue, and lowers it when the pod is popped again. berth derives the
same numbers from what Redis holds, so they are right after moves, deletions and restarts and
the same on every queue replica (aggregate with max(), like scheduler_pending_pods):

- a pod parked in the unschedulable pool counts for each plugin of its bucket's signature
  (the sorted union of its unschedulable and pending plugins, services/queue/lua/prelude.lua);
- a pod backing off counts for the plugins of its last failure (`why`); a conflict's backoff
  has none (the binder refused the node: no plugin rejected the pod);
- a gated pod counts for the plugin that gates it: `SchedulingGates`, or `Quota` while it
  waits for Kueue quota admission (berth's admission gate, `berth get pods` shows the same).

Pods in active or in flight count for nothing. Upstream keeps counting a pod an event moved
to activeQ until it is popped; berth stops when the pod leaves the unschedulable pool (the
dispatcher pops active pods within moments).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import msgpack
from prometheus_client import Gauge
from redis.asyncio import Redis

from services.queue.keys import QueueKeys
from services.queue.state import PodState
from services.queue.views import text
from shared.models import DEFAULT_SCHEDULER_NAME

Rejections = Counter[tuple[str, str]]
"""(plugin, profile) -> pods."""


def _why_plugins(blob: object) -> set[str]:
    if not isinstance(blob, bytes) or not blob:
        return set()
    data = msgpack.unpackb(blob, raw=False)
    return {*data.get("plugins", ()), *data.get("pending", ())}


def _signature_plugins(bucket: str) -> list[str]:
    """The plugins of an unschedulable bucket name `<sig>|<prio>|<attempts>`."""
    signature = bucket.rsplit("|", 2)[0]
    return [p for p in signature.split(",") if p]


async def count_rejections(
    redis: Redis,
    keys: QueueKeys,
    tenants: Sequence[str],
    profiles: Collection[str] = (DEFAULT_SCHEDULER_NAME,),
) -> Rejections:
    """Pods per (plugin, profile) in the unschedulable pool, backoff and gated, every tenant.

    With one profile every queued pod is its (the queue takes no other scheduler's pods), so
    the pool is counted per bucket without reading a pod; with several, each pod's state
    names its profile."""
    single = next(iter(profiles)) if len(profiles) == 1 else None
    out: Rejections = Counter()
    for tenant in tenants:
        buckets = sorted(text(b) for b in await redis.smembers(keys.key(tenant, "buckets")))
        async with redis.pipeline(transaction=False) as pipe:
            for bucket in buckets:
                if single is None:
                    pipe.zrange(keys.bucket(tenant, bucket), 0, -1)
                else:
                    pipe.zcard(keys.bucket(tenant, bucket))
            pipe.zrange(keys.key(tenant, "backoff"), 0, -1)
            pipe.zrange(keys.key(tenant, "gated"), 0, -1)
            *parked, backoff, gated = await pipe.execute()
        waiting = [text(k) for k in (*backoff, *gated)]
        members = [] if single is not None else [text(k) for group in parked for k in group]
        whys, states = await _read(redis, keys, tenant, waiting, members + waiting, single)
        for bucket, found in zip(buckets, parked, strict=True):
            plugins = _signature_plugins(bucket)
            if single is not None:
                for plugin in plugins:
                    out[plugin, single] += int(found)
                continue
            for key in found:
                profile = states.get(text(key), DEFAULT_SCHEDULER_NAME)
                for plugin in plugins:
                    out[plugin, profile] += 1
        for key in waiting:
            profile = single or states.get(key, DEFAULT_SCHEDULER_NAME)
            for plugin in whys.get(key, set()):
                out[plugin, profile] += 1
    return out


async def _read(
    redis: Redis,
    keys: QueueKeys,
    tenant: str,
    waiting: Sequence[str],
    stated: Sequence[str],
    single: str | None,
) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The last failure's plugins of the `waiting` pods, and (several profiles) the profile
    of the `stated` ones."""
    if not waiting and (single is not None or not stated):
        return {}, {}
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hmget(keys.key(tenant, "why"), list(waiting) or ["-"])
        if single is None:
            pipe.hmget(keys.key(tenant, "st"), list(stated) or ["-"])
        replies = await pipe.execute()
    whys = {key: _why_plugins(blob) for key, blob in zip(waiting, replies[0], strict=False)}
    states: dict[str, str] = {}
    if single is None:
        for key, blob in zip(stated, replies[1], strict=False):
            if isinstance(blob, bytes):
                states[key] = PodState.unpack(blob).scheduler_name or DEFAULT_SCHEDULER_NAME
    return whys, states


class RejectionGauge:
    """Sets scheduler_unschedulable_pods from a count; a (plugin, profile) no longer counted
    goes to 0 (a restarted replica starts from Redis again)."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self._seen: set[tuple[str, str]] = set()

    def set(self, counts: Rejections) -> None:
        for plugin, profile in self._seen - counts.keys():
            self.gauge.labels(plugin=plugin, profile=profile).set(0)
        for (plugin, profile), pods in counts.items():
            self.gauge.labels(plugin=plugin, profile=profile).set(pods)
        self._seen |= counts.keys()
