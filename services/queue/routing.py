"""Which queue step each input becomes, and how consecutive inputs group into one store call:
the informer's pod changes (upstream eventhandlers.go: pending pods of our schedulers to the
queue, assigned-pod events), consumed outcomes and cluster events, as runs of one kind."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.queue.hints import ClusterEvent
from services.queue.informer import PodChange
from services.queue.keys import check_tenant
from services.queue.records import PodRecord


@dataclass(slots=True)
class Step:
    """A run of consecutive messages handled by one store call."""

    kind: str
    items: list[Any] = field(default_factory=list)


def group_steps(decoded: Sequence[tuple[Any, str, Any]]) -> list[Step]:
    """(source, kind, item) in order -> runs of one kind; consecutive cluster events on one
    resource merge into one move (merge_events)."""
    steps: list[Step] = []
    for _source, kind, item in decoded:
        if steps and steps[-1].kind == kind and kind != "cluster":
            steps[-1].items.append(item)
        elif steps and kind == "cluster" and steps[-1].kind == "cluster":
            merged = merge_events(steps[-1].items[-1], item)
            if merged is None:
                steps[-1].items.append(item)
            else:
                steps[-1].items[-1] = merged
        else:
            steps.append(Step(kind, [item]))
    return steps


def merge_events(first: ClusterEvent, second: ClusterEvent) -> ClusterEvent | None:
    """Consecutive events on one resource become one move: the union of their action bits
    wakes exactly the pods that one move per event would wake."""
    if first.resource != second.resource or first.is_wildcard or second.is_wildcard:
        return None
    return ClusterEvent(first.resource, first.action | second.action, first.label)


def route_pod_change(
    event: PodChange,
    tenant_of: Callable[[PodRecord], str],
    scheduler_names: Collection[str],
) -> list[tuple[str, Any]]:
    """The steps of one pod change (InvalidTenantError for an invalid tenant name: a dead
    letter)."""
    pod, old = event.pod, event.old
    tenant = check_tenant(tenant_of(pod))
    if old is not None and not old.node_name and tenant_of(old) != tenant:
        # The tenant label changed: the pod leaves its old tenant's queue.
        return [("delete", old), _route_one(event, scheduler_names)]
    return [_route_one(event, scheduler_names)]


def _route_one(event: PodChange, scheduler_names: Collection[str]) -> tuple[str, Any]:
    pod, old = event.pod, event.old
    if pod.node_name:
        if event.op == "delete":
            return "assigned_delete", pod
        if old is not None and old.node_name:
            return "assigned_update", (old, pod)
        # Was pending, or unknown to this informer (an "add"): a pod bound after the
        # informer (re)started from its cursor may still be in flight in the queue, so it
        # leaves the queue either way (a delete of a pod the queue lacks is a no-op), and
        # wakes others.
        return "bound", pod
    if pod.scheduler_name not in scheduler_names:
        # Not ours (or no longer ours): make sure the queue does not hold it.
        return ("delete", pod) if event.op != "add" else ("skip", None)
    if event.op == "delete":
        return "delete", pod
    return "upsert", (event.op, pod)
