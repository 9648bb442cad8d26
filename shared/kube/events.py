"""core/v1 Events about pods, as kube-scheduler's event recorder writes them (so
`kubectl describe pod` and `kubectl get events` show berth's like the default scheduler's)."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

from shared.models import Pod


def rfc3339(t: float | None = None) -> str:
    moment = time.time() if t is None else t
    return dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    namespace: str,
    name: str,
    uid: str,
    *,
    component: str,
    instance: str,
    event_type: str,
    reason: str,
    message: str,
    action: str,
    related: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about the pod namespace/name (uid)."""
    now = rfc3339()
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": name,
            "uid": uid,
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "action": action,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    if related:
        body["related"] = {"apiVersion": "v1", "kind": "Pod", **related}
    return body


def preempted_event(victim: Pod, preemptor: Pod, node: str, instance: str) -> dict[str, Any]:
    """Upstream's message on each victim: "Preempted by pod <uid> on node <node>"."""
    meta, by = victim.metadata, preemptor.metadata
    return event_body(
        meta.namespace,
        meta.name,
        meta.uid,
        component=preemptor.spec.scheduler_name,
        instance=instance,
        event_type="Normal",
        reason="Preempted",
        message=f"Preempted by pod {by.uid} on node {node}",
        action="Preempting",
        related={"namespace": by.namespace, "name": by.name, "uid": by.uid},
    )
