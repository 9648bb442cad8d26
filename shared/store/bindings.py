"""Reservations, bindings, nominations and gangs: the binder's side of the store.

Every call is one Lua script over the cluster's keys, so any number of binders may call them
concurrently: a node is never over-committed (check-and-reserve counts every reservation and
binding), a pod is bound at most once, and each (pod uid, attempt) is acted on once.

Attempt states recorded per pod uid (`attempt_of`):
    r reserved · b bound · c conflict · u unreserved (gang rejected, permit failed)
    x reservation expired · p preemption handled · e error
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from redis.asyncio import Redis

from shared.models import Toleration
from shared.models.quantity import bounded_amount
from shared.store.batch import ScriptBatcher
from shared.store.fields import NodeChecks
from shared.store.keys import StoreKeys
from shared.store.records import NodeUsage, PodCharge, pack, tolerations_wire, unpack
from shared.store.scripts import StoreScripts

DEFAULT_RESERVATION_TTL = 120.0
"""Seconds a reservation survives without a bind or unreserve (a binder died holding it)."""

AttemptState = Literal["r", "b", "c", "u", "x", "p", "e"]
GangDecision = Literal["none", "permit", "wait"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ReserveStatus(enum.StrEnum):
    OK = "ok"
    CONFLICT = "conflict"
    """Final for this attempt: the node cannot take the pod now."""
    STALE = "stale"
    """An older attempt than one already seen: ignore."""
    DUPLICATE = "dup"
    """This attempt was seen already: ignore (or adopt a reservation nobody drives)."""
    GONE = "gone"
    """No pod with this uid."""
    BOUND = "bound"
    """The pod is bound already."""
    POD_CHANGED = "pod_changed"
    """The pod's resourceVersion is not the one the caller checked: re-read and retry."""
    NODE_CHANGED = "node_changed"
    """The node's resourceVersion is not the one the caller checked: re-check and retry."""
    BOUND_AT_ONCE = "bound_at_once"
    """Asked for (`ReserveRequest.bind_at_once`) and granted: the pod is bound, no reservation
    was taken (`store_resource_version`: the binding's change)."""


ALL_NODE_CHECKS = NodeChecks.ALL


# Not frozen (read-only by convention): one per proposal; frozen, its __init__ cost 1.6 µs
# against 0.3.
@dataclass(slots=True)
class ReserveRequest:
    pod_key: str
    uid: str
    attempt: int
    node: str
    priority: int
    charge: PodCharge
    check: Sequence[tuple[str, int]] = ()
    """(resource, amount) pairs NodeResourcesFit checks (positive, not ignored)."""
    tolerations: Sequence[Toleration] = ()
    pod_resource_version: int = 0
    """The pod version the caller checked (0: any)."""
    node_resource_version: int = 0
    """The node version the caller checked (0: any)."""
    gang: str = ""
    """"namespace/group" of a coscheduling PodGroup, or ""."""
    min_member: int = 0
    ttl_seconds: float = DEFAULT_RESERVATION_TTL
    holder: str = ""
    """Who reserves (a binder's id): streamed with the reservation, so that other binders'
    views count it and this one's can leave it out."""
    node_checks: str = ALL_NODE_CHECKS
    """Which node-local Filters the pod's profile runs, one letter each: u NodeUnschedulable,
    t TaintToleration, p NodePorts, f NodeResourcesFit (pod count; the resources are `check`).
    The script checks only these, as the worker's framework does."""
    bind_at_once: bool = False
    """Bind instead of reserving when no reserved or bound pod has required anti-affinity
    that can match the pod's namespace (ReserveStatus.BOUND_AT_ONCE). Only for a pod with no
    cross-node constraint of its own and no Permit wait: the caller's cross-node check would
    have nothing to check."""


