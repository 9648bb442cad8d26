"""The simulated cluster's life in Redis, beside the store (hash tag of the cluster):

- `lifecycle:heartbeats`   node -> epoch seconds of its last heartbeat (the node Lease's
  renewTime: heartbeats never go through the change stream, as Leases keep them off Nodes);
- `lifecycle:failures`     node -> "unreachable" | "not-ready" (`berth node fail`);
- `lifecycle:agents`       agent replica -> epoch seconds (membership, see services/agent);
- `lifecycle:events:<ns>/<name>`  the pod's Events, newest first (kept by pod name, so the
  Events of an evicted pod stay readable on its replacement), capped at EVENTS_PER_POD;
- `lifecycle:finished`     "ns/name" -> JSON of a pod that ended (phase, node, uid, time, and
  when it started if the agent saw it bound): berth's
  store keeps only pods that take resources (as the adapter drops terminal pods).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from shared.store import StoreKeys

EVENTS_PER_POD = 20
EVENT_STREAM_MAXLEN = 20_000
FAIL_UNREACHABLE = "unreachable"
FAIL_NOT_READY = "not-ready"
FAILURE_MODES = (FAIL_UNREACHABLE, FAIL_NOT_READY)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class LifecycleKeys:
    store: StoreKeys

    @property
    def heartbeats(self) -> str:
        return self.store.base + "lifecycle:heartbeats"

    @property
    def failures(self) -> str:
        return self.store.base + "lifecycle:failures"

    @property
    def agents(self) -> str:
        return self.store.base + "lifecycle:agents"

    @property
    def finished(self) -> str:
        return self.store.base + "lifecycle:finished"

    @property
    def event_stream(self) -> str:
        return self.store.base + "lifecycle:events"

    def events(self, pod_key: str) -> str:
        return f"{self.store.base}lifecycle:events:{pod_key}"


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An Event about a pod (core/v1 Event, trimmed)."""

    time: float
    type: str
    """Normal or Warning."""
    reason: str
    message: str
    uid: str = ""
    node: str = ""
    source: str = "berth-agent"

    @classmethod
    def parse(cls, raw: Any) -> PodEvent:
        data = json.loads(_text(raw))
        return cls(**{k: data[k] for k in data if k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class Finish:
    """A pod's end, as the `finished` record keeps it."""

    pod_key: str
    phase: str
    node: str
    uid: str
    time: float
    started: float | None = None
    """When its node started it (the agent saw it bound; a pod's startTime)."""

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "node": self.node,
            "uid": self.uid,
            "time": self.time,
        }
        if self.started is not None:
            out["started"] = self.started
        return out


class LifecycleState:
    """Reads and writes of the keys above."""

    def __init__(self, redis: Redis, keys: StoreKeys) -> None:
        self.redis = redis
        self.keys = LifecycleKeys(keys)

    async def record(self, pod_key: str, event: PodEvent) -> None:
        await self.record_all([(pod_key, event)])

    async def record_all(self, events: Sequence[tuple[str, PodEvent]]) -> None:
        """Each (pod key, event), in one round trip."""
        if not events:
            return
        pipe = self.redis.pipeline(transaction=False)
        for pod_key, event in events:
            body = json.dumps(asdict(event), separators=(",", ":"))
            key = self.keys.events(pod_key)
            pipe.lpush(key, body)
            pipe.ltrim(key, 0, EVENTS_PER_POD - 1)
            pipe.xadd(
                self.keys.event_stream,
                {"pod": pod_key, "event": body},
                maxlen=EVENT_STREAM_MAXLEN,
                approximate=True,
            )
        await pipe.execute()

    async def events(self, pod_key: str) -> list[PodEvent]:
        """Newest first."""
        raw = await self.redis.lrange(self.keys.events(pod_key), 0, -1)
        return [PodEvent.parse(item) for item in raw]

    async def finish(
        self,
        pod_key: str,
        phase: str,
        node: str,
        uid: str,
        now: float,
        started: float | None = None,
    ) -> None:
        """`started`: when its node started it (the agent saw it bound; a pod's startTime)."""
        await self.finish_all([Finish(pod_key, phase, node, uid, now, started)])

    async def finish_all(self, ends: Sequence[Finish]) -> None:
        """Each pod's end record, in one write."""
        if not ends:
            return
        pipe = self.redis.pipeline(transaction=False)
        self.finish_on(pipe, ends)
        await pipe.execute()

    def finish_on(self, pipe: Pipeline, ends: Sequence[Finish]) -> None:
        """`finish_all`'s write, queued on `pipe` (ahead of the pods' deletion)."""
        if ends:
            bodies = {end.pod_key: json.dumps(end.record()) for end in ends}
            pipe.hset(self.keys.finished, mapping=cast(Any, bodies))

    async def unfinish(self, pod_key: str, uid: str) -> None:
        """Withdraw the end record of `uid` (its pod was gone before it could end)."""
        raw = await self.redis.hget(self.keys.finished, pod_key)
        if raw is not None and json.loads(_text(raw)).get("uid") == uid:
            await self.redis.hdel(self.keys.finished, pod_key)

    async def finished(self) -> dict[str, dict[str, Any]]:
        raw = await self.redis.hgetall(self.keys.finished)
        return {_text(k): json.loads(_text(v)) for k, v in raw.items()}

    async def heartbeat(self, nodes: Mapping[str, float]) -> None:
        if nodes:
            await self.redis.hset(self.keys.heartbeats, mapping=cast(Any, dict(nodes)))

    async def heartbeats(self) -> dict[str, float]:
        raw = await self.redis.hgetall(self.keys.heartbeats)
        return {_text(k): float(v) for k, v in raw.items()}

    async def fail(self, node: str, mode: str) -> None:
        if mode not in FAILURE_MODES:
            raise ValueError(f"failure mode {mode!r}: one of {', '.join(FAILURE_MODES)}")
        await self.redis.hset(self.keys.failures, node, mode)

    async def recover(self, node: str, now: float | None = None) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.keys.failures, node)
        pipe.hset(self.keys.heartbeats, node, now if now is not None else time.time())
        await pipe.execute()

    async def failures(self) -> dict[str, str]:
        raw = await self.redis.hgetall(self.keys.failures)
        return {_text(k): _text(v) for k, v in raw.items()}
