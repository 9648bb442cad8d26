"""The queue's read side: counts, states, the pending view (`berth get pods`, PendingPods),
nominations. QueueStore (services/queue/store.py) adds the transitions on top; the CLI and
the dashboard read through this module too (it knows only the keys, services.queue.keys)."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
from redis.asyncio import Redis

from services.queue.keys import QueueKeys, body_field
from services.queue.state import PodState, from_micros


def text(value: Any) -> str:
    """A Redis reply as str ("" for nil)."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def integer(value: Any, default: int = 0) -> int:
    """A Redis reply as int (`default` for nil)."""
    return default if value is None else int(value)


@dataclass(frozen=True, slots=True)
class QueueCounts:
    active: int = 0
    backoff: int = 0
    unschedulable: int = 0
    gated: int = 0
    inflight: int = 0

    @property
    def pending(self) -> int:
        return self.active + self.backoff + self.unschedulable + self.gated + self.inflight

    def __add__(self, other: QueueCounts) -> QueueCounts:
        return QueueCounts(
            self.active + other.active,
            self.backoff + other.backoff,
            self.unschedulable + other.unschedulable,
            self.gated + other.gated,
            self.inflight + other.inflight,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "active": self.active,
            "backoff": self.backoff,
            "unschedulable": self.unschedulable,
            "gated": self.gated,
            "inflight": self.inflight,
        }

    def summary(self) -> str:
        """Upstream PendingPods() summary (gated pods live in unschedulablePods there)."""
        return (
            f"activeQ:{self.active}; backoffQ:{self.backoff}; "
            f"unschedulablePods:{self.unschedulable + self.gated}; inFlight:{self.inflight}"
        )


@dataclass(frozen=True, slots=True)
class PendingPod:
    """One pending pod as `berth get pods` shows it: where it is, and why."""

    tenant: str
    key: str
    uid: str
    queue: str
    """active | backoff | unschedulable | gated | inflight"""
    attempts: int
    priority: int
    timestamp: float
    initial_attempt_timestamp: float
    unschedulable_plugins: tuple[str, ...] = ()
    pending_plugins: tuple[str, ...] = ()
    message: str = ""
    nominated_node_name: str = ""
    backoff_expires_at: float | None = None
    lease_expires_at: float | None = None
    redispatches: int = 0
    conflicts: int = 0


@dataclass(frozen=True, slots=True)
class PendingView:
    counts: dict[str, QueueCounts]
    """Per tenant."""
    pods: list[PendingPod] = field(default_factory=list)

    @property
    def total(self) -> QueueCounts:
        return sum(self.counts.values(), QueueCounts())


@dataclass(frozen=True, slots=True)
class NominatedPod:
    tenant: str
    key: str
    node_name: str
    priority: int
    pod: bytes


QUOTA = "Quota"
"""The `why` plugin of a pod held for quota admission (services.queue.store.quota_why)."""


def _read_why(blob: bytes | None) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    if not blob:
        return (), (), ""
    data = msgpack.unpackb(blob, raw=False)
    return tuple(data.get("plugins", ())), tuple(data.get("pending", ())), data.get("msg", "")


def _micros_or_none(value: float | None) -> float | None:
    return None if value is None else from_micros(value)


def _lease_expiries(
    cycles: Mapping[bytes, bytes],
    leases: Sequence[tuple[bytes, float]],
    renewed: Sequence[tuple[bytes, float]],
) -> dict[str, float | None]:
    """Each in-flight pod's lease expiry (us): its renewal's, else its pop's (the lease whose
    cycles first..last hold the pod's); None if neither is found (never expected)."""
    spans = sorted(
        (int(first), int(last), expiry)
        for member, expiry in leases
        for first, last in [text(member).split(":")]
    )
    firsts = [first for first, _, _ in spans]
    own = {text(key): expiry for key, expiry in renewed}
    out: dict[str, float | None] = {}
    for raw_key, raw_cycle in cycles.items():
        key, cycle = text(raw_key), int(raw_cycle)
        index = bisect.bisect_right(firsts, cycle) - 1
        if key in own:
            out[key] = own[key]
        elif index >= 0 and cycle <= spans[index][1]:
            out[key] = spans[index][2]
        else:
            out[key] = None
    return out