@dataclass(frozen=True, slots=True)
class ReserveResult:
    status: ReserveStatus
    reasons: tuple[str, ...] = ()
    """CONFLICT: why, in upstream Filter wording."""
    store_resource_version: int = 0
    """OK: the resourceVersion of the reservation's change-stream entry (a view that reached
    it has seen every binding committed and every reservation taken before)."""
    gang: GangDecision = "none"
    gang_generation: int = 0
    seen_attempt: int = 0
    seen_state: str = ""
    node: str = ""
    """DUPLICATE: the node this attempt holds a reservation on ("" if none); BOUND: the node."""
    resource_version: int = 0
    """POD_CHANGED / NODE_CHANGED: the current version."""
    usage: NodeUsage | None = None
    """CONFLICT: the node's usage in the store when the check failed (store_resource_version
    is the store's version then)."""

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> ReserveResult:
        status = ReserveStatus(_text(reply[0]))
        if status is ReserveStatus.OK:
            gang: GangDecision = "none"
            decision = _text(reply[2])
            if decision == "permit":
                gang = "permit"
            elif decision == "wait":
                gang = "wait"
            return cls(
                status,
                store_resource_version=int(reply[1]),
                gang=gang,
                gang_generation=int(reply[3]),
            )
        if status is ReserveStatus.CONFLICT:
            usage = NodeUsage.from_packed(reply[2])
            return cls(
                status,
                reasons=tuple(_text(r) for r in reply[3:]),
                store_resource_version=int(reply[1]),
                usage=usage,
            )
        if status is ReserveStatus.STALE:
            return cls(status, seen_attempt=int(reply[1]), seen_state=_text(reply[2]))
        if status is ReserveStatus.DUPLICATE:
            return cls(
                status,
                seen_state=_text(reply[1]),
                node=_text(reply[2]),
                gang_generation=int(reply[3]),
            )
        if status is ReserveStatus.BOUND:
            return cls(status, node=_text(reply[1]))
        if status is ReserveStatus.BOUND_AT_ONCE:
            return cls(status, store_resource_version=int(reply[1]))
        if status in (ReserveStatus.POD_CHANGED, ReserveStatus.NODE_CHANGED):
            return cls(status, resource_version=int(reply[1]))
        return cls(status)


BindStatus = Literal["ok", "lost", "gone"]


@dataclass(frozen=True, slots=True)
class BindResult:
    status: BindStatus
    resource_version: int = 0


@dataclass(frozen=True, slots=True)
class ReleasedReservation:
    pod_key: str
    uid: str
    attempt: int


@dataclass(frozen=True, slots=True)
class HeldReservation:
    """A reservation not bound or released yet (in a snapshot)."""

    pod_key: str
    uid: str
    node: str
    holder: str


@dataclass(frozen=True, slots=True)
class GangRejectResult:
    status: Literal["rejected", "permitted", "stale"]
    released: tuple[ReleasedReservation, ...] = ()


@dataclass(frozen=True, slots=True)
class GangState:
    generation: int = 0
    state: str = ""
    """"w" waiting, "p" permitted, "" never seen."""
    members: frozenset[str] = field(default_factory=frozenset)


def _released(flat: Sequence[Any]) -> tuple[ReleasedReservation, ...]:
    return tuple(
        ReleasedReservation(_text(flat[i]), _text(flat[i + 1]), int(flat[i + 2]))
        for i in range(0, len(flat), 3)
    )


