"""PodRecord: a pod as the queue keeps it (the fields it routes on, and the encoded object),
built by the informer from the store's change stream."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import msgpack

from shared.messaging.messages import decode_pod, pod_fingerprint, pod_fingerprint_of_fields
from shared.models import ObjectMeta, Pod, PodSpec, PodStatus, priority_of
from shared.models.codec import SCHEMA_VERSION, encode, encode_fields
from shared.models.schema import fields_of

PodOp = Literal["add", "update", "delete"]
"""What happened to a pod (informer semantics)."""


def _put(fields: dict[str, Any], name: str, value: object, default: object) -> None:
    if value == default:
        fields.pop(name, None)
    else:
        fields[name] = value


_WIRE_ORDER: dict[type, tuple[str, ...]] = {}


def _in_wire_order(fields: dict[str, Any], cls: type) -> dict[str, Any]:
    """`fields` in the order `encode` writes them (the bytes, and so the fingerprint, are
    the same as `encode`'s)."""
    order = _WIRE_ORDER.get(cls)
    if order is None:
        order = _WIRE_ORDER[cls] = tuple(spec.json for spec in fields_of(cls))
    out = {name: fields[name] for name in order if name in fields}
    if len(out) != len(fields):
        out.update((name, value) for name, value in fields.items() if name not in out)
    return out


def _has_required_pod_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    return bool(
        affinity is not None
        and affinity.pod_affinity is not None
        and affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    )


@dataclass(slots=True)
class PodRecord:
    """A pod as the queue sees it: routing fields plus the encoded object. Read-only by
    convention (copies are made with `evolve`); not frozen: the informer builds one per pod
    change, and a frozen dataclass's __init__ is five times slower."""

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
    quota_wait: str = ""
    """Why the pod waits for quota admission (services.queue.quota.admission); "" when it does not:
    the queue keeps it gated with this reason."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_pod(cls, pod: Pod) -> PodRecord:
        meta = pod.metadata
        fields = encode_fields(pod)  # one walk of the pod: its bytes and its fingerprint
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
            fingerprint=pod_fingerprint(pod, fields),
            required_pod_affinity=_has_required_pod_affinity(pod),
            body=encode(pod, fields),
        )

    @classmethod
    def from_stored(
        cls, data: bytes, resource_version: int, uid: str, node_name: str, nominated: str
    ) -> PodRecord:
        """The record of a pod from its stored bytes and what the store keeps beside them
        (a change-stream entry), without building the Pod: the same record as
        `from_pod(decoded pod, decorated)`, at a fraction of the cost. Bytes that are not a
        well-formed pod take the full decode (which names what is wrong)."""
        try:
            message = msgpack.unpackb(data, raw=False, strict_map_key=False)
            if message.get("v") == SCHEMA_VERSION and message.get("kind") == "Pod":
                fields = message["object"]
                return cls._from_fields(
                    message, fields, resource_version, uid, node_name, nominated
                )
        except (TypeError, KeyError, ValueError, AttributeError, msgpack.ExtraData):
            pass  # not well formed: the full decode below says what is wrong
        pod = decode_pod(data, "stored pod")
        pod.metadata.resource_version, pod.metadata.uid = resource_version, uid
        pod.spec.node_name, pod.status.nominated_node_name = node_name, nominated
        return cls.from_pod(pod)

    @classmethod
    def _from_fields(
        cls,
        message: dict[str, Any],
        fields: dict[str, Any],
        resource_version: int,
        uid: str,
        node_name: str,
        nominated: str,
    ) -> PodRecord:
        # What the store keeps beside the bytes, set as `encode` would write it: uid always,
        # the others only when not at their defaults (and an empty status not at all).
        metadata = dict(fields["metadata"])
        spec = dict(fields.get("spec") or {})
        status = dict(fields.get("status") or {})
        metadata["uid"] = uid
        _put(metadata, "resourceVersion", resource_version, 0)
        _put(spec, "nodeName", node_name, "")
        _put(status, "nominatedNodeName", nominated, "")
        fields = {
            **fields,
            "metadata": _in_wire_order(metadata, ObjectMeta),
            "spec": _in_wire_order(spec, PodSpec),
            "status": _in_wire_order(status, PodStatus),
        }
        # A part at its default (every field omitted) is omitted itself, as `encode` does.
        fields = _in_wire_order({k: v for k, v in fields.items() if v != {}}, Pod)
        labels = metadata.get("labels") or {}
        gates = spec.get("schedulingGates") or ()
        affinity = (spec.get("affinity") or {}).get("podAffinity") or {}
        priority = spec.get("priority")
        record = cls(
            namespace=metadata.get("namespace", "default"),
            name=metadata.get("name", ""),
            uid=uid,
            resource_version=resource_version,
            priority=0 if priority is None else int(priority),
            scheduler_name=spec.get("schedulerName", "default-scheduler"),
            node_name=node_name,
            scheduling_gates=tuple(str(gate["name"]) for gate in gates),
            nominated_node_name=nominated,
            labels=dict(labels),
            fingerprint=pod_fingerprint_of_fields(fields),
            required_pod_affinity=bool(
                affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
            ),
            body=msgpack.packb({**message, "object": fields}, use_bin_type=True),
        )
        if not (isinstance(record.name, str) and isinstance(record.namespace, str)):
            raise TypeError("metadata.name and namespace must be strings")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in record.labels.items()):
            raise TypeError("labels must map strings to strings")
        return record

    def pod(self) -> Pod:
        """Decode the object (MessageError if the bytes are not a Pod)."""
        return decode_pod(self.body, f"pod {self.key}")
