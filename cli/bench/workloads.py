"""Synthetic clusters for benchmarks and the demo, modelled on upstream scheduler_perf.

Each workload gives the nodes, the pods already running (with nodeName) and the pods to
schedule, built directly as model objects (no YAML round trip), deterministically from a seed.

- scheduling-basic: scheduler_perf SchedulingBasic (node-default: 4 CPU / 32Gi / 110 pods;
  pod-default: 100m CPU / 500Mi).
- pod-affinity / pod-anti-affinity: SchedulingPodAffinity / SchedulingPodAntiAffinity.
- topology-spreading: SchedulingTopologySpreading (zone spread, maxSkew 5, DoNotSchedule).
- preemption: PreemptionBasic (low-priority pods fill the cluster, high-priority pods arrive).
- unschedulable: Unschedulable (pods too big for any node, then ordinary pods).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from shared.models import (
    Affinity,
    Container,
    LabelSelector,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PodSpec,
    ResourceRequirements,
    TopologySpreadConstraint,
)

GI = 1024**3
MI = 1024**2
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(slots=True)
class Workload:
    name: str
    nodes: list[Node]
    running: list[Pod] = field(default_factory=list)
    pending: list[Pod] = field(default_factory=list)


def make_node(name: str, zone: str | None, cpu_milli: int = 4000, memory: int = 32 * GI) -> Node:
    labels = {HOSTNAME: name}
    if zone is not None:
        labels[ZONE] = zone
    capacity = {"cpu": cpu_milli, "memory": memory, "pods": 110}
    return Node(
        metadata=ObjectMeta(name=name, namespace="", uid=f"uid-node-{name}", labels=labels),
        spec=NodeSpec(),
        status=NodeStatus(capacity=dict(capacity), allocatable=dict(capacity)),
    )


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu_milli: int = 100,
    memory: int = 500 * MI,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    node_name: str | None = None,
    affinity: Affinity | None = None,
    spread: list[TopologySpreadConstraint] | None = None,
    created: float = 0.0,
) -> Pod:
    requests = {"cpu": cpu_milli, "memory": memory}
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{namespace}-{name}",
            labels=dict(labels or {}),
            creation_timestamp=created,
        ),
        spec=PodSpec(
            containers=[
                Container(
                    name="pause",
                    image="registry.k8s.io/pause:3.10",
                    resources=ResourceRequirements(requests=requests),
                )
            ],
            priority=priority,
            node_name=node_name or "",
            affinity=affinity,
            topology_spread_constraints=list(spread or []),
        ),
    )


def _zones(count: int) -> list[str]:
    return [f"zone-{i}" for i in range(count)]


def _nodes(count: int, zones: int) -> list[Node]:
    names = _zones(zones)
    return [make_node(f"node-{i}", names[i % zones] if zones else None) for i in range(count)]


def scheduling_basic(nodes: int, pods: int, running: int = 0) -> Workload:
    cluster = _nodes(nodes, zones=0)
    init = [
        make_pod(f"init-{i}", node_name=cluster[i % nodes].metadata.name) for i in range(running)
    ]
    pending = [make_pod(f"pod-{i}", created=float(i)) for i in range(pods)]
    return Workload("scheduling-basic", cluster, init, pending)


def _term(labels: dict[str, str], key: str) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=LabelSelector(match_labels=dict(labels)), topology_key=key
    )


def pod_affinity(nodes: int, pods: int, running: int = 0) -> Workload:
    """Pods require co-location (zone) with pods labelled color=blue; some already run."""
    cluster = _nodes(nodes, zones=3)
    blue = {"color": "blue"}
    init = [
        make_pod(f"init-{i}", labels=blue, node_name=cluster[i % nodes].metadata.name)
        for i in range(max(running, 1))
    ]
    affinity = Affinity(
        pod_affinity=PodAffinity(
            required_during_scheduling_ignored_during_execution=[_term(blue, ZONE)]
        )
    )
    pending = [
        make_pod(f"pod-{i}", labels=blue, affinity=affinity, created=float(i)) for i in range(pods)
    ]
    return Workload("pod-affinity", cluster, init, pending)


def pod_anti_affinity(nodes: int, pods: int, running: int = 0) -> Workload:
    """Each pod refuses a node that already runs a pod of its group (hostname anti-affinity)."""
    cluster = _nodes(nodes, zones=3)
    groups = max(1, (pods + nodes - 1) // nodes)
    pending = []
    for i in range(pods):
        labels = {"color": "green", "group": str(i % groups)}
        anti = Affinity(
            pod_anti_affinity=PodAntiAffinity(
                required_during_scheduling_ignored_during_execution=[_term(labels, HOSTNAME)]
            )
        )
        pending.append(make_pod(f"pod-{i}", labels=labels, affinity=anti, created=float(i)))
    return Workload("pod-anti-affinity", cluster, [], pending)


def topology_spreading(nodes: int, pods: int, running: int = 0) -> Workload:
    cluster = _nodes(nodes, zones=3)
    labels = {"app": "spread"}
    init = [
        make_pod(f"init-{i}", labels=labels, node_name=cluster[i % nodes].metadata.name)
        for i in range(running)
    ]
    spread = [
        TopologySpreadConstraint(
            max_skew=5,
            topology_key=ZONE,
            when_unsatisfiable="DoNotSchedule",
            label_selector=LabelSelector(match_labels=dict(labels)),
        )
    ]
    pending = [
        make_pod(f"pod-{i}", labels=labels, spread=spread, created=float(i)) for i in range(pods)
    ]
    return Workload("topology-spreading", cluster, init, pending)


def preemption(nodes: int, pods: int, running: int = 0) -> Workload:
    """Low-priority pods fill every node's CPU; high-priority pods must preempt to fit."""
    cluster = _nodes(nodes, zones=3)
    running = running or 4 * nodes
    per_node = max(1, running // nodes)
    cpu_each = 4000 // per_node
    init = [
        make_pod(
            f"low-{i}",
            cpu_milli=cpu_each,
            memory=GI,
            priority=1,
            node_name=cluster[i % nodes].metadata.name,
            created=float(i),
        )
        for i in range(per_node * nodes)
    ]
    pending = [
        make_pod(f"high-{i}", cpu_milli=cpu_each, memory=GI, priority=1000, created=float(i))
        for i in range(pods)
    ]
    return Workload("preemption", cluster, init, pending)


def unschedulable(nodes: int, pods: int, running: int = 0) -> Workload:
    cluster = _nodes(nodes, zones=3)
    huge = [make_pod(f"huge-{i}", cpu_milli=64000, created=float(i)) for i in range(pods // 10)]
    normal = [make_pod(f"pod-{i}", created=float(pods + i)) for i in range(pods)]
    return Workload("unschedulable", cluster, [], huge + normal)


WORKLOADS: dict[str, Callable[[int, int, int], Workload]] = {
    "scheduling-basic": scheduling_basic,
    "pod-affinity": pod_affinity,
    "pod-anti-affinity": pod_anti_affinity,
    "topology-spreading": topology_spreading,
    "preemption": preemption,
    "unschedulable": unschedulable,
}
