"""The objects that select or own pods: v1 Service and ReplicationController, apps/v1
ReplicaSet and StatefulSet, trimmed to what the scheduler reads.

The scheduler reads only their selectors: PodTopologySpread's cluster default constraints
apply to pods a Service selects or one of these controllers owns, with the label selector
derived from them (upstream helper.DefaultSelector). The other typed fields are what real
manifests commonly carry, kept so that `to_dict` shows them again.

``template`` (the PodTemplateSpec of the three controllers) is kept as an opaque JSON
mapping, not as a typed Pod: berth runs no controllers, so nothing creates pods from it
(pods are given in the manifests), and typing it would drag in the whole PodSpec
validation for an object the scheduler never reads. It is kept rather than dropped because
its ``metadata.labels`` matter: a ReplicationController without a selector takes them as
its selector (API defaulting), and every controller's selector must match them (API
validation). It is optional in berth (the API server requires it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.models.meta import ObjectMeta
from shared.models.selectors import LabelSelector

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
CLUSTER_IP_NONE = "None"
"""spec.clusterIP of a headless Service."""

PodTemplate = dict[str, Any]
"""A PodTemplateSpec as JSON (``{"metadata": {...}, "spec": {...}}``), not interpreted."""


@dataclass(slots=True, kw_only=True)
class ServicePort:
    name: str = ""
    protocol: str = "TCP"
    port: int = 0
    # A port number or the name of a container port; 0 / "" default to `port`.
    target_port: int | str = 0
    node_port: int = 0


@dataclass(slots=True, kw_only=True)
class ServiceSpec:
    # Empty: the Service selects no pods (upstream: nil selectors match nothing).
    selector: dict[str, str] = field(default_factory=dict)
    type: str = "ClusterIP"
    ports: list[ServicePort] = field(default_factory=list)
    cluster_ip: str = field(default="", metadata={"json": "clusterIP"})


@dataclass(slots=True, kw_only=True)
class Service:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: ServiceSpec = field(default_factory=ServiceSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


@dataclass(slots=True, kw_only=True)
class ReplicationControllerSpec:
    # An equality selector; defaults to the template's labels (SetDefaults_ReplicationController).
    selector: dict[str, str] = field(default_factory=dict)
    replicas: int = 1
    template: PodTemplate = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ReplicationController:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = field(default_factory=ReplicationControllerSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


@dataclass(slots=True, kw_only=True)
class ReplicaSetSpec:
    # Required and non-empty (validation); None only before validation.
    selector: LabelSelector | None = None
    replicas: int = 1
    template: PodTemplate = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ReplicaSet:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: ReplicaSetSpec = field(default_factory=ReplicaSetSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


@dataclass(slots=True, kw_only=True)
class StatefulSetSpec:
    # Required and non-empty (validation); None only before validation.
    selector: LabelSelector | None = None
    replicas: int = 1
    service_name: str = ""
    template: PodTemplate = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class StatefulSet:
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: StatefulSetSpec = field(default_factory=StatefulSetSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"
