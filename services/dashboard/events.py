"""GET /api/events: the simulated cluster's recent pod Events (the node agent's: completions,
taint-based and drain evictions, replacements), newest first, only of readable namespaces;
with ?pod=NS/NAME, that pod's Events and its end (`berth describe pod` through the front
door)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict
from typing import Any

from redis.asyncio import Redis

from shared.lifecycle.state import LifecycleKeys, LifecycleState, PodEvent
from shared.store import StoreKeys

MAX_EVENTS = 200


async def recent_events(
    redis: Redis,
    keys: StoreKeys,
    namespaces: Collection[str] | None,
    limit: int = MAX_EVENTS,
) -> dict[str, Any]:
    """{"events": [{pod, type, reason, message, time, node, uid, source}, ...]}"""
    stream = LifecycleKeys(keys).event_stream
    out: list[dict[str, Any]] = []
    cursor = "+"
    while len(out) < limit:
        batch: Any = await redis.xrevrange(stream, max=cursor, count=limit)
        if not batch:
            break
        for entry_id, fields in batch:
            pod = fields.get(b"pod", b"").decode()
            if namespaces is None or pod.partition("/")[0] in namespaces:
                event = PodEvent.parse(fields.get(b"event", b"{}"))
                out.append({"pod": pod, **asdict(event)})
            cursor = f"({entry_id.decode()}"
        if len(batch) < limit:
            break
    return {"events": out[:limit]}


async def pod_events(redis: Redis, keys: StoreKeys, pod: str) -> dict[str, Any]:
    """{"events": [...newest first], "finished": {phase, node, uid, time} or None}"""
    state = LifecycleState(redis, keys)
    events = [{"pod": pod, **asdict(e)} for e in await state.events(pod)]
    return {"events": events, "finished": (await state.finished()).get(pod)}
