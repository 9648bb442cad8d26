"""Namespace, PriorityClass, PodDisruptionBudget and (coscheduling) PodGroup."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.models.meta import ObjectMeta, ResourceList, cluster_meta
from shared.models.pod import PREEMPT_LOWER_PRIORITY, Pod
from shared.models.selectors import LabelSelector

# Pods join a PodGroup through this label (scheduler-plugins coscheduling).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclass(slots=True, kw_only=True)
class Namespace:
    metadata: ObjectMeta = field(default_factory=cluster_meta)

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(slots=True, kw_only=True)
class PriorityClass:
    """scheduling.k8s.io/v1, cluster-scoped; fields at top level like the API."""

    metadata: ObjectMeta = field(default_factory=cluster_meta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    description: str = ""

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(slots=True, kw_only=True)
class PodDisruptionBudgetSpec:
    # An int or a percentage string such as "50%".
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    # policy/v1: None selects no pods, {} selects all pods in the namespace.
    selector: LabelSelector | None = None
    unhealthy_pod_eviction_policy: str | None = None


@dataclass(slots=True, kw_only=True)
class PodDisruptionBudgetStatus:
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


@dataclass(slots=True, kw_only=True)
class PodDisruptionBudget:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = field(default_factory=PodDisruptionBudgetStatus)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


@dataclass(slots=True, kw_only=True)
class PodGroupSpec:
    min_member: int = 0
    min_resources: ResourceList = field(default_factory=dict)
    schedule_timeout_seconds: int | None = None


@dataclass(slots=True, kw_only=True)
class PodGroup:
    """scheduling.x-k8s.io/v1alpha1 PodGroup (scheduler-plugins coscheduling)."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: PodGroupSpec = field(default_factory=PodGroupSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


def pod_group_key(pod: Pod) -> str:
    """ "namespace/name" of the PodGroup a pod belongs to (its scheduling.x-k8s.io/pod-group
    label; upstream scheduler-plugins GetPodGroupFullName), "" for a pod without one."""
    group = pod.metadata.labels.get(POD_GROUP_LABEL, "")
    return f"{pod.metadata.namespace}/{group}" if group else ""
