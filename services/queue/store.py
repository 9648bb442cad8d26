"""The scheduling queue in Redis: kube-scheduler's PriorityQueue (upstream
pkg/scheduler/backend/queue/scheduling_queue.go), one per tenant.

Every transition is one Lua script call over one tenant's keys (services/queue/lua), so any
number of queue replicas may call these methods concurrently: a pod is popped (leased) by one
caller only, and the periodic flushes are idempotent. Times come from the injected clock and
are passed into the scripts, so tests drive them.

    store = QueueStore(redis, QueueConfig(...), clock)
    await store.add([PodRecord.from_pod(pod)])
    requests = await store.pop("tenant-a", 100)          # leased ScheduleRequests
    await store.record_outcomes([Outcome(...)])           # done / backoff / unschedulable
    await store.move_all(NODE_ADD)                        # queueing hints decide who wakes
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack
from redis.asyncio import Redis

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
from services.queue.records import PodOp, PodRecord
from services.queue.scripts import QueueScripts
from services.queue.state import PodState
from services.queue.wire import EncodedBatch, PoppedPods, request_blob, split_blobs
from shared.messages import MessageError, Outcome, ScheduleRequest
from shared.models import affinity_term_matches, required_terms
from shared.queue_keys import LOCATIONS, QueueKeys, body_field, check_tenant

NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str]]]

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


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def _why_blob(plugins: Iterable[str], pending: Iterable[str], message: str) -> bytes:
    return cast(
        bytes,
        msgpack.packb(
            {"plugins": sorted(plugins), "pending": sorted(pending), "msg": message},
            use_bin_type=True,
        ),
    )


def _read_why(blob: bytes | None) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    if not blob:
        return (), (), ""
    data = msgpack.unpackb(blob, raw=False)
    return tuple(data.get("plugins", ())), tuple(data.get("pending", ())), data.get("msg", "")


def _gated_why(gates: Sequence[str]) -> bytes:
    return _why_blob(["SchedulingGates"], [], gates_message(gates))


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
        for first, last in [_text(member).split(":")]
    )
    firsts = [first for first, _, _ in spans]
    own = {_text(key): expiry for key, expiry in renewed}
    out: dict[str, float | None] = {}
    for raw_key, raw_cycle in cycles.items():
        key, cycle = _text(raw_key), int(raw_cycle)
        index = bisect.bisect_right(firsts, cycle) - 1
        if key in own:
            out[key] = own[key]
        elif index >= 0 and cycle <= spans[index][1]:
            out[key] = spans[index][2]
        else:
            out[key] = None
    return out


@dataclass(slots=True)
class _Pop:
    """One tenant's pop while `QueueStore.pop_raw` reads it: parallel lists, in pop order."""

    tenant: str
    revoked: int
    keys: list[bytes]
    cycles: list[int]
    fields: list[bytes] = field(default_factory=list)
    fragments: list[bytes] = field(default_factory=list)
    bodies: list[bytes | None] = field(default_factory=list)

    @classmethod
    def of(cls, tenant: str, reply: list[Any]) -> _Pop:
        if not reply:
            return cls(tenant, 0, [], [])
        first_cycle, revoked, *keys = reply
        return cls(tenant, revoked, keys, list(range(first_cycle, first_cycle + len(keys))))

    def keep(self, indexes: Sequence[int]) -> None:
        """Only these pods (the others are gone or no longer leased by this pop)."""
        if len(indexes) == len(self.keys):
            return
        for name in ("keys", "cycles", "fields", "fragments", "bodies"):
            values = getattr(self, name)
            if values:
                setattr(self, name, [values[i] for i in indexes])


