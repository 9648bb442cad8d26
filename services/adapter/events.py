"""Events about pods through events.k8s.io/v1, aggregated into series the way kube-scheduler's
recorder (client-go tools/events) does, so a pod that fails for hours is one Event whose
series.count grows, not thousands of Events.

- Isomorphic Events share a key: action, reason, reporting controller, the pod (namespace,
  name, uid) and the related object; the note (message) is not part of it, as upstream's
  getKey.
- The first is created. The second turns it into a series (count 2) and patches it at once;
  later ones only count, in memory.
- Every TICK_SECONDS the recorder patches a series not written for REFRESH_SECONDS (30 min)
  and finishes what was not observed for FINISH_SECONDS (6 min): a series gets its last
  count written, then the key is forgotten (the next occurrence starts a new Event).
- A series whose Event the server no longer has (Events expire, one hour by default) starts
  again as a new Event.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.kube.client import KubeApi, KubeApiError

FINISH_SECONDS = 360.0
REFRESH_SECONDS = 1800.0
TICK_SECONDS = 60.0

Key = tuple[str, str, str, str, str, str, tuple[tuple[str, str], ...]]


def micro_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(slots=True)
class _Kept:
    """An Event the recorder created, and how many times it was observed since."""

    namespace: str
    name: str
    first: float
    last: float
    count: int = 1
    written: int = 1
    """The count the server holds."""
    written_at: float = 0.0
    body: dict[str, Any] = field(default_factory=dict)


def event_v1(
    namespace: str,
    name: str,
    uid: str,
    *,
    controller: str,
    instance: str,
    event_type: str,
    reason: str,
    action: str,
    note: str,
    now: float,
    related: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event regarding the pod namespace/name (uid)."""
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "note": note[:1024],  # the API's limit on note
        "type": event_type,
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": uid,
        },
    }
    if related:
        body["related"] = {"apiVersion": "v1", "kind": "Pod", **related}
    return body


class EventRecorder:
    def __init__(self, api: KubeApi, instance: str, clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.instance = instance
        self.clock = clock
        self.kept: dict[Key, _Kept] = {}
        self.created = 0
        self.patched = 0

    async def record(
        self,
        namespace: str,
        name: str,
        uid: str,
        *,
        controller: str,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        related: dict[str, str] | None = None,
    ) -> None:
        now = self.clock()
        key: Key = (
            action,
            reason,
            controller,
            namespace,
            name,
            uid,
            tuple(sorted((related or {}).items())),
        )
        kept = self.kept.get(key)
        if kept is None:
            body = event_v1(
                namespace,
                name,
                uid,
                controller=controller,
                instance=self.instance,
                event_type=event_type,
                reason=reason,
                action=action,
                note=note,
                now=now,
                related=related,
            )
            await self.api.create_event_v1(body)
            self.created += 1
            self.kept[key] = _Kept(namespace, body["metadata"]["name"], now, now, body=body)
            self.kept[key].written_at = now
            return
        kept.count += 1
        kept.last = now
        if kept.written == 1:  # the second: the Event becomes a series now
            try:
                await self._write(key, kept)
            except BaseException:
                kept.count -= 1  # the caller retries this occurrence
                raise

    async def tick(self) -> None:
        """Refresh long series, finish quiet ones (see the module docstring)."""
        now = self.clock()
        for key, kept in list(self.kept.items()):
            if now - kept.last > FINISH_SECONDS:
                if kept.count != kept.written:
                    await self._write(key, kept)
                self.kept.pop(key, None)
            elif kept.count > 1 and now - kept.written_at >= REFRESH_SECONDS:
                await self._write(key, kept)

    async def _write(self, key: Key, kept: _Kept) -> None:
        series = {"count": kept.count, "lastObservedTime": micro_time(kept.last)}
        try:
            await self.api.patch_event_v1(kept.namespace, kept.name, {"series": series})
        except KubeApiError as e:
            if e.code != 404:
                raise
            # The Event expired on the server: the series starts again as a new Event.
            self.kept.pop(key, None)
            body = dict(kept.body)
            body["metadata"] = {
                "name": f"{kept.body['regarding']['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": kept.namespace,
            }
            body["eventTime"] = micro_time(kept.last)
            await self.api.create_event_v1(body)
            self.created += 1
            self.kept[key] = _Kept(kept.namespace, body["metadata"]["name"], kept.last, kept.last)
            self.kept[key].body = body
            self.kept[key].written_at = self.clock()
            return
        self.patched += 1
        kept.written = kept.count
        kept.written_at = self.clock()
