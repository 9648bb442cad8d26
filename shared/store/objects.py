"""Objects into the store and views out of it, for any client of a running stack: `berth
apply/delete/get` talking to Redis directly (cli/client.py) and the dashboard's API front door
(services/dashboard) do the same thing through these."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis

from shared.lifecycle.node_lifecycle import ready_status
from shared.messaging.wire import (
    MessageError,
    decode_body,
    encode_body,
    pack_message,
    unpack_map,
    wire,
)
from shared.models import (
    KubeObject,
    ManifestError,
    Manifests,
    Node,
    Pod,
    PriorityClass,
    resolve_priorities,
)
from shared.models.admission import admit
from shared.models.schema import fields_of
from shared.store import ClusterStore, Snapshot, StoreKeys, object_key

NodeCheck = Callable[[Pod, Node], str]
"""Why a node's kubelet would refuse a pod bound to it by name ("" when it would run it)."""

APPLY_BATCH = 2000
"""Objects per store call of one apply (a larger apply is checked whole first)."""


@dataclass(slots=True)
class ApplyReport:
    lines: list[str] = field(default_factory=list)
    """"kind/key created|configured", one per object, in the order applied."""
    warnings: list[str] = field(default_factory=list)
    """Pods whose own priority disagrees with their class, one line each."""
    pods: dict[str, float] = field(default_factory=dict)
    """uid -> when it was stored (epoch seconds), for every pod applied."""


async def apply_manifests(
    store: ClusterStore,
    manifests: Manifests,
    *,
    batch: int = APPLY_BATCH,
    admission: bool = False,
    node_check: NodeCheck | None = None,
) -> ApplyReport:
    """Store every object (dependencies first; the queue hears of them from the store's change
    stream), all or nothing. Pod priorities are resolved against the stored PriorityClasses and
    the manifests' own. `admission`: a user's write (`berth apply`, the front door), admitted
    as the API server would (shared.models.admission: computed priorities, default
    tolerations, size limits, server uids); without it, objects are taken as a cluster's own
    (drivers of simulated workloads). With admission, a pod bound by name must be one its
    node's kubelet would run: `node_check` (scheduling.kubelet.kubelet_refusal: labels,
    NoExecute taints) here, the room on the node in the store, atomically."""
    stored_classes = cast(list[PriorityClass], await store.list("PriorityClass"))
    new_names = {pc.metadata.name for pc in manifests.priority_classes}
    classes = [
        *manifests.priority_classes,
        *(c for c in stored_classes if c.metadata.name not in new_names),
    ]
    report = ApplyReport()
    if admission:
        report.warnings = admit(manifests, classes)
        if node_check is not None:
            await _check_bound_by_name(store, manifests, node_check)
    else:
        report.warnings = resolve_priorities(manifests, classes)
    objects = list(manifests.objects())
    if len(objects) > batch:
        await store.check_apply(objects, kubelet=admission)  # all or nothing across batches
    for start in range(0, len(objects), batch):
        await _apply_batch(store, objects[start : start + batch], report, admission)
    return report


async def _check_bound_by_name(
    store: ClusterStore, manifests: Manifests, node_check: NodeCheck
) -> None:
    """ManifestError for the first new pod bound by name that its node's kubelet refuses."""
    nodes = {node.metadata.name: node for node in manifests.nodes}
    for pod in manifests.pods:
        name = pod.spec.node_name
        if not name or await store.bindings.bound_node(pod.key):
            continue
        node = nodes.get(name) or await store.get_node(name)
        if node is None:
            continue  # the store names the missing node
        refusal = node_check(pod, node)
        if refusal:
            raise ManifestError(
                f"Pod {pod.key}: spec.nodeName: {refusal}",
                kind="Pod",
                name=pod.key,
                path="spec.nodeName",
            )


async def _apply_batch(
    store: ClusterStore, objects: list[KubeObject], report: ApplyReport, kubelet: bool
) -> None:
    existed = await _present(store, objects)
    applied = await store.apply(objects, kubelet=kubelet)
    now = time.time()
    for obj, done in zip(objects, applied, strict=True):
        obj.metadata.resource_version = done.resource_version
        obj.metadata.uid = done.uid
        verb = "configured" if (done.kind, done.key) in existed else "created"
        report.lines.append(f"{done.kind.lower()}/{done.key} {verb}")
        if isinstance(obj, Pod):
            report.pods.setdefault(done.uid, now)


