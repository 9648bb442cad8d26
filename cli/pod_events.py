"""A pod's Events and end (the node agent's records, shared.lifecycle.state) for `berth
describe pod`: from Redis when the command talks to the store directly, else from the API
front door (GET /api/events?pod=NS/NAME)."""

from __future__ import annotations

import json
from typing import Any

from cli.api_client import ApiClient
from cli.client import StackClient
from cli.tables import format_events
from shared.lifecycle.state import LifecycleState, PodEvent


async def pod_history(client: object, key: str) -> tuple[list[PodEvent], dict[str, Any] | None]:
    """(the pod's Events newest first, its end record or None)."""
    if isinstance(client, ApiClient):
        data = await client.pod_events(key)
        events = [PodEvent.parse(json.dumps(e)) for e in data.get("events", [])]
        return events, data.get("finished")
    if not isinstance(client, StackClient):
        return [], None
    state = LifecycleState(client.redis, client.store.keys)
    finished = (await state.finished()).get(key)
    return await state.events(key), finished


def describe_finished(
    namespace: str, name: str, finished: dict[str, Any], events: list[PodEvent]
) -> str:
    fields = [
        ("Name", name),
        ("Namespace", namespace),
        ("Status", str(finished.get("phase", ""))),
        ("Node", str(finished.get("node", "")) or "<none>"),
    ]
    text = "\n".join(f"{label + ':':<16}{value}" for label, value in fields)
    return text + "\n" + format_events(events) if events else text
