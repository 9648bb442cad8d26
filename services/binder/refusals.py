"""What the binder refuses to act on, decided before anything is written.

- `LeaseReader.verdict`: a proposal must match the queue's lease of its pod (the queue's keys, read
  in one transaction). An older attempt is merely stale (the queue moved on); a pod the queue
  has no lease of, another uid, or a later attempt than leased is refused: acting on it would
  delete, bind or record what nobody asked for.
- `victims_refusal`: preemption victims must run on the proposal's node with a lower priority,
  and the preemptor must be pending and allowed to preempt (upstream's preemption picks
  nothing else).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import msgpack
from redis.asyncio import Redis

from services.queue.keys import InvalidTenantError, QueueKeys, check_tenant
from shared.models import PREEMPT_NEVER, Pod, priority_of
from shared.proposals import Proposal
from shared.store.batch import ScriptBatcher


@dataclass(frozen=True, slots=True)
class LeaseVerdict:
    """`ok`: the queue leased this very attempt; `stale`: an older attempt, or one that
    ended (dropped and counted); `refused`: forged or future (dead-lettered)."""

    kind: Literal["ok", "stale", "refused"]
    reason: str = ""


LEASED = LeaseVerdict("ok")


def queued_uid(state: bytes | None) -> str | None:
    """The uid in the queue's state record of a pod (a msgpack array, uid first)."""
    if state is None:
        return None
    try:
        fields = msgpack.unpackb(state, raw=False)
    except (ValueError, msgpack.ExtraData):
        return None
    uid = fields[0] if isinstance(fields, list) and fields else None
    return uid if isinstance(uid, str) else None


_LEASE_STATE = """
-- The queue's record of one pod, read at once: in flight?, attempts ended, its state.
return {
  redis.call('HEXISTS', KEYS[1], ARGV[1]),
  redis.call('HGET', KEYS[2], ARGV[1]),
  redis.call('HGET', KEYS[3], ARGV[1]),
}
"""


class LeaseReader:
    """Reads the queue's lease of a proposal's pod. One script call per proposal, sent in
    the same pipeline as the other proposals' calls of that loop turn (ScriptBatcher): the
    binder checks hundreds of leases a second."""

    def __init__(self, redis: Redis, keys: QueueKeys, batcher: ScriptBatcher) -> None:
        self._keys = keys
        self._script = redis.register_script(_LEASE_STATE)
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


def victims_refusal(p: Proposal, preemptor: Pod, victims: Sequence[Pod]) -> str:
    """Why these victims may not be evicted for `preemptor` ("" when they may)."""
    if preemptor.spec.node_name:
        return f"the preemptor {p.pod_key} is bound already"
    if preemptor.spec.preemption_policy == PREEMPT_NEVER:
        return f"the preemptor {p.pod_key} has preemptionPolicy Never"
    priority = priority_of(preemptor)
    for victim in victims:
        if victim.spec.node_name != p.node_name:
            where = victim.spec.node_name or "no node"
            return f"victim {victim.key} runs on {where}, not on {p.node_name}"
        if priority_of(victim) >= priority:
            return (
                f"victim {victim.key} has priority {priority_of(victim)}, not lower than "
                f"the preemptor's {priority}"
            )
    return ""
