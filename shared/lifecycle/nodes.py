"""What `berth node cordon|uncordon|drain|fail|recover` does to a running stack's store.

- cordon / uncordon: spec.unschedulable (the lifecycle controller adds or lifts the
  node.kubernetes.io/unschedulable:NoSchedule taint that follows it);
- drain: cordon, then evict every pod bound to the node through the eviction API's rules
  (shared.lifecycle.eviction: a PodDisruptionBudget that allows no disruption refuses, as `kubectl
  drain` is refused and retries), DaemonSet pods left in place (`--ignore-daemonsets`); an
  evicted pod's owner brings it back pending (shared.lifecycle.actions);
- fail / recover: the node's kubelet stops (unreachable: no more heartbeats, the controller
  marks the node Unknown after the grace period) or reports NotReady, and comes back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import cast

from shared.lifecycle.actions import controller_of
from shared.lifecycle.actions import evict as evict_pod
from shared.lifecycle.eviction import OK, evict
from shared.lifecycle.state import LifecycleState
from shared.models import Node, Pod, PodDisruptionBudget
from shared.store import ClusterStore

DRAIN_REASON = "Evicted"


class NodeNotFoundError(LookupError):
    pass


async def _node(store: ClusterStore, name: str) -> Node:
    node = await store.get_node(name)
    if node is None:
        raise NodeNotFoundError(f'node "{name}" not found')
    return node


async def cordon(store: ClusterStore, name: str, value: bool = True) -> bool:
    """Set spec.unschedulable; False when it already was so."""
    node = await _node(store, name)
    if node.spec.unschedulable == value:
        return False
    await store.apply([replace(node, spec=replace(node.spec, unschedulable=value))])
    return True


@dataclass
class DrainReport:
    evicted: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """DaemonSet pods (left, as --ignore-daemonsets)."""
    refused: dict[str, str] = field(default_factory=dict)
    """pod key -> why the eviction API refused."""


async def drain(
    store: ClusterStore, state: LifecycleState, name: str, now: float | None = None
) -> DrainReport:
    at = time.time() if now is None else now
    await _node(store, name)
    await cordon(store, name)
    report = DrainReport()
    pods = cast(list[Pod], await store.list("Pod"))
    pdbs = cast(list[PodDisruptionBudget], await store.list("PodDisruptionBudget"))
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.spec.node_name != name:
            continue
        if controller_of(pod).startswith("DaemonSet/"):
            report.skipped.append(pod.key)
            continue
        answer = evict(pod, pdbs, pods, now=at)
        if answer.code != OK:
            report.refused[pod.key] = answer.message
            continue
        if answer.pdb is not None and answer.status is not None:
            updated = replace(answer.pdb, status=answer.status)
            await store.apply([updated])
            pdbs = [
                updated
                if p.metadata.name == updated.metadata.name
                and p.metadata.namespace == updated.metadata.namespace
                else p
                for p in pdbs
            ]
        result = await evict_pod(
            store,
            state,
            pod,
            reason=DRAIN_REASON,
            message=f"Evicting pod {pod.key} from node {name} (berth node drain)",
            now=at,
        )
        if result is False:
            continue
        # The budgets' next answers count the cluster as it is now: this pod gone, its
        # replacement (if any) pending, so not healthy.
        pods = [p for p in pods if p.key != pod.key]
        report.evicted.append(pod.key)
        if isinstance(result, Pod):
            pods.append(result)
            report.replaced.append(pod.key)
    return report