class QueueStore:
    """kube-scheduler's PriorityQueue over Redis; see the module docstring."""

    def __init__(
        self,
        redis: Redis,
        config: QueueConfig | None = None,
        clock: Clock | None = None,
        *,
        namespace_labels: NamespaceLabels | None = None,
    ) -> None:
        self.redis = redis
        self.config = config or QueueConfig()
        self.clock = clock or SystemClock()
        self.keys = QueueKeys(self.config.key_prefix)
        self.scripts = QueueScripts.register(redis)
        self._namespace_labels = namespace_labels or _no_namespace_labels
        self._known_tenants: set[str] = set()
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

    async def tenants(self) -> list[str]:
        members = await self.redis.smembers(self.keys.tenants)
        found = sorted(_text(m) for m in members)
        self._known_tenants.update(found)
        return found

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
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, indexes in by_tenant.items():
                keys = self._keys(tenant)
                bodies: dict[Any, Any] = {
                    body_field(items[i][1].key, items[i][1].resource_version): items[i][1].body
                    for i in indexes
                }
                pipe.hset(self.keys.key(tenant, "pod"), mapping=bodies)
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
                            "1" if pod.scheduling_gates else "",
                            pod.nominated_node_name,
                            pod.fingerprint,
                            "1" if pod.required_pod_affinity else "",
                            pod.scheduler_name,
                        ]
                    await self.scripts.upsert(keys=keys, args=args, client=pipe)
                    calls.append((tenant, run))
            replies = [r for r in await pipe.execute() if isinstance(r, list)]
        gated: dict[str, dict[Any, Any]] = defaultdict(dict)
        for (tenant, run), reply in zip(calls, replies, strict=True):
            for i, loc in zip(run, reply, strict=True):
                results[i] = LOCATIONS.get(_text(loc), "")
                pod = items[i][1]
                if results[i] == "gated":
                    gated[tenant][pod.key] = _gated_why(pod.scheduling_gates)
        if gated:
            async with self.redis.pipeline(transaction=False) as pipe:
                for tenant, whys in gated.items():
                    pipe.hset(self.keys.key(tenant, "why"), mapping=whys)
                await pipe.execute()
        return results

    async def delete(self, pods: Sequence[PodRecord]) -> int:
        """Delete: from whichever queue holds the pod, lease included."""
        by_tenant: dict[str, list[PodRecord]] = defaultdict(list)
        for pod in pods:
            by_tenant[self.tenant_of(pod)].append(pod)
        removed = 0
        for tenant, group in by_tenant.items():
            args: list[Any] = [len(group)]
            for pod in group:
                args += [pod.key, pod.uid]
            removed += int(await self.scripts.delete(keys=self._keys(tenant), args=args))
        return removed

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
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, count in wanted:
                await self.scripts.pop(
                    keys=self._keys(tenant), args=[now, count, cap, lease_us], client=pipe
                )
            replies = await pipe.execute()
        pops = [_Pop.of(tenant, reply) for (tenant, _), reply in zip(wanted, replies, strict=True)]
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
            if _int(revoked) != pop.revoked:
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

    async def _drop_revoked(self, pop: _Pop) -> None:
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
                ended = _int(await self.redis.hget(self.keys.key(tenant, "att"), name))
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
        """Apply outcomes in order; returns each one's effect (stale, done, backoff, ...)."""
        results: list[str] = [""] * len(outcomes)
        by_tenant: dict[str, list[int]] = defaultdict(list)
        for index, outcome in enumerate(outcomes):
            by_tenant[outcome.tenant].append(index)
        now = self._now()
        lease_us = to_micros(self.config.lease_seconds)
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
                reply = await self.scripts.outcome(keys=keys, args=args)
                for i, effect in zip(run, reply, strict=True):
                    results[i] = _text(effect)
            whys: dict[Any, Any] = {
                outcomes[i].pod_key: _why_blob(
                    outcomes[i].unschedulable_plugins,
                    outcomes[i].pending_plugins,
                    outcomes[i].message,
                )
                for i in indexes
                if results[i] in ("backoff", "unschedulable")
                or (results[i] == "active" and outcomes[i].result == "conflict")
            }
            if whys:
                await self.redis.hset(self.keys.key(tenant, "why"), mapping=whys)
            activations = [
                key
                for i in indexes
                if results[i] != "stale"
                for key in outcomes[i].pods_to_activate
            ]
            await self.activate(tenant, activations)
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
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant, mode, keys in targets:
                await self.scripts.move(
                    keys=self._keys(tenant),
                    args=[now, self._initial_us, self._max_us, mode, plugins, *keys],
                    client=pipe,
                )
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
        return await self._move(await self._affinity_targets(pods), ASSIGNED_POD_ADD)

    async def assigned_pod_updated(self, old: PodRecord | None, new: PodRecord) -> MoveResult:
        """AssignedPodUpdated: a resize down wakes all; else affinity matches only."""
        return await self.assigned_pods_updated([(old, new)])

    async def assigned_pods_updated(
        self, pairs: Sequence[tuple[PodRecord | None, PodRecord]]
    ) -> MoveResult:
        if any(old is not None and resized_down(old.pod(), new.pod()) for old, new in pairs):
            # Moves every pod the affinity path would move, and more.
            return await self.move_all(ASSIGNED_POD_UPDATE)
        targets = await self._affinity_targets([new for _, new in pairs])
        return await self._move(targets, ASSIGNED_POD_UPDATE)

    async def assigned_pod_deleted(self, pod: PodRecord) -> MoveResult:
        """An assigned pod went away: its resources, ports and spread are free again."""
        return await self.move_all(ASSIGNED_POD_DELETE)

    async def _affinity_targets(
        self, assigned: Sequence[PodRecord]
    ) -> list[tuple[str, str, Sequence[str]]]:
        """Per tenant, the unschedulable pods with a required affinity term one of the
        assigned pods matches.

        Every tenant gets an entry, even an empty one: upstream sets moveRequestCycle on this
        path whether or not a pod moves.
        """
        tenants = await self.tenants()
        labels_of: dict[str, Mapping[str, str]] = {}
        for pod in assigned:
            if pod.namespace not in labels_of:
                labels_of[pod.namespace] = await self._namespace_labels(pod.namespace)
        targets: list[tuple[str, str, Sequence[str]]] = []
        for tenant in tenants:
            matching: list[str] = []
            candidates = await self._states(tenant, await self._affinity_keys(tenant))
            parked = [(key, st) for key, st in candidates if await self._is_parked(tenant, key, st)]
            if parked:
                bodies = await self.redis.hmget(
                    self.keys.key(tenant, "pod"),
                    [body_field(key, st.resource_version) for key, st in parked],
                )
                for (key, _), body in zip(parked, bodies, strict=True):
                    if isinstance(body, bytes) and self._affinity_matches(
                        key, body, assigned, labels_of
                    ):
                        matching.append(key)
            targets.append((tenant, "keys", matching))
        return targets

    async def _affinity_keys(self, tenant: str) -> list[str]:
        return sorted(_text(k) for k in await self.redis.smembers(self.keys.key(tenant, "aff")))

    async def _states(self, tenant: str, keys: Sequence[str]) -> list[tuple[str, PodState]]:
        if not keys:
            return []
        blobs = await self.redis.hmget(self.keys.key(tenant, "st"), list(keys))
        return [
            (key, PodState.unpack(blob))
            for key, blob in zip(keys, blobs, strict=True)
            if isinstance(blob, bytes)
        ]

    async def _is_parked(self, tenant: str, key: str, st: PodState) -> bool:
        if not st.bucket:
            return False
        return await self.redis.zscore(self.keys.bucket(tenant, st.bucket), key) is not None

    @staticmethod
    def _affinity_matches(
        key: str,
        body: bytes,
        assigned: Sequence[PodRecord],
        labels_of: Mapping[str, Mapping[str, str]],
    ) -> bool:
        try:
            parked = PodRecord(namespace="", name=key, uid="", body=body).pod()
        except MessageError:
            return True  # cannot tell: waking costs one attempt, never a lost pod
        terms = required_terms(parked)
        return any(
            affinity_term_matches(
                term, parked, pod.namespace, pod.labels, labels_of.get(pod.namespace, {})
            )
            for pod in assigned
            for term in terms
        )

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
        async with self.redis.pipeline(transaction=False) as pipe:
            for tenant in names:
                await script(keys=self._keys(tenant), args=args, client=pipe)
            replies = await pipe.execute()
        return sum(int(r) for r in replies)

    # ------------------------------------------------------------------ reads

    async def scheduling_cycle(self, tenant: str) -> int:
        return _int(await self.redis.hget(self.keys.key(tenant, "ctr"), "scycle"), 0)

    async def move_request_cycle(self, tenant: str) -> int:
        return _int(await self.redis.hget(self.keys.key(tenant, "ctr"), "mrc"), -1)

    async def stats(self, tenant: str) -> dict[str, int]:
        raw = await self.redis.hgetall(self.keys.key(tenant, "stats"))
        return {_text(k): int(v) for k, v in raw.items()}

    async def _levels(self, tenant: str) -> tuple[list[str], list[str]]:
        """The active priority levels and the unschedulable buckets of a tenant."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(self.keys.key(tenant, "prios"), 0, -1)
            pipe.smembers(self.keys.key(tenant, "buckets"))
            levels, buckets = await pipe.execute()
        return [_text(p) for p in levels], sorted(_text(b) for b in buckets)

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

    async def state(self, tenant: str, key: str) -> PodState | None:
        blob = await self.redis.hget(self.keys.key(tenant, "st"), key)
        return PodState.unpack(blob) if isinstance(blob, bytes) else None

    async def attempts(self, tenant: str, key: str) -> int:
        """QueuedPodInfo.Attempts (counting an attempt in flight)."""
        ended = _int(await self.redis.hget(self.keys.key(tenant, "att"), key))
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
                where[_text(member)] = (queue, score)
        for key, expiry in _lease_expiries(cycles, leases, renewed).items():
            where[key] = ("inflight", expiry)
        pods = []
        for raw_key, blob in states.items():
            key = _text(raw_key)
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
                    attempts=_int(attempts.get(raw_key)) + (queue == "inflight"),
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
                    nominated.append((_text(raw_key), st))
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
