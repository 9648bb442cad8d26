"""The bundled workload of `berth demo` (cli/demo.py), deterministic from its seed: nodes in 3
zones with a tainted GPU pool, 3 tenants, and pods of five kinds (batch, spread web apps,
anti-affine databases, gangs, GPU pods, a few too big for any node), plus the high-priority GPU
pods that arrive later and preempt."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from shared.models import (
    POD_GROUP_LABEL,
    Affinity,
    Container,
    LabelSelector,
    Manifests,
    Namespace,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodAffinityTerm,
    PodAntiAffinity,
    PodGroup,
    PodGroupSpec,
    PodSpec,
    PriorityClass,
    ResourceRequirements,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    cluster_meta,
)

GI = 1024**3
MI = 1024**2
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
TENANTS = ("team-a", "team-b", "team-c")
CRITICAL = "critical"
GANG_SIZE = 8
SPREAD_APP = 30
DB_REPLICAS = 5
GPUS_PER_NODE = 4


@dataclass(slots=True)
class DemoWorkload:
    base: Manifests
    """Nodes, namespaces, the priority class, pod groups and the bulk of the pods."""
    preemptors: Manifests
    """High-priority GPU pods, applied once the base settled."""

    @property
    def pod_count(self) -> int:
        return len(self.base.pods) + len(self.preemptors.pods)


def _node(index: int, zone: str, kind: str) -> Node:
    name = f"node-{index:04d}"
    cpu, memory = (16000, 64 * GI) if kind in ("large", "gpu") else (8000, 32 * GI)
    capacity = {"cpu": cpu, "memory": memory, "pods": 110}
    taints = []
    labels = {HOSTNAME: name, ZONE: zone, "node-type": kind}
    if kind == "gpu":
        capacity[GPU] = GPUS_PER_NODE
        labels["accelerator"] = "gpu"
        taints.append(Taint(key=GPU, value="present", effect="NoSchedule"))
    return Node(
        metadata=ObjectMeta(name=name, namespace="", labels=labels),
        spec=NodeSpec(taints=taints),
        status=NodeStatus(capacity=dict(capacity), allocatable=dict(capacity)),
    )


def _pod(
    name: str,
    namespace: str,
    *,
    cpu: int,
    memory: int,
    labels: dict[str, str],
    gpus: int = 0,
    **spec: Any,
) -> Pod:
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[GPU] = gpus
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=PodSpec(
            containers=[
                Container(
                    name="main",
                    image="registry.example.com/job:v1",
                    resources=ResourceRequirements(requests=requests),
                )
            ],
            **spec,
        ),
    )


def _selector(app: str) -> LabelSelector:
    return LabelSelector(match_labels={"app": app})


def demo_workload(nodes: int = 1000, pods: int = 10_000, seed: int = 0) -> DemoWorkload:
    """The bundled workload (see the module docstring); sizes scale with `nodes` / `pods`."""
    rng = random.Random(seed)
    zones = [f"zone-{z}" for z in "abc"]
    gpu_nodes = max(1, nodes // 20)
    large_nodes = max(1, nodes // 10)
    cluster = []
    for i in range(nodes):
        kind = "gpu" if i < gpu_nodes else "large" if i < gpu_nodes + large_nodes else "standard"
        cluster.append(_node(i, zones[i % len(zones)], kind))

    base = Manifests(
        nodes=cluster,
        namespaces=[Namespace(metadata=_ns(t)) for t in TENANTS],
        priority_classes=[
            PriorityClass(metadata=cluster_meta(CRITICAL), value=100_000, description="demo")
        ],
    )
    gpu_pods = gpu_nodes * GPUS_PER_NODE
    gangs = max(1, pods // 1250)
    huge = max(1, pods // 1000)
    rest = max(0, pods - gpu_pods - gangs * GANG_SIZE - huge)
    spread = rest * 15 // 100 // SPREAD_APP * SPREAD_APP
    dbs = rest * 10 // 100 // DB_REPLICAS * DB_REPLICAS
    plain = rest - spread - dbs
    made: list[Pod] = []
    gpu_toleration = [Toleration(key=GPU, operator="Exists", effect="NoSchedule")]

    def tenant(i: int) -> str:
        return TENANTS[i % len(TENANTS)]

    for i in range(plain):
        made.append(
            _pod(
                f"batch-{i}",
                tenant(i),
                cpu=rng.choice([100, 250, 500, 1000]),
                memory=rng.choice([256, 512, 1024, 2048]) * MI,
                labels={"app": f"batch-{i % 50}", "tier": "batch"},
            )
        )
    for i in range(spread):
        app = f"web-{i // SPREAD_APP}"
        made.append(
            _pod(
                f"{app}-{i % SPREAD_APP}",
                tenant(i // SPREAD_APP),
                cpu=500,
                memory=GI,
                labels={"app": app, "tier": "web"},
                topology_spread_constraints=[
                    TopologySpreadConstraint(
                        max_skew=1,
                        topology_key=ZONE,
                        when_unsatisfiable="DoNotSchedule",
                        label_selector=_selector(app),
                    )
                ],
            )
        )
    for i in range(dbs):
        app = f"db-{i // DB_REPLICAS}"
        term = PodAffinityTerm(label_selector=_selector(app), topology_key=HOSTNAME)
        made.append(
            _pod(
                f"{app}-{i % DB_REPLICAS}",
                tenant(i // DB_REPLICAS),
                cpu=1000,
                memory=2 * GI,
                labels={"app": app, "tier": "db"},
                affinity=Affinity(
                    pod_anti_affinity=PodAntiAffinity(
                        required_during_scheduling_ignored_during_execution=[term]
                    )
                ),
            )
        )
    for g in range(gangs):
        namespace = tenant(g)
        group = f"train-{g}"
        base.pod_groups.append(
            PodGroup(
                metadata=ObjectMeta(name=group, namespace=namespace),
                spec=PodGroupSpec(min_member=GANG_SIZE, schedule_timeout_seconds=60),
            )
        )
        for m in range(GANG_SIZE):
            made.append(
                _pod(
                    f"{group}-{m}",
                    namespace,
                    cpu=2000,
                    memory=4 * GI,
                    labels={"app": group, "tier": "train", POD_GROUP_LABEL: group},
                )
            )
    for i in range(gpu_pods):
        made.append(
            _pod(
                f"cuda-{i}",
                tenant(i),
                cpu=2000,
                memory=8 * GI,
                gpus=1,
                labels={"app": "cuda", "tier": "gpu"},
                tolerations=list(gpu_toleration),
                node_selector={"accelerator": "gpu"},
            )
        )
    for i in range(huge):
        made.append(
            _pod(
                f"huge-{i}",
                tenant(i),
                cpu=24_000,
                memory=16 * GI,
                labels={"app": "huge", "tier": "batch"},
            )
        )
    rng.shuffle(made)
    base.pods = made

    preemptors = Manifests(
        pods=[
            _pod(
                f"urgent-{i}",
                tenant(i),
                cpu=2000,
                memory=8 * GI,
                gpus=1,
                labels={"app": "urgent", "tier": "critical"},
                tolerations=list(gpu_toleration),
                node_selector={"accelerator": "gpu"},
                priority_class_name=CRITICAL,
            )
            for i in range(max(1, min(20, gpu_pods // 10)))
        ]
    )
    return DemoWorkload(base, preemptors)


def _ns(name: str) -> ObjectMeta:
    meta = cluster_meta(name)
    meta.labels = {"team": name}
    return meta
