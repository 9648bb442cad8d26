"""PodRecord: a pod as the queue keeps it (the fields it routes on, and the encoded object),
built by the informer from the store's change stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shared.messages import MessageError, pod_fingerprint
from shared.models import Pod, priority_of
from shared.models.codec import CodecError, decode, encode

PodOp = Literal["add", "update", "delete"]
"""What happened to a pod (informer semantics)."""


def _has_required_pod_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    return bool(
        affinity is not None
        and affinity.pod_affinity is not None
        and affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    )


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the queue sees it: routing fields plus the encoded object."""

    namespace: str
    name: str
    uid: str
    resource_version: int = 0
    priority: int = 0
    """Resolved priority (spec.priority; 0 when unset)."""
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    """Set once the pod is bound: such a pod is an "assigned pod" event, not queue work."""
    scheduling_gates: tuple[str, ...] = ()
    nominated_node_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    fingerprint: str = ""
    """pod_fingerprint(): tells a relevant update (isPodUpdated) from a status-only one."""
    required_pod_affinity: bool = False
    """The pod has required pod-affinity terms (an assigned pod may wake it: AssignedPodAdded)."""
    body: bytes = b""
    """shared.models.codec.encode(pod)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_pod(cls, pod: Pod) -> PodRecord:
        meta = pod.metadata
        return cls(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            resource_version=meta.resource_version,
            priority=priority_of(pod),
            scheduler_name=pod.spec.scheduler_name,
            node_name=pod.spec.node_name,
            scheduling_gates=tuple(gate.name for gate in pod.spec.scheduling_gates),
            nominated_node_name=pod.status.nominated_node_name,
            labels=dict(meta.labels),
            fingerprint=pod_fingerprint(pod),
            required_pod_affinity=_has_required_pod_affinity(pod),
            body=encode(pod),
        )

    def pod(self) -> Pod:
        """Decode the object (MessageError if the bytes are not a Pod)."""
        try:
            obj = decode(self.body)
        except CodecError as e:
            raise MessageError(f"pod {self.key}: {e}") from e
        if not isinstance(obj, Pod):
            raise MessageError(f"pod {self.key}: body is a {type(obj).__name__}")
        return obj