async def _present(store: ClusterStore, objects: Sequence[KubeObject]) -> set[tuple[str, str]]:
    """(kind, key) of the objects about to be applied that the store already has."""
    wanted: dict[str, list[str]] = {}
    for obj in objects:
        kind = type(obj).__name__
        key = object_key(kind, obj.metadata.namespace, obj.metadata.name)
        wanted.setdefault(kind, []).append(key)
    out: set[tuple[str, str]] = set()
    for kind, keys in wanted.items():
        present = await store.redis.hmget(store.keys.meta(kind), keys)
        out.update((kind, key) for key, meta in zip(keys, present, strict=True) if meta)
    return out


async def delete_object(store: ClusterStore, kind: str, namespace: str, name: str) -> bool:
    """Delete an object from the store (the queue hears of it from the change stream); False
    when there is none."""
    found = await store.get(kind, namespace, name)
    if found is None:
        return False
    await store.delete(kind, namespace, name, uid=found.metadata.uid)
    return True


def node_rows(snapshot: Snapshot) -> list[dict[str, Any]]:
    """Every node as `berth get nodes` shows it, by name."""
    rows = []
    for node in sorted(snapshot.nodes, key=lambda n: n.metadata.name):
        name = node.metadata.name
        usage = snapshot.usage.get(name)
        rows.append(
            {
                "name": name,
                "status": _node_status(node),
                "zone": node.metadata.labels.get("topology.kubernetes.io/zone", ""),
                "pods": usage.pods if usage is not None else 0,
                "allocatable": dict(node.status.allocatable),
                "requested": dict(usage.requested) if usage is not None else {},
                "taints": [f"{t.key}={t.value}:{t.effect}" for t in node.spec.taints],
            }
        )
    return rows


def _node_status(node: Node) -> str:
    """kubectl's STATUS: Ready / NotReady (Ready False or Unknown), SchedulingDisabled when
    cordoned (berth has always shown a cordoned ready node as "SchedulingDisabled")."""
    if ready_status(node) == "True":
        return "SchedulingDisabled" if node.spec.unschedulable else "Ready"
    return "NotReady,SchedulingDisabled" if node.spec.unschedulable else "NotReady"


@dataclass(frozen=True, slots=True)
class WorkerHeartbeat:
    """A scheduler worker's entry in the store's `workers` hash (written by
    services/scheduler/heartbeat.py every second): how far its view is, what it counts."""

    resource_version: int = field(default=0, metadata=wire("rv"))
    """The store's resourceVersion its view has applied."""
    at: float = field(default=0.0, metadata=wire("ts"))
    """When it was written, epoch seconds."""
    pid: int = field(default=0, metadata=wire("pid"))
    assumed: int = field(default=0, metadata=wire("assumed"))
    nodes: int = field(default=0, metadata=wire("nodes"))
    pods: int = field(default=0, metadata=wire("pods"))
    proposals: int = field(default=0, metadata=wire("proposals"))
    preemptions: int = field(default=0, metadata=wire("preemptions"))
    outcomes: int = field(default=0, metadata=wire("outcomes"))
    dead_letters: int = field(default=0, metadata=wire("dlq"))
    cycle_seconds: float = field(default=0.0, metadata=wire("cycle_s"))
    corrections: int = field(default=0, metadata=wire("corrections"))

    def encode(self) -> bytes:
        return pack_message(encode_body(self))

    def as_json(self) -> dict[str, Any]:
        """Every field by its wire name (`berth get queues -o json`, the dashboard)."""
        return {spec.json: getattr(self, spec.attr) for spec in fields_of(WorkerHeartbeat)}


async def read_heartbeats(
    redis: Redis, prefix: str = "berth:", cluster: str = "default"
) -> dict[str, WorkerHeartbeat]:
    """Scheduler worker id -> its last heartbeat; an entry that is not one (another version's,
    a stray write) is left out."""
    raw = await redis.hgetall(StoreKeys(prefix, cluster).workers)
    out: dict[str, WorkerHeartbeat] = {}
    for key, value in raw.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        with contextlib.suppress(MessageError):
            out[name] = decode_body(WorkerHeartbeat, unpack_map(cast(bytes, value)))
    return out
