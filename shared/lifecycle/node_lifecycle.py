"""Node conditions and the taints that follow them (upstream node lifecycle controller).

- Ready is reported by the node's kubelet (berth: the node agent's heartbeat, `berth node
  fail|recover`, or a Node applied with conditions). When no heartbeat arrived for
  `grace` seconds (upstream --node-monitor-grace-period), the controller sets Ready to
  "Unknown" (reason NodeStatusUnknown); a heartbeat after that sets it back to "True".
- A node without a Ready condition is ready (berth: nodes are declared healthy unless a
  condition says otherwise, so a cluster of condition-less nodes needs no write at all).
- Taints by condition (upstream TaintNodesByCondition and the NoExecute tainting pass):
  Ready False -> node.kubernetes.io/not-ready (NoSchedule and NoExecute),
  Ready Unknown -> node.kubernetes.io/unreachable (NoSchedule and NoExecute),
  MemoryPressure / DiskPressure / PIDPressure True -> memory-/disk-/pid-pressure NoSchedule,
  NetworkUnavailable True -> network-unavailable NoSchedule, spec.unschedulable ->
  node.kubernetes.io/unschedulable NoSchedule. Taints with these keys are the controller's:
  ones the conditions no longer call for are removed; a NoExecute taint carries timeAdded.
- Full disruption (upstream handleDisruption): when no node of the cluster is ready, the
  controller presumes its own view is cut off rather than every node failing at once (berth:
  the agent itself was away), and takes no node's pods: the not-ready / unreachable NoExecute
  taints are not added, and removed where present, until some node is ready again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from shared.models import Node, NodeCondition, Taint

READY = "Ready"
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

PRESSURE_TAINTS = {
    "MemoryPressure": MEMORY_PRESSURE,
    "DiskPressure": DISK_PRESSURE,
    "PIDPressure": PID_PRESSURE,
    "NetworkUnavailable": NETWORK_UNAVAILABLE,
}
MANAGED_KEYS = frozenset({NOT_READY, UNREACHABLE, UNSCHEDULABLE, *PRESSURE_TAINTS.values()})

DEFAULT_GRACE_SECONDS = 40.0
"""Upstream --node-monitor-grace-period (40 s until v1.31; 50 s since v1.32)."""
DEFAULT_HEARTBEAT_SECONDS = 10.0
"""Upstream kubelet node lease renew interval (a quarter of the 40 s lease)."""


def condition(node: Node, kind: str) -> NodeCondition | None:
    return next((c for c in node.status.conditions if c.type == kind), None)


def ready_status(node: Node) -> str:
    """The Ready condition's status; TRUE when the node has none (see the module docstring)."""
    found = condition(node, READY)
    return TRUE if found is None or not found.status else found.status


def desired_taints(node: Node, now: float, evicting: bool = True) -> list[Taint]:
    """The controller's taints for the node's conditions (timeAdded `now` on NoExecute).
    `evicting` False (the whole cluster disrupted): no NoExecute taints."""
    out: list[Taint] = []
    ready = ready_status(node)
    if ready in (FALSE, UNKNOWN):
        key = NOT_READY if ready == FALSE else UNREACHABLE
        out.append(Taint(key=key, effect="NoSchedule"))
        if evicting:
            out.append(Taint(key=key, effect="NoExecute", time_added=now))
    for kind, key in PRESSURE_TAINTS.items():
        found = condition(node, kind)
        if found is not None and found.status == TRUE:
            out.append(Taint(key=key, effect="NoSchedule"))
    if node.spec.unschedulable:
        out.append(Taint(key=UNSCHEDULABLE, effect="NoSchedule"))
    return out


def reconcile_taints(node: Node, now: float, evicting: bool = True) -> list[Taint] | None:
    """The node's taints with the controller's replaced by what its conditions call for
    (the user's own taints and order kept; a taint already there keeps its timeAdded), or
    None when nothing changes."""
    wanted = desired_taints(node, now, evicting)
    current = node.spec.taints
    managed = {(t.key, t.effect): t for t in current if t.key in MANAGED_KEYS}
    wanted_ids = {(t.key, t.effect) for t in wanted}
    if set(managed) == wanted_ids:
        return None
    kept = [t for t in current if t.key not in MANAGED_KEYS or (t.key, t.effect) in wanted_ids]
    present = {(t.key, t.effect) for t in kept}
    return kept + [t for t in wanted if (t.key, t.effect) not in present]


def with_ready(node: Node, status: str, reason: str, message: str, now: float) -> Node | None:
    """The node with its Ready condition set to `status`, None when it already is."""
    found = condition(node, READY)
    if ready_status(node) == status and (found is not None or status == TRUE):
        return None
    return with_condition(node, READY, status, reason, message, now)


def with_condition(
    node: Node, kind: str, status: str, reason: str, message: str, now: float
) -> Node:
    """The node with its `kind` condition set (first in the list), the others kept."""
    new = NodeCondition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_heartbeat_time=now,
        last_transition_time=now,
    )
    others = [c for c in node.status.conditions if c.type != kind]
    return replace(node, status=replace(node.status, conditions=[new, *others]))


@dataclass(frozen=True, slots=True)
class NodeUpdate:
    """What the controller writes to a node (None: nothing)."""

    node: Node
    why: str


def monitor(
    node: Node,
    heartbeat: float | None,
    now: float,
    grace: float,
    watching_since: float,
    evicting: bool = True,
) -> NodeUpdate | None:
    """One pass of the controller over a node: Ready from the heartbeat's age, then the
    taints. `heartbeat`: the last heartbeat's time (None: never seen); `watching_since`: when
    this controller started watching the node (a node never heard from is given `grace`
    from then, as upstream gives a new node its startup grace)."""
    current = node
    why: list[str] = []
    last = heartbeat if heartbeat is not None else watching_since
    stale = now - last > grace
    status = ready_status(node)
    if stale and status != UNKNOWN:
        changed = with_ready(
            node, UNKNOWN, "NodeStatusUnknown", "Kubelet stopped posting node status.", now
        )
        if changed is not None:
            current = changed
            why.append("Ready=Unknown (no heartbeat)")
    elif not stale and status == UNKNOWN and heartbeat is not None:
        changed = with_ready(node, TRUE, "KubeletReady", "kubelet is posting ready status", now)
        if changed is not None:
            current = changed
            why.append("Ready=True (heartbeat)")
    taints = reconcile_taints(current, now, evicting)
    if taints is not None:
        current = replace(current, spec=replace(current.spec, taints=taints))
        why.append("taints " + (", ".join(_text(t) for t in taints) or "none"))
    if current is node:
        return None
    return NodeUpdate(current, "; ".join(why))


def _text(taint: Taint) -> str:
    return f"{taint.key}:{taint.effect}"


def managed(taints: Sequence[Taint]) -> list[Taint]:
    return [t for t in taints if t.key in MANAGED_KEYS]


def fully_disrupted(
    nodes: Sequence[Node],
    heartbeats: dict[str, float],
    now: float,
    grace: float,
    watching_since: float,
) -> bool:
    """No node ready by its condition and heartbeat (and at least one node)."""
    if not nodes:
        return False
    for node in nodes:
        beat = heartbeats.get(node.metadata.name, watching_since)
        if ready_status(node) == TRUE and now - beat <= grace:
            return False
    return True
