"""The queue's verdict on a binder's proposal: whether its lease of the pod covers that
attempt (the queue's `cyc`, `att` and `st` of the pod's tenant, read in one script call).

An older attempt is merely stale (the queue moved on); a pod the queue has no lease of, another
uid, or a later attempt than leased is refused: acting on it would delete, bind or record what
nobody asked for. The binder reaches this through services.queue.client; the keys stay here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


class LeaseReader:
    """Reads the queue's lease of a proposal's pod. One script call per proposal, sent in
    the same pipeline as the other proposals' calls of that loop turn (ScriptBatcher): the
    binder checks hundreds of leases a second."""

    def __init__(self, redis: Redis, prefix: str, batcher: ScriptBatcher) -> None:
        self._keys = QueueKeys(prefix)
        self._script = LUA.register(redis, "lease")
        self._batcher = batcher

    async def verdict(self, p: Proposal) -> LeaseVerdict:
        """Whether the queue's lease of `p.pod_key` covers this proposal (see the
        module docstring)."""
        try:
            check_tenant(p.tenant)
        except InvalidTenantError as exc:
            return LeaseVerdict("refused", str(exc))
        keys = self._keys
        tenant_keys = [keys.key(p.tenant, name) for name in ("cyc", "att", "st")]
        in_flight, ended, state = await self._batcher.call(self._script, tenant_keys, [p.pod_key])
        return judge_lease(p, bool(in_flight), int(ended or 0) + 1, queued_uid(state))


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
