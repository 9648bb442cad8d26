"""A pod's queued state as the Lua scripts store it (one msgpack array per pod in `st`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

# Field order of the Lua prelude (1-based there).
FIELDS = (
    "uid",
    "resource_version",
    "priority",
    "timestamp",  # QueuedPodInfo.Timestamp, us
    "initial_attempt_timestamp",  # us
    "attempts",
    "cycle",  # scheduling cycle of the last pop
    "seq",  # arrival sequence: PrioritySort tie-break after the timestamp
    "plugins",  # unschedulable + pending plugins, comma-separated
    "nominated_node_name",
    "status_nominated_node_name",
    "redispatches",
    "conflicts",
    "dirty",  # 1: updated (isPodUpdated) while in flight
    "fingerprint",
    "scheduler_name",
)
AM_PREFIX = 28


@dataclass(frozen=True, slots=True)
class PodState:
    uid: str
    resource_version: int
    priority: int
    timestamp: int
    initial_attempt_timestamp: int
    attempts: int
    cycle: int
    seq: int
    plugins: str
    nominated_node_name: str
    status_nominated_node_name: str
    redispatches: int
    conflicts: int
    dirty: int
    fingerprint: str
    scheduler_name: str

    @classmethod
    def unpack(cls, blob: bytes) -> PodState:
        values: list[Any] = msgpack.unpackb(blob, raw=False)
        return cls(*values[: len(FIELDS)])


def active_member_key(member: bytes | str) -> str:
    """The pod key inside an active sorted-set member."""
    text = member.decode() if isinstance(member, bytes) else member
    return text[AM_PREFIX:]
