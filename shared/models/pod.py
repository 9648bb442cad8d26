"""Pod (core/v1), trimmed to the fields a scheduler reads, same nesting as the API."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.models.meta import ObjectMeta, ResourceList
from shared.models.selectors import LabelSelector, NodeSelector, NodeSelectorTerm
from shared.models.taints import Toleration

DEFAULT_SCHEDULER_NAME = "default-scheduler"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
# An init container with this restartPolicy is a sidecar (restartable init container).
CONTAINER_RESTART_ALWAYS = "Always"


@dataclass(slots=True, kw_only=True)
class ResourceRequirements:
    requests: ResourceList = field(default_factory=dict)
    limits: ResourceList = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ContainerPort:
    container_port: int = 0
    host_port: int = 0
    host_ip: str = field(default="", metadata={"json": "hostIP"})
    protocol: str = "TCP"
    name: str = ""


@dataclass(slots=True, kw_only=True)
class Container:
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = field(default_factory=list)
    # Only meaningful for init containers: "Always" makes it a sidecar.
    restart_policy: str | None = None


@dataclass(slots=True, kw_only=True)
class PreferredSchedulingTerm:
    weight: int = 0
    preference: NodeSelectorTerm = field(default_factory=NodeSelectorTerm)


@dataclass(slots=True, kw_only=True)
class NodeAffinity:
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = field(
        default_factory=list
    )


@dataclass(slots=True, kw_only=True)
class PodAffinityTerm:
    # None matches no pods (upstream LabelSelectorAsSelector(nil)).
    label_selector: LabelSelector | None = None
    # Empty namespaces and a None namespace_selector mean the pod's own namespace;
    # namespace_selector {} means all namespaces.
    namespaces: list[str] = field(default_factory=list)
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = field(default_factory=list)
    mismatch_label_keys: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class WeightedPodAffinityTerm:
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = field(default_factory=PodAffinityTerm)


@dataclass(slots=True, kw_only=True)
class PodAffinity:
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = field(
        default_factory=list
    )


@dataclass(slots=True, kw_only=True)
class PodAntiAffinity:
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = field(
        default_factory=list
    )


@dataclass(slots=True, kw_only=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


@dataclass(slots=True, kw_only=True)
class TopologySpreadConstraint:
    max_skew: int = 1
    topology_key: str = ""
    when_unsatisfiable: str = "DoNotSchedule"
    # None matches no pods (upstream LabelSelectorAsSelector(nil)).
    label_selector: LabelSelector | None = None
    # None means 1 (upstream default).
    min_domains: int | None = None
    # None means Honor.
    node_affinity_policy: str | None = None
    # None means Ignore.
    node_taints_policy: str | None = None
    match_label_keys: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class PodSchedulingGate:
    name: str = ""


@dataclass(slots=True, kw_only=True)
class PodSpec:
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    overhead: ResourceList = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = field(default_factory=list)
    scheduling_gates: list[PodSchedulingGate] = field(default_factory=list)
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    node_name: str = ""
    # With host networking every container port is also a host port (API defaulting).
    host_network: bool = False
    restart_policy: str = field(default="", metadata={"emit": "nonempty"})
    dns_policy: str = field(default="", metadata={"emit": "nonempty"})
    # None means the API default of 30 s (victims of preemption get this grace period).
    termination_grace_period_seconds: int | None = None


@dataclass(slots=True, kw_only=True)
class PodStatus:
    nominated_node_name: str = ""
    phase: str = ""
    # Epoch seconds.
    start_time: float | None = None


@dataclass(slots=True, kw_only=True)
class Pod:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: PodSpec = field(default_factory=PodSpec)
    status: PodStatus = field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        """The pod's identity in queues and caches: "namespace/name"."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


def priority_of(pod: Pod) -> int:
    """spec.priority, or 0 when unresolved (upstream corev1helpers.PodPriority)."""
    priority = pod.spec.priority
    return 0 if priority is None else priority