class Bindings:
    def __init__(
        self, redis: Redis, keys: StoreKeys, scripts: StoreScripts, stream_maxlen: int
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = scripts
        self.stream_maxlen = stream_maxlen
        self.batcher = ScriptBatcher(redis)
        """Reserve, bind, unreserve and claim calls of one loop turn share a pipeline."""

    async def reserve(self, request: ReserveRequest, now: float) -> ReserveResult:
        """Check the node-local constraints against the authoritative usage and, if they hold,
        reserve the pod's charge on the node (one script). See reserve.lua."""
        return await self.submit_reserve(request, now)

    def submit_reserve(self, request: ReserveRequest, now: float) -> Awaitable[ReserveResult]:
        """`reserve`, its call queued now (in Redis it runs after every call made before
        it, ScriptBatcher): its result when awaited."""
        r = request
        check = {
            "n": [name for name, _ in r.check],
            "a": [bounded_amount(amount) for _, amount in r.check],
        }
        reply = self.batcher.submit(
            self.scripts.reserve,
            [self.keys.rv],
            [
                repr(now),
                r.pod_key,
                r.uid,
                r.attempt,
                r.node,
                r.pod_resource_version,
                r.node_resource_version,
                r.priority,
                pack(r.charge.wire()),
                pack(check),
                pack(tolerations_wire(r.tolerations)),
                r.gang,
                r.min_member,
                repr(r.ttl_seconds),
                self.stream_maxlen,
                r.holder,
                r.node_checks,
                "1" if r.bind_at_once else "0",
            ],
        )
        return _reserve_result(reply)

    async def bind(self, pod_key: str, uid: str, attempt: int, node: str) -> BindResult:
        """Turn the reservation of (uid, attempt) on `node` into the binding; streamed."""
        reply = await self.batcher.call(
            self.scripts.bind, [self.keys.rv], [self.stream_maxlen, pod_key, uid, attempt, node]
        )
        status = _text(reply[0])
        if status == "ok":
            return BindResult("ok", int(reply[1]))
        return BindResult("gone" if status == "gone" else "lost")

    async def unreserve(
        self, pod_key: str, uid: str, attempt: int, state: AttemptState = "u"
    ) -> bool:
        """Release the reservation of (uid, attempt) if it still exists; record `state`."""
        reply = await self.batcher.call(
            self.scripts.unreserve,
            [self.keys.rv],
            [pod_key, uid, attempt, state, self.stream_maxlen],
        )
        return bool(int(reply))

    async def ended(self, pod_key: str, uid: str, attempt: int) -> int:
        """Stream that this attempt of the pod ended without a binding (a Reservation "del"
        entry with its attempt: views forget their assumption of it, and a scheduler waiting
        on a preemption stops waiting). Returns the entry's resourceVersion."""
        reply = await self.batcher.call(
            self.scripts.ended, [self.keys.rv], [self.stream_maxlen, pod_key, uid, attempt]
        )
        return int(reply)

    async def gang_reject(self, gang: str, generation: int) -> GangRejectResult:
        """Unreserve every reserved member of `gang` in `generation` unless it was permitted."""
        reply = await self.scripts.gang_reject(
            keys=[self.keys.rv], args=[gang, generation, self.stream_maxlen]
        )
        status = _text(reply[0])
        if status == "rejected":
            return GangRejectResult("rejected", _released(reply[1:]))
        return GangRejectResult("permitted" if status == "permitted" else "stale")

    async def gang_state(self, gang: str) -> GangState:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hmget(self.keys.gang(gang), ["gen", "state"])
        pipe.smembers(self.keys.gang_members(gang))
        (gen, state), members = await pipe.execute()
        return GangState(
            int(gen or 0), _text(state) if state else "", frozenset(_text(m) for m in members)
        )

    async def gang_states(self, gangs: Sequence[str]) -> list[tuple[int, str]]:
        """(generation, state) of several gangs in one round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for gang in gangs:
            pipe.hmget(self.keys.gang(gang), ["gen", "state"])
        replies = await pipe.execute()
        return [(int(gen or 0), _text(state) if state else "") for gen, state in replies]

    async def claim(
        self, uid: str, attempt: int, state: AttemptState = "p", pod_key: str = ""
    ) -> tuple[str, int, str]:
        """Record an attempt that reserves nothing. ("ok" | "stale" | "dup", seen, state).
        With `pod_key`, an attempt ended (any state but "p") is also streamed: the scheduler
        that assumed the pod forgets it (see `ended`)."""
        args: list[Any] = [uid, attempt, state]
        if pod_key:
            args += [pod_key, self.stream_maxlen]
        reply = await self.batcher.call(self.scripts.claim, [self.keys.rv], args)
        status = _text(reply[0])
        if status == "stale":
            return status, int(reply[1]), _text(reply[2])
        if status == "dup":
            return status, attempt, _text(reply[1])
        return status, attempt, state

    async def nominate(
        self, pod_key: str, uid: str, node: str, priority: int, charge: PodCharge
    ) -> int | None:
        """Set (node) or clear ("") the pod's nominated node. Returns the change's rv, or
        None when nothing changed (same nomination, or no such pod)."""
        reply = await self.scripts.nominate(
            keys=[self.keys.rv],
            args=[self.stream_maxlen, pod_key, uid, node, priority, pack(charge.wire())],
        )
        return int(reply[1]) if _text(reply[0]) == "ok" else None

    async def expire(self, now: float, limit: int = 500) -> tuple[ReleasedReservation, ...]:
        """Release reservations whose ttl passed (their binder is gone)."""
        reply = await self.scripts.expire(
            keys=[self.keys.rv], args=[repr(now), limit, self.stream_maxlen]
        )
        return _released(reply)

    async def attempt_of(self, uid: str) -> tuple[int, str] | None:
        raw = await self.redis.hget(self.keys.attempts, uid)
        if raw is None:
            return None
        attempt, _, state = _text(raw).partition(" ")
        return int(attempt), state

    async def charge_of(self, pod_key: str) -> dict[str, Any] | None:
        """The reservation ("s": "r") or binding ("s": "b") a pod holds, as stored."""
        raw = await self.redis.hget(self.keys.charges, pod_key)
        if raw is None:
            return None
        record: dict[str, Any] = unpack(bytes(raw) if isinstance(raw, bytes) else raw.encode())
        return record

    async def bound_node(self, pod_key: str) -> str | None:
        raw = await self.redis.hget(self.keys.pod_node, pod_key)
        return None if raw is None else _text(raw)


async def _reserve_result(reply: Awaitable[Any]) -> ReserveResult:
    return ReserveResult.parse(await reply)
