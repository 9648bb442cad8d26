"""Object metadata shared by every kind (metav1.ObjectMeta, trimmed to what berth reads)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

# A resource list: "cpu" in millicores, every other resource in integer base units
# (bytes for memory), rounded up like Quantity.Value().
ResourceList = dict[str, int]


def new_uid() -> str:
    return str(uuid.uuid4())


@dataclass(slots=True, kw_only=True)
class OwnerReference:
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


@dataclass(slots=True, kw_only=True)
class ObjectMeta:
    name: str = ""
    generate_name: str = field(default="", metadata={"emit": "nonempty"})
    """The prefix of a name the API server generates (only when `name` is empty)."""
    # Namespaced kinds default to "default"; cluster-scoped kinds (Node, Namespace,
    # PriorityClass) use "".
    namespace: str = field(default="default", metadata={"emit": "nonempty"})
    uid: str = field(default_factory=new_uid)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # Epoch seconds (manifests carry RFC 3339 strings).
    creation_timestamp: float | None = None
    # Set when the object is being deleted (preemption skips nodes with terminating victims).
    deletion_timestamp: float | None = None
    owner_references: list[OwnerReference] = field(default_factory=list)
    # A string in the Kubernetes API; berth keeps one integer counter.
    resource_version: int = field(default=0, metadata={"format": "int-string"})


def cluster_meta(name: str = "") -> ObjectMeta:
    """Metadata for a cluster-scoped object (namespace "")."""
    return ObjectMeta(name=name, namespace="")
