"""ClusterObjects: the non-pod, non-node objects the inter-pod plugins read.

InterPodAffinity needs Namespaces (their labels, for namespaceSelector); PodTopologySpread's
default constraints need the selectors of Services and of the pod's controller
(ReplicationController, ReplicaSet, StatefulSet), as upstream's informer listers give them.
The framework Handle exposes an implementation as `handle.cluster_objects`; without one, the
plugins see an empty cluster (no namespaces, no services, no controllers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from shared.models import LabelSelector, Namespace
from shared.models.manifest import Manifests


class ClusterObjects(Protocol):
    def namespace(self, name: str) -> Namespace | None: ...

    def namespaces(self) -> Iterable[Namespace]: ...

    def service_selectors(self, namespace: str) -> Iterable[Mapping[str, str] | None]:
        """spec.selector of every Service in the namespace (None: a Service without one)."""
        ...

    def replication_controller_selector(
        self, namespace: str, name: str
    ) -> Mapping[str, str] | None:
        """spec.selector of that ReplicationController; None when it does not exist."""
        ...

    def replica_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        """spec.selector of that ReplicaSet; None when it does not exist or has none."""
        ...

    def stateful_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        """spec.selector of that StatefulSet; None when it does not exist or has none."""
        ...


@runtime_checkable
class HasClusterObjects(Protocol):
    """A framework Handle that exposes the cluster's objects."""

    @property
    def cluster_objects(self) -> ClusterObjects: ...


@dataclass(slots=True)
class StaticClusterObjects:
    """In-memory ClusterObjects (tests, dry runs); keys are "namespace/name"."""

    namespace_list: list[Namespace] = field(default_factory=list)
    services: dict[str, list[Mapping[str, str] | None]] = field(default_factory=dict)
    """namespace -> the selectors of its Services."""
    replication_controllers: dict[str, Mapping[str, str]] = field(default_factory=dict)
    replica_sets: dict[str, LabelSelector] = field(default_factory=dict)
    stateful_sets: dict[str, LabelSelector] = field(default_factory=dict)

    @classmethod
    def from_manifests(cls, manifests: Manifests) -> StaticClusterObjects:
        """The Namespaces, Services and pod controllers of loaded manifests (a dry run)."""
        objects = cls(namespace_list=list(manifests.namespaces))
        for service in manifests.services:
            # An empty selector selects nothing, like a nil one upstream.
            selector = dict(service.spec.selector) or None
            objects.services.setdefault(service.metadata.namespace, []).append(selector)
        for rc in manifests.replication_controllers:
            objects.replication_controllers[rc.key] = dict(rc.spec.selector)
        for sets, table in (
            (manifests.replica_sets, objects.replica_sets),
            (manifests.stateful_sets, objects.stateful_sets),
        ):
            for owner in sets:
                if owner.spec.selector is not None:  # validation requires one
                    table[owner.key] = owner.spec.selector
        return objects

    def namespace(self, name: str) -> Namespace | None:
        for ns in self.namespace_list:
            if ns.metadata.name == name:
                return ns
        return None

    def namespaces(self) -> Iterable[Namespace]:
        return self.namespace_list

    def service_selectors(self, namespace: str) -> Iterable[Mapping[str, str] | None]:
        return self.services.get(namespace, [])

    def replication_controller_selector(
        self, namespace: str, name: str
    ) -> Mapping[str, str] | None:
        return self.replication_controllers.get(f"{namespace}/{name}")

    def replica_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        return self.replica_sets.get(f"{namespace}/{name}")

    def stateful_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        return self.stateful_sets.get(f"{namespace}/{name}")


EMPTY_CLUSTER: ClusterObjects = StaticClusterObjects()


def cluster_objects_of(handle: object) -> ClusterObjects:
    """handle.cluster_objects when the Handle has it, else an empty cluster."""
    if isinstance(handle, HasClusterObjects):
        return handle.cluster_objects
    return EMPTY_CLUSTER


def namespace_labels(objects: ClusterObjects, name: str) -> Mapping[str, str]:
    """Upstream GetNamespaceLabelsSnapshot: the labels, or none when the namespace is unknown."""
    ns = objects.namespace(name)
    return {} if ns is None else dict(ns.metadata.labels)
