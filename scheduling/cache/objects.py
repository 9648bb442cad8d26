"""The cluster objects plugins read through a view (namespaces, Services, controllers'
selectors), over the object maps a ClusterCache keeps (scheduling.framework.ClusterObjects)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.models import (
    LabelSelector,
    Namespace,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
)


class ViewClusterObjects:
    """ClusterObjects over the view's namespaces, Services and controllers."""

    def __init__(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        self._objects = objects

    def _get(self, kind: str, key: str) -> Any:
        return self._objects.get(kind, {}).get(key)

    def namespace(self, name: str) -> Namespace | None:
        ns = self._get("Namespace", name)
        return ns if isinstance(ns, Namespace) else None

    def namespaces(self) -> Iterable[Namespace]:
        return [ns for ns in self._objects.get("Namespace", {}).values()]

    def service_selectors(self, namespace: str) -> Iterable[Mapping[str, str] | None]:
        return [
            svc.spec.selector or None
            for svc in self._objects.get("Service", {}).values()
            if isinstance(svc, Service) and svc.metadata.namespace == namespace
        ]

    def replication_controller_selector(
        self, namespace: str, name: str
    ) -> Mapping[str, str] | None:
        rc = self._get("ReplicationController", f"{namespace}/{name}")
        return rc.spec.selector if isinstance(rc, ReplicationController) else None

    def replica_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        rs = self._get("ReplicaSet", f"{namespace}/{name}")
        return rs.spec.selector if isinstance(rs, ReplicaSet) else None

    def stateful_set_selector(self, namespace: str, name: str) -> LabelSelector | None:
        ss = self._get("StatefulSet", f"{namespace}/{name}")
        return ss.spec.selector if isinstance(ss, StatefulSet) else None
