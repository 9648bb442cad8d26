"""The scheduling queue in Redis: kube-scheduler's PriorityQueue (upstream
pkg/scheduler/backend/queue/scheduling_queue.go), one per tenant.

Every transition is one Lua script call over one tenant's keys (services/queue/lua), so any
number of queue replicas may call these methods concurrently: a pod is popped (leased) by one
caller only, and the periodic flushes are idempotent. Times come from the injected clock and
are passed into the scripts, so tests drive them.

    store = QueueStore(redis, QueueConfig(...), clock)
    await store.add([PodRecord.from_pod(pod)])
    requests = await store.pop("tenant-a", 100)          # leased ScheduleRequests
    await store.record_outcomes([Outcome(...)])           # noted / backoff / unschedulable
    await store.move_all(NODE_ADD)                        # queueing hints decide who wakes
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgpack
from redis.asyncio import Redis

from services.queue.affinity_wake import AffinityWake, NamespaceLabels
from services.queue.clock import Clock, SystemClock, from_micros, to_micros
from services.queue.config import QueueConfig
from services.queue.hints import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    UNSCHEDULABLE_TIMEOUT,
    ClusterEvent,
    resized_down,
)
from services.queue.keys import LOCATIONS, QueueKeys, body_field, check_tenant
from services.queue.records import PodOp, PodRecord
from services.queue.scripts import QueueScripts
from services.queue.views import (
    QueueReads,
    integer,
    text,
)
from services.queue.wire import EncodedBatch, PoppedPods, TenantPop, request_blob, split_blobs
from shared.messaging.messages import Outcome, ScheduleRequest
from shared.store.batch import ScriptPipeline

_SCAN_LIMIT = 100_000


def _no_namespace_labels(_namespace: str) -> Awaitable[Mapping[str, str]]:
    async def empty() -> Mapping[str, str]:
        return {}

    return empty()


@dataclass(frozen=True, slots=True)
class MoveResult:
    to_active: int = 0
    to_backoff: int = 0
    kept: int = 0
    """Parked pods the event did not match (they stay unschedulable)."""

    def __add__(self, other: MoveResult) -> MoveResult:
        return MoveResult(
            self.to_active + other.to_active,
            self.to_backoff + other.to_backoff,
            self.kept + other.kept,
        )

    @property
    def moved(self) -> int:
        return self.to_active + self.to_backoff


def _why_blob(
    plugins: Iterable[str], pending: Iterable[str], message: str, at: float | None = None
) -> bytes:
    """A pod's last failure; `at`: when an attempt's outcome put it back (epoch seconds)."""
    why: dict[str, Any] = {"plugins": sorted(plugins), "pending": sorted(pending), "msg": message}
    if at is not None:
        why["at"] = at
    return cast(bytes, msgpack.packb(why, use_bin_type=True))


def _gated_why(gates: Sequence[str]) -> bytes:
    return _why_blob(["SchedulingGates"], [], gates_message(gates))


def quota_why(message: str) -> bytes:
    """The `why` of a pod waiting for quota admission (berth get pods: status Quota)."""
    return _why_blob(["Quota"], [], message)


def gates_message(gates: Sequence[str]) -> str:
    """The SchedulingGates PreEnqueue status message (Go's %v of a []string)."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


def _split_unique(items: Sequence[Any], key: Callable[[Any], str]) -> list[list[Any]]:
    """Consecutive runs without a repeated key: the scripts assume unique keys per call."""
    runs: list[list[Any]] = [[]]
    seen: set[str] = set()
    for item in items:
        k = key(item)
        if k in seen:
            runs.append([])
            seen.clear()
        seen.add(k)
        runs[-1].append(item)
    return [run for run in runs if run]


class QueueStore(QueueReads):
    """kube-scheduler's PriorityQueue over Redis; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        config: QueueConfig | None = None,
        clock: Clock | None = None,
        *,
        namespace_labels: NamespaceLabels | None = None,
    ) -> None:
        self.config = config or QueueConfig()
        super().__init__(redis, QueueKeys(self.config.key_prefix))
        self.clock = clock or SystemClock()
        self.scripts = QueueScripts.register(redis)
        self._wake = AffinityWake(redis, self.keys, namespace_labels or _no_namespace_labels)
        self._initial_us = to_micros(self.config.initial_backoff_seconds)
        self._max_us = to_micros(self.config.max_backoff_seconds)

    # ------------------------------------------------------------------ helpers

    def tenant_of(self, pod: PodRecord) -> str:
        if self.config.single_tenant:
            return self.config.single_tenant
        label = self.config.tenant_label
        if label and pod.labels.get(label):
            return pod.labels[label]
        return pod.namespace

    def _now(self) -> int:
        return to_micros(self.clock.now())

    def _keys(self, tenant: str) -> list[str]:
        return self.keys.tenant(tenant)

    async def _register(self, tenants: Iterable[str]) -> None:
        new = [check_tenant(t) for t in set(tenants) - self._known_tenants]
        if new:
            await self.redis.sadd(self.keys.tenants, *new)
            self._known_tenants.update(new)

    # ------------------------------------------------------------------ pod events

    async def add(self, pods: Sequence[PodRecord]) -> list[str]:
        """Add: new pods go to active, or to gated while they have gates."""
        return await self.upsert([("add", pod) for pod in pods])

    async def update(self, pods: Sequence[PodRecord]) -> list[str]:
        """Update, as upstream PriorityQueue.Update."""
        return await self.upsert([("update", pod) for pod in pods])

    async def upsert(self, items: Sequence[tuple[PodOp, PodRecord]]) -> list[str]:
        """Adds and updates in order; returns each pod's queue afterwards ("" if stale)."""
        if not items:
            return []
        results: list[str] = [""] * len(items)
        by_tenant: dict[str, list[int]] = defaultdict(list)
        for index, (_op, pod) in enumerate(items):
            by_tenant[self.tenant_of(pod)].append(index)
        await self._register(by_tenant)
        now = self._now()
        calls: list[tuple[str, list[int]]] = []
        pipe = ScriptPipeline(self.redis)
        for tenant, indexes in by_tenant.items():
            keys = self._keys(tenant)
            bodies: dict[Any, Any] = {
                body_field(items[i][1].key, items[i][1].resource_version): items[i][1].body
                for i in indexes
            }
            pipe.pipe.hset(self.keys.key(tenant, "pod"), mapping=bodies)
            for run in _split_unique(indexes, lambda i: items[i][1].key):
                args: list[Any] = [now, self._initial_us, self._max_us, len(run)]
                for i in run:
                    op, pod = items[i]
                    args += [
                        op,
                        pod.key,
                        pod.uid,
                        pod.resource_version,
                        pod.priority,
                        "1" if pod.scheduling_gates or pod.quota_wait else "",
                        pod.nominated_node_name,
                        pod.fingerprint,
                        "1" if pod.required_pod_affinity else "",
                        pod.scheduler_name,
                    ]
                pipe.call(self.scripts.upsert, keys, args)
                calls.append((tenant, run))
        replies = [r for r in await pipe.execute() if isinstance(r, list)]
        gated: dict[str, dict[Any, Any]] = defaultdict(dict)
        for (tenant, run), reply in zip(calls, replies, strict=True):
            for i, loc in zip(run, reply, strict=True):
                results[i] = LOCATIONS.get(text(loc), "")
                pod = items[i][1]
                if results[i] == "gated":
                    gated[tenant][pod.key] = (
                        quota_why(pod.quota_wait)
                        if pod.quota_wait and not pod.scheduling_gates
                        else _gated_why(pod.scheduling_gates)
                    )
        if gated:
            async with self.redis.pipeline(transaction=False) as writes:
                for tenant, whys in gated.items():
                    writes.hset(self.keys.key(tenant, "why"), mapping=whys)
                await writes.execute()
        return results

    async def delete(self, pods: Sequence[PodRecord]) -> int:
        """Delete: from whichever queue holds the pod, lease included."""
        by_tenant: dict[str, list[PodRecord]] = defaultdict(list)
        for pod in pods:
            by_tenant[self.tenant_of(pod)].append(pod)
        if not by_tenant:
            return 0
        # Every tenant's removal in one round trip (the informer's batches mix tenants).
        pipe = ScriptPipeline(self.redis)
        for tenant, group in by_tenant.items():
            args: list[Any] = [len(group)]
            for pod in group:
                args += [pod.key, pod.uid]
            pipe.call(self.scripts.delete, self._keys(tenant), args)
        replies = await pipe.execute()
        return sum(int(removed) for removed in replies)

    async def delete_in(self, tenant: str, pods: Sequence[tuple[str, str]]) -> int:
        """Delete pods (key, uid) of one tenant's queue (a relist found them gone)."""
        if not pods:
            return 0
        args: list[Any] = [len(pods)]
        for key, uid in pods:
            args += [key, uid]
        return int(await self.scripts.delete(keys=self._keys(tenant), args=args))

    async def activate(self, tenant: str, keys: Sequence[str]) -> int:
        """Activate: unschedulable or backing-off pods go to active now."""
        if not keys:
            return 0
        return int(await self.scripts.activate(keys=self._keys(tenant), args=list(keys)))

    # ------------------------------------------------------------------ dispatch

    async def pop(
        self,
        tenant: str,
        max_pods: int,
        *,
        max_inflight: int | None = None,
        lease_seconds: float | None = None,
    ) -> list[ScheduleRequest]:
        """Pop up to `max_pods` from the head of active and lease them."""
        [reply] = await self.pop_many(
            [(tenant, max_pods)], max_inflight=max_inflight, lease_seconds=lease_seconds
        )
        return reply

    async def pop_many(
        self,
        wanted: Sequence[tuple[str, int]],
        *,
        max_inflight: int | None = None,
        lease_seconds: float | None = None,
    ) -> list[list[ScheduleRequest]]:
        """Several tenants' pops in one round trip, as ScheduleRequest objects."""
        popped = await self.pop_raw(wanted, max_inflight=max_inflight, lease_seconds=lease_seconds)
        return [pods.requests() for pods in popped]

    async def pop_batches(
        self,
        wanted: Sequence[tuple[str, int]],
        message_batch: int,
        *,
        max_inflight: int | None = None,
        lease_seconds: float | None = None,
    ) -> list[list[EncodedBatch]]:
        """The dispatcher's pop: per tenant, its pods as ready-to-send ScheduleBatch
        payloads of at most `message_batch` requests (no per-pod Python objects)."""
        popped = await self.pop_raw(wanted, max_inflight=max_inflight, lease_seconds=lease_seconds)
        return [pods.batches(message_batch) for pods in popped]

    async def pop_raw(
        self,
        wanted: Sequence[tuple[str, int]],
        *,
        max_inflight: int | None = None,
        lease_seconds: float | None = None,
    ) -> list[PoppedPods]:
        """Pop and lease up to `count` pods of each `(tenant, count)`. Three pipelined round
        trips: the pop scripts (keys), the pods' request blobs, then the bodies they name
        (plain reads: Lua never sees blobs or bodies, see lua/prelude.lua)."""
        cap = self.config.max_inflight_per_tenant if max_inflight is None else max_inflight
        lease_us = to_micros(self.config.lease_seconds if lease_seconds is None else lease_seconds)
        now = self._now()
        popping = ScriptPipeline(self.redis)
        for tenant, count in wanted:
            popping.call(self.scripts.pop, self._keys(tenant), [now, count, cap, lease_us])
        replies = await popping.execute()
        pops = [
            TenantPop.of(tenant, reply) for (tenant, _), reply in zip(wanted, replies, strict=True)
        ]
        busy = [pop for pop in pops if pop.keys]
        async with self.redis.pipeline(transaction=False) as pipe:
            for pop in busy:
                pipe.hmget(self.keys.key(pop.tenant, "rq"), pop.keys)
            blobs = await pipe.execute()
        async with self.redis.pipeline(transaction=False) as pipe:
            for pop, tenant_blobs in zip(busy, blobs, strict=True):
                if None in tenant_blobs:
                    tenant_blobs = await self._missing_blobs(pop.tenant, pop.keys, tenant_blobs)
                    pop.keep([i for i, blob in enumerate(tenant_blobs) if blob is not None])
                    tenant_blobs = [blob for blob in tenant_blobs if blob is not None]
                pop.fields, pop.fragments = split_blobs(tenant_blobs)
                pipe.hmget(self.keys.key(pop.tenant, "pod"), pop.fields)
                pipe.hget(self.keys.key(pop.tenant, "ctr"), "revoked")
            read = await pipe.execute()
        for pop, bodies, revoked in zip(busy, read[::2], read[1::2], strict=True):
            pop.bodies = bodies
            if integer(revoked) != pop.revoked:
                # A lease ended (expiry, delete) since the pop: the blobs read may be newer
                # than this pop's leases. Keep the pods whose lease is still this pop's.
                await self._drop_revoked(pop)
            if None in pop.bodies:
                pop.bodies = await self._refetch_bodies(pop.tenant, pop.fields, pop.bodies)
                pop.keep([i for i, body in enumerate(pop.bodies) if body is not None])
        lease_at = from_micros(now + lease_us)
        return [
            PoppedPods(
                pop.tenant, lease_at, pop.fragments, pop.cycles, cast(list[bytes], pop.bodies)
            )
            for pop in pops
        ]

    async def _drop_revoked(self, pop: TenantPop) -> None:
        cycles = await self.redis.hmget(self.keys.key(pop.tenant, "cyc"), pop.keys)
        pop.keep(
            [
                i
                for i, (cycle, leased) in enumerate(zip(pop.cycles, cycles, strict=True))
                if leased is not None and int(leased) == cycle
            ]
        )

    async def _missing_blobs(
        self, tenant: str, keys: Sequence[bytes], blobs: Sequence[bytes | None]
    ) -> list[bytes | None]:
        """Blobs of pods stored before `rq` existed, built from their state (None for a pod
        deleted since the pop)."""
        out = list(blobs)
        for index, (key, blob) in enumerate(zip(keys, blobs, strict=True)):
            if blob is None:
                name = key.decode()
                st = await self.state(tenant, name)
                ended = integer(await self.redis.hget(self.keys.key(tenant, "att"), name))
                out[index] = None if st is None else request_blob(name, st, ended)
        return out

    async def _refetch_bodies(
        self, tenant: str, fields: Sequence[bytes], bodies: Sequence[bytes | None]
    ) -> list[bytes | None]:
        """Bodies replaced (a newer resourceVersion) between the pop and the read: read the
        current one; None stays None for a pod deleted meanwhile (its lease went with it)."""
        out = list(bodies)
        for index, body in enumerate(bodies):
            if body is None:
                key = fields[index].decode().rpartition("#")[0]
                st = await self.state(tenant, key)
                if st is not None:
                    field = body_field(key, st.resource_version)
                    current = await self.redis.hget(self.keys.key(tenant, "pod"), field)
                    out[index] = current if isinstance(current, bytes) else None
        return out

    # ------------------------------------------------------------------ outcomes

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> list[str]:
        """Apply outcomes in order; returns each one's effect (stale, noted, backoff, ...)."""
        results: list[str] = [""] * len(outcomes)
        by_tenant: dict[str, list[int]] = defaultdict(list)
        for index, outcome in enumerate(outcomes):
            by_tenant[outcome.tenant].append(index)
        now = self._now()
        lease_us = to_micros(self.config.lease_seconds)
        # Two round trips for all tenants: their outcome scripts (in order within a tenant),
        # then their failure messages and activations.
        pipe = ScriptPipeline(self.redis)
        calls: list[list[int]] = []
        for tenant, indexes in by_tenant.items():
            keys = self._keys(tenant)
            for run in _split_unique(indexes, lambda i: outcomes[i].pod_key):
                args: list[Any] = [now, self._initial_us, self._max_us, lease_us, len(run)]
                for i in run:
                    o = outcomes[i]
                    plugins = sorted(set(o.unschedulable_plugins) | set(o.pending_plugins))
                    nominate = "-" if o.nominated_node_name is None else "=" + o.nominated_node_name
                    lease = "" if o.lease_seconds is None else to_micros(o.lease_seconds)
                    args += [
                        o.pod_key,
                        o.uid,
                        o.attempt,
                        o.result,
                        ",".join(plugins),
                        nominate,
                        lease,
                    ]
                pipe.call(self.scripts.outcome, keys, args)
                calls.append(run)
        replies = await pipe.execute()
        for run, reply in zip(calls, replies, strict=True):
            for i, effect in zip(run, reply, strict=True):
                results[i] = text(effect)
        pipe = ScriptPipeline(self.redis)
        for tenant, indexes in by_tenant.items():
            whys: dict[Any, Any] = {
                outcomes[i].pod_key: _why_blob(
                    outcomes[i].unschedulable_plugins,
                    outcomes[i].pending_plugins,
                    outcomes[i].message,
                    from_micros(now),
                )
                for i in indexes
                if results[i] in ("backoff", "unschedulable")
                or (results[i] == "active" and outcomes[i].result == "conflict")
            }
            if whys:
                pipe.pipe.hset(self.keys.key(tenant, "why"), mapping=whys)
            activations = [
                key
                for i in indexes
                if results[i] != "stale"
                for key in outcomes[i].pods_to_activate
            ]
            if activations:
                pipe.call(self.scripts.activate, self._keys(tenant), activations)
        await pipe.execute()
        return results

    # ------------------------------------------------------------------ cluster events

    def _plugins_arg(self, event: ClusterEvent) -> str:
        plugins = self.config.hints.plugins_for(event)
        return "*" if plugins is None else ",".join(sorted(plugins))

    async def move_all(
        self, event: ClusterEvent, *, tenants: Sequence[str] | None = None
    ) -> MoveResult:
        """MoveAllToActiveOrBackoffQueue in every tenant queue."""
        names = await self.tenants() if tenants is None else list(tenants)
        return await self._move([(t, "all", ()) for t in names], event)

    async def move_pods(self, tenant: str, event: ClusterEvent, keys: Sequence[str]) -> MoveResult:
        """movePodsToActiveOrBackoffQueue for the given pods (a preCheck's answer)."""
        return await self._move([(tenant, "keys", keys)], event)

    async def _move(
        self, targets: Sequence[tuple[str, str, Sequence[str]]], event: ClusterEvent
    ) -> MoveResult:
        if not targets:
            return MoveResult()
        now = self._now()
        plugins = self._plugins_arg(event)
        pipe = ScriptPipeline(self.redis)
        for tenant, mode, keys in targets:
            args = [now, self._initial_us, self._max_us, mode, plugins, *keys]
            pipe.call(self.scripts.move, self._keys(tenant), args)
        replies = await pipe.execute()
        total = MoveResult()
        for to_active, to_backoff, kept in replies:
            total += MoveResult(int(to_active), int(to_backoff), int(kept))
        return total

    async def assigned_pod_added(self, pod: PodRecord) -> MoveResult:
        """AssignedPodAdded: wake the parked pods whose affinity the pod satisfies."""
        return await self.assigned_pods_added([pod])

    async def assigned_pods_added(self, pods: Sequence[PodRecord]) -> MoveResult:
        """AssignedPodAdded for a run of bound pods in one pass: a parked pod moves if any of
        them satisfies one of its required affinity terms (the same pods one call per bound
        pod would move, and the same final moveRequestCycle)."""
        targets = await self._wake.targets(await self.tenants(), pods)
        return await self._move(targets, ASSIGNED_POD_ADD)

    async def assigned_pod_updated(self, old: PodRecord | None, new: PodRecord) -> MoveResult:
        """AssignedPodUpdated: a resize down wakes all; else affinity matches only."""
        return await self.assigned_pods_updated([(old, new)])

    async def assigned_pods_updated(
        self, pairs: Sequence[tuple[PodRecord | None, PodRecord]]
    ) -> MoveResult:
        if any(old is not None and resized_down(old.pod(), new.pod()) for old, new in pairs):
            # Moves every pod the affinity path would move, and more.
            return await self.move_all(ASSIGNED_POD_UPDATE)
        targets = await self._wake.targets(await self.tenants(), [new for _, new in pairs])
        return await self._move(targets, ASSIGNED_POD_UPDATE)

    async def assigned_pod_deleted(self, pod: PodRecord) -> MoveResult:
        """An assigned pod went away: its resources, ports and spread are free again."""
        return await self.move_all(ASSIGNED_POD_DELETE)

    # ------------------------------------------------------------------ periodic flushes

    async def flush_backoff_completed(self, *, limit: int = _SCAN_LIMIT) -> int:
        """flushBackoffQCompleted, every tenant."""
        return await self._per_tenant(self.scripts.flush_backoff, [self._now(), limit])

    async def flush_unschedulable_leftover(self) -> MoveResult:
        """flushUnschedulablePodsLeftover: parked longer than the maximum (strict >)."""
        cutoff = self._now() - to_micros(self.config.max_in_unschedulable_seconds)
        names = await self.tenants()
        return await self._move(
            [(t, f"leftover:{cutoff}", ()) for t in names], UNSCHEDULABLE_TIMEOUT
        )

    async def expire_leases(self, *, limit: int = _SCAN_LIMIT) -> int:
        """Leases past their expiry: back to active, counted as redispatches."""
        return await self._per_tenant(self.scripts.expire, [self._now(), limit])

    async def _per_tenant(self, script: Any, args: list[Any]) -> int:
        names = await self.tenants()
        if not names:
            return 0
        pipe = ScriptPipeline(self.redis)
        for tenant in names:
            pipe.call(script, self._keys(tenant), args)
        replies = await pipe.execute()
        return sum(int(r) for r in replies)
