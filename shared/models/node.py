"""Node (core/v1), trimmed to the fields a scheduler reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.models.meta import ObjectMeta, ResourceList, cluster_meta
from shared.models.taints import Taint


@dataclass(slots=True, kw_only=True)
class NodeSpec:
    unschedulable: bool = False
    taints: list[Taint] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ContainerImage:
    names: list[str] = field(default_factory=list)
    size_bytes: int = 0


@dataclass(slots=True, kw_only=True)
class NodeCondition:
    """A node condition (Ready, MemoryPressure, DiskPressure, PIDPressure,
    NetworkUnavailable): status "True", "False" or "Unknown". Times in epoch seconds."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_heartbeat_time: float | None = None
    last_transition_time: float | None = None


@dataclass(slots=True, kw_only=True)
class NodeStatus:
    capacity: ResourceList = field(default_factory=dict)
    # Defaults to capacity when absent, as the API server does (SetDefaults_NodeStatus).
    allocatable: ResourceList = field(default_factory=dict)
    images: list[ContainerImage] = field(default_factory=list)
    conditions: list[NodeCondition] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.allocatable and self.capacity:
            self.allocatable = dict(self.capacity)


@dataclass(slots=True, kw_only=True)
class Node:
    metadata: ObjectMeta = field(default_factory=cluster_meta)
    spec: NodeSpec = field(default_factory=NodeSpec)
    status: NodeStatus = field(default_factory=NodeStatus)

    @property
    def key(self) -> str:
        return self.metadata.name
