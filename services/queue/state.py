"""A pod's queued state as the queue's Lua scripts store it (one msgpack array per pod in
`st`, services/queue/lua/prelude.lua), and its times: integer microseconds."""

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
    "plugins",  # failed-plugin signature: unschedulable + pending plugins, sorted, comma-joined
    "nominated_node_name",
    "status_nominated_node_name",
    "redispatches",
    "conflicts",
    "dirty",  # 1: updated (isPodUpdated) while in flight
    "fingerprint",
    "scheduler_name",
    "bucket",  # unschedulable bucket the pod was last parked in ("<sig>|<prio>|<attempts>")
)


@dataclass(frozen=True, slots=True)
class PodState:
    uid: str
    resource_version: int
    priority: int
    timestamp: int
    initial_attempt_timestamp: int
    plugins: str
    nominated_node_name: str
    status_nominated_node_name: str
    redispatches: int
    conflicts: int
    dirty: int
    fingerprint: str
    scheduler_name: str
    bucket: str

    @classmethod
    def unpack(cls, blob: Any) -> PodState:
        values: list[Any] = msgpack.unpackb(blob, raw=False)
        return cls(*values[: len(FIELDS)])


def to_micros(seconds: float) -> int:
    """Redis keeps times as integer microseconds: exact comparisons, no float drift."""
    return round(seconds * 1_000_000)


def from_micros(micros: int | float) -> float:
    return micros / 1_000_000
