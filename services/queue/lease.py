"""The queue's verdict on a binder's proposal: whether its lease of the pod covers that
attempt (the queue's `cyc`, `att` and `st` of the pod's tenant, read in one script call).

An older attempt is merely stale (the queue moved on); a pod the queue has no lease of, another
uid, or a later attempt than leased is refused: acting on it would delete, bind or record what
nobody asked for. The binder reaches this through services.queue.client; the keys stay here.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any, Literal

import msgpack
from redis.asyncio import Redis

from services.queue.keys import InvalidTenantError, QueueKeys, check_tenant
from shared.messaging.proposals import Proposal
from shared.runtime.lua import LuaScripts
from shared.store.batch import ScriptBatcher

LUA = LuaScripts("services.queue", folder="lua/standalone", prelude=None)


@dataclass(frozen=True, slots=True)
class LeaseVerdict:
    """`ok`: the queue leased this very attempt; `stale`: an older attempt, or one that
    ended (dropped and counted); `refused`: forged or future (dead-lettered)."""

    kind: Literal["ok", "stale", "refused"]
    reason: str = ""


LEASED = LeaseVerdict("ok")


def queued_uid(state: bytes | None) -> str | None:
    """The uid in the queue's state record of a pod (a msgpack array, uid first:
    services.queue.state.FIELDS)."""
    if state is None:
        return None
    try:
        fields = msgpack.unpackb(state, raw=False)
    except (ValueError, msgpack.ExtraData):
        return None
    uid = fields[0] if isinstance(fields, list) and fields else None
    return uid if isinstance(uid, str) else None


MAX_PODS_PER_CALL = 256
"""Lease checks per script call: bounds the time Redis spends in one."""

_Waiting = list[tuple[str, "asyncio.Future[Any]"]]


class LeaseReader:
    """Reads the queue's lease of a proposal's pod. The checks asked for in one loop turn go
    as one script call per tenant (in the binder's pipeline of script calls, ScriptBatcher):
    the binder checks a lease per proposal, thousands a second, and a script call per check
    cost Redis more to start than its three reads."""

    def __init__(self, redis: Redis, prefix: str, batcher: ScriptBatcher) -> None:
        self._keys = QueueKeys(prefix)
        self._script = LUA.register(redis, "lease")
        self._batcher = batcher
        self._waiting: dict[str, _Waiting] = {}
        """tenant -> (pod key, its reply) of the checks asked for since the last send."""
        self._send_scheduled = False

    async def verdict(self, p: Proposal) -> LeaseVerdict:
        """Whether the queue's lease of `p.pod_key` covers this proposal (see the
        module docstring)."""
        try:
            check_tenant(p.tenant)
        except InvalidTenantError as exc:
            return LeaseVerdict("refused", str(exc))
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._waiting.setdefault(p.tenant, []).append((p.pod_key, reply))
        if not self._send_scheduled:
            # After the callbacks ready now: the other proposals of this turn join the call.
            self._send_scheduled = True
            loop.call_soon(self._send)
        in_flight, ended, state = await reply
        return judge_lease(p, bool(in_flight), int(ended or 0) + 1, queued_uid(state))

    def _send(self) -> None:
        self._send_scheduled = False
        waiting, self._waiting = self._waiting, {}
        for tenant, checks in waiting.items():
            keys = [self._keys.key(tenant, name) for name in ("cyc", "att", "st")]
            for start in range(0, len(checks), MAX_PODS_PER_CALL):
                part = checks[start : start + MAX_PODS_PER_CALL]
                call = self._batcher.submit(self._script, keys, [key for key, _ in part])
                call.add_done_callback(functools.partial(_answer, part))


def _answer(checks: _Waiting, call: asyncio.Future[Any]) -> None:
    """Hand each check its three values of the call's reply (or the call's error)."""
    cancelled = call.cancelled()
    error = ConnectionError("lease check cancelled") if cancelled else call.exception()
    values: list[Any] = [] if error is not None else list(call.result())
    if error is None and len(values) != 3 * len(checks):
        error = ValueError(f"lease script: {len(values)} values for {len(checks)} pods")
    for index, (_, reply) in enumerate(checks):
        if reply.done():  # its caller was cancelled
            continue
        if error is not None:
            reply.set_exception(error)
        else:
            reply.set_result(values[3 * index : 3 * index + 3])


def judge_lease(p: Proposal, in_flight: bool, leased: int, uid: str | None) -> LeaseVerdict:
    """The verdict on `p` given the queue's record: whether the pod is in flight, the
    attempt it leased last, and the uid it holds."""
    if in_flight and uid == p.uid and leased == p.attempt:
        return LEASED
    if uid == p.uid and p.attempt < leased:
        return LeaseVerdict("stale", "stale")
    if uid is None:
        return LeaseVerdict("refused", f"the queue holds no pod {p.pod_key}")
    if uid != p.uid:
        return LeaseVerdict("refused", f"the queue's {p.pod_key} has another uid")
    if not in_flight:
        reason = f"{p.pod_key} is not in flight (its attempt {p.attempt} ended)"
        return LeaseVerdict("stale", reason)
    reason = f"attempt {p.attempt} of {p.pod_key} was not dispatched (lease {leased})"
    return LeaseVerdict("refused", reason)