class QueueReads:
    """Reads of the queue's Redis state (no transitions)."""

    def __init__(self, redis: Redis, keys: QueueKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._known_tenants: set[str] = set()

    async def tenants(self) -> list[str]:
        members = await self.redis.smembers(self.keys.tenants)
        found = sorted(text(m) for m in members)
        self._known_tenants.update(found)
        return found

    async def tenants_to_pop(self) -> list[str]:
        """The tenants a pop may take pods from, in one round trip: every known tenant whose
        index of active priority levels (`prios`) is not empty, and every tenant first seen
        now. Exactly the tenants whose pop can return pods (pop.lua walks that index, and
        every activation adds to it); popping all tenants made Redis run one pop script per
        tenant per dispatch round, most of them for nothing, and the queue pack and parse
        them."""
        known = sorted(self._known_tenants)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.smembers(self.keys.tenants)
            for tenant in known:
                pipe.exists(self.keys.key(tenant, "prios"))
            replies = await pipe.execute()
        found = {text(m) for m in replies[0]}
        busy = {tenant for tenant, n in zip(known, replies[1:], strict=True) if n}
        new = found - self._known_tenants
        self._known_tenants.update(found)
        return sorted((busy & found) | new)

    async def quota_waits(self) -> dict[str, str]:
        """Pod key -> why the queue holds it gated for quota admission (its message)."""
        names = await self.tenants()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.zrange(self.keys.key(name, "gated"), 0, -1)
            gated = await pipe.execute()
        out: dict[str, str] = {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for name, members in zip(names, gated, strict=True):
                if members:
                    pipe.hmget(self.keys.key(name, "why"), members)
            replies = iter(await pipe.execute())
        for members in gated:
            if not members:
                continue
            for member, blob in zip(members, next(replies), strict=True):
                plugins, _, message = _read_why(blob)
                if QUOTA in plugins:
                    out[text(member)] = message
        return out

    async def scheduling_cycle(self, tenant: str) -> int:
        return integer(await self.redis.hget(self.keys.key(tenant, "ctr"), "scycle"), 0)

    async def move_request_cycle(self, tenant: str) -> int:
        return integer(await self.redis.hget(self.keys.key(tenant, "ctr"), "mrc"), -1)

    async def stats(self, tenant: str) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.key(tenant, "stats"))
        return {text(k): int(v) for k, v in raw.items()}

    async def _levels(self, tenant: str) -> tuple[list[str], list[str]]:
        """The active priority levels and the unschedulable buckets of a tenant."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(self.keys.key(tenant, "prios"), 0, -1)
            pipe.smembers(self.keys.key(tenant, "buckets"))
            levels, buckets = await pipe.execute()
        return [text(p) for p in levels], sorted(text(b) for b in buckets)

    async def counts(self, tenants: Sequence[str] | None = None) -> dict[str, QueueCounts]:
        names = await self.tenants() if tenants is None else list(tenants)
        out: dict[str, QueueCounts] = {}
        for tenant in names:
            levels, buckets = await self._levels(tenant)
            async with self.redis.pipeline(transaction=False) as pipe:
                for level in levels:
                    pipe.zcard(self.keys.active(tenant, level))
                for bucket in buckets:
                    pipe.zcard(self.keys.bucket(tenant, bucket))
                for name in ("backoff", "gated"):
                    pipe.zcard(self.keys.key(tenant, name))
                pipe.hlen(self.keys.key(tenant, "cyc"))  # in flight
                sizes = [int(n) for n in await pipe.execute()]
            active = sum(sizes[: len(levels)])
            unschedulable = sum(sizes[len(levels) : len(levels) + len(buckets)])
            backoff, gated, inflight = sizes[-3:]
            out[tenant] = QueueCounts(active, backoff, unschedulable, gated, inflight)
        return out

    async def location(self, tenant: str, key: str) -> str | None:
        """The queue a pod waits in (active, backoff, ...), None if the queue does not hold it."""
        st = await self.state(tenant, key)
        if st is None:
            return None
        candidates = {
            "active": self.keys.active(tenant, st.priority),
            "backoff": self.keys.key(tenant, "backoff"),
            "gated": self.keys.key(tenant, "gated"),
            "unschedulable": self.keys.bucket(tenant, st.bucket or "-"),
        }
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hexists(self.keys.key(tenant, "cyc"), key)
            for set_key in candidates.values():
                pipe.zscore(set_key, key)
            in_flight, *scores = await pipe.execute()
        if in_flight:
            return "inflight"
        for queue, score in zip(candidates, scores, strict=True):
            if score is not None:
                return queue
        return None

    async def requeued_at(self, tenant: str, keys: Sequence[str]) -> dict[str, float]:
        """When an attempt's outcome last put each pod back (epoch seconds; pods never put
        back are left out): a conflict keeps the pod's queue timestamp, not this."""
        if not keys:
            return {}
        blobs = await self.redis.hmget(self.keys.key(tenant, "why"), list(keys))
        out: dict[str, float] = {}
        for key, blob in zip(keys, blobs, strict=True):
            if blob:
                at = msgpack.unpackb(blob, raw=False).get("at")
                if isinstance(at, float | int):
                    out[key] = float(at)
        return out

    async def state(self, tenant: str, key: str) -> PodState | None:
        blob = await self.redis.hget(self.keys.key(tenant, "st"), key)
        return PodState.unpack(blob) if isinstance(blob, bytes) else None

    async def attempts(self, tenant: str, key: str) -> int:
        """QueuedPodInfo.Attempts (counting an attempt in flight)."""
        ended = integer(await self.redis.hget(self.keys.key(tenant, "att"), key))
        return ended + (await self.location(tenant, key) == "inflight")

    async def pending(self, tenant: str | None = None) -> PendingView:
        """PendingPods: counts per queue, and every pending pod with its reasons."""
        names = await self.tenants() if tenant is None else [tenant]
        counts = await self.counts(names)
        pods: list[PendingPod] = []
        for name in names:
            pods.extend(await self._pending_pods(name))
        order = {"active": 0, "backoff": 1, "unschedulable": 2, "gated": 3, "inflight": 4}
        pods.sort(key=lambda p: (order.get(p.queue, 5), -p.priority, p.timestamp, p.key))
        return PendingView(counts=counts, pods=pods)

    async def _pending_pods(self, tenant: str) -> list[PendingPod]:
        levels, buckets = await self._levels(tenant)
        sets = [("active", self.keys.active(tenant, level)) for level in levels]
        sets += [("unschedulable", self.keys.bucket(tenant, bucket)) for bucket in buckets]
        sets += [
            ("backoff", self.keys.key(tenant, "backoff")),
            ("gated", self.keys.key(tenant, "gated")),
        ]
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.key(tenant, "st"))
            pipe.hgetall(self.keys.key(tenant, "att"))
            pipe.hgetall(self.keys.key(tenant, "why"))
            pipe.hgetall(self.keys.key(tenant, "cyc"))
            pipe.zrange(self.keys.key(tenant, "leases"), 0, -1, withscores=True)
            pipe.zrange(self.keys.key(tenant, "ext"), 0, -1, withscores=True)
            for _, set_key in sets:
                pipe.zrange(set_key, 0, -1, withscores=True)
            states, attempts, whys, cycles, leases, renewed, *members = await pipe.execute()
        where: dict[str, tuple[str, float | None]] = {}
        for (queue, _), entries in zip(sets, members, strict=True):
            for member, score in entries:
                where[text(member)] = (queue, score)
        for key, expiry in _lease_expiries(cycles, leases, renewed).items():
            where[key] = ("inflight", expiry)
        pods = []
        for raw_key, blob in states.items():
            key = text(raw_key)
            st = PodState.unpack(blob)
            queue, score = where.get(key, ("unknown", None))
            plugins, pending, message = _read_why(whys.get(raw_key))
            pods.append(
                PendingPod(
                    tenant=tenant,
                    key=key,
                    uid=st.uid,
                    queue=queue,
                    # The attempt in flight is recorded when it ends.
                    attempts=integer(attempts.get(raw_key)) + (queue == "inflight"),
                    priority=st.priority,
                    timestamp=from_micros(st.timestamp),
                    initial_attempt_timestamp=from_micros(st.initial_attempt_timestamp),
                    unschedulable_plugins=plugins,
                    pending_plugins=pending,
                    message=message,
                    nominated_node_name=st.nominated_node_name,
                    backoff_expires_at=_micros_or_none(score) if queue == "backoff" else None,
                    lease_expires_at=_micros_or_none(score) if queue == "inflight" else None,
                    redispatches=st.redispatches,
                    conflicts=st.conflicts,
                )
            )
        return pods

    async def nominated_pods(self) -> dict[str, list[NominatedPod]]:
        """The nominator: node name -> pods nominated to it (for the workers' fit checks)."""
        by_node: dict[str, list[NominatedPod]] = defaultdict(list)
        for tenant in await self.tenants():
            states = await self.redis.hgetall(self.keys.key(tenant, "st"))
            nominated = []
            for raw_key, blob in states.items():
                st = PodState.unpack(blob)
                if st.nominated_node_name:
                    nominated.append((text(raw_key), st))
            if not nominated:
                continue
            bodies = await self.redis.hmget(
                self.keys.key(tenant, "pod"),
                [body_field(key, st.resource_version) for key, st in nominated],
            )
            for (key, st), body in zip(nominated, bodies, strict=True):
                node = st.nominated_node_name
                pod = body if isinstance(body, bytes) else b""
                by_node[node].append(NominatedPod(tenant, key, node, st.priority, pod))
        return dict(by_node)
