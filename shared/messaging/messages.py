"""Kafka message schemas between the berth services: dataclasses on shared.messaging.wire's codec.

Every payload is a msgpack map ``{"v": SCHEMA_VERSION, "t": <type>, ...}``. Kafka carries
work only (schedule requests, proposals in shared.messaging.proposals, outcomes, dead letters); the
cluster's objects travel once, on the store's change stream (shared.store).

=====================  =============================  ===================================
topic                  message                        key
=====================  =============================  ===================================
berth.schedule         ScheduleBatch                  uid of the first pod
berth.outcomes         Outcome, or a batch of them    pod uid (a batch: the first item's;
                       ("outcomes")                   every item maps to its partition)
berth.dlq              DeadLetter                     the original key
=====================  =============================  ===================================

Batches (shared.messaging.wire.pack_batch, written by shared.messaging.batch_sender) carry
the outcomes or proposals that ended or were decided together, one record per partition;
readers accept a single message too. W3C trace context travels in Kafka headers
(`shared.observability.tracing.inject_headers` and `dispatch_headers`), a batch item's in its
own "hdr" field, not in the payload.

Errors::

    MessageError (ValueError)   undecodable bytes, another schema version, a wrong field
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgpack

from shared.messaging.wire import (
    SCHEMA_VERSION,
    BatchedMessage,
    MessageError,
    WireBody,
    WireMessage,
    array_header,
    pack_value,
    unpack,
    wire,
)
from shared.models import Pod
from shared.models.codec import CodecError, decode, encode_fields

OutcomeResult = Literal["scheduled", "unschedulable", "error", "conflict", "extend"]
"""
- scheduled: the pod is bound; the queue forgets it.
- unschedulable / error: AddUnschedulableIfNotPresent with the failed plugins.
- conflict: the binder found a conflict; the pod goes straight back to active, no backoff.
- extend: the attempt is still running (e.g. waiting on a permit); renew the lease.
"""


# ---------------------------------------------------------------------------------------------
# pods


def decode_pod(data: bytes, what: str) -> Pod:
    """A pod from codec bytes; MessageError naming `what` if they are not one."""
    try:
        obj = decode(data)
    except CodecError as e:
        raise MessageError(f"{what}: {e}") from e
    if not isinstance(obj, Pod):
        raise MessageError(f"{what}: body is a {type(obj).__name__}")
    return obj


def pod_fingerprint(pod: Pod, fields: dict[str, Any] | None = None) -> str:
    """Equal for two versions of a pod iff upstream isPodUpdated would say "not updated".

    isPodUpdated ignores resourceVersion, generation, managedFields, finalizers and status.
    `fields`: the pod's `encode_fields`, when the caller has them already (one walk of the
    pod then gives both its bytes and its fingerprint).
    """
    return pod_fingerprint_of_fields(encode_fields(pod) if fields is None else fields)


def pod_fingerprint_of_fields(fields: Mapping[str, Any]) -> str:
    """`pod_fingerprint` of a pod given as its `encode_fields`."""
    kept = {name: value for name, value in fields.items() if name != "status"}
    metadata = kept.get("metadata")
    if isinstance(metadata, dict) and "resourceVersion" in metadata:
        kept["metadata"] = {k: v for k, v in metadata.items() if k != "resourceVersion"}
    data = msgpack.packb(kept, use_bin_type=True)
    return hashlib.blake2b(data, digest_size=10).hexdigest()


# ---------------------------------------------------------------------------------------------
# queue -> scheduler workers


# Not frozen: the dispatcher builds 100k of these per second, and frozen dataclasses
# construct five times slower.
@dataclass(slots=True)
class ScheduleRequest(WireBody):
    """One leased pod: schedule it, then publish an Outcome (or a proposal) for `attempt`."""

    tenant: str = field(metadata=wire("tenant", "tenant"))
    pod_key: str = field(metadata=wire("key", "pod-key"))
    uid: str = field(metadata=wire("uid", "uid"))
    attempt: int = field(metadata=wire("attempt", "attempt"))
    """QueuedPodInfo.Attempts after this pop; outcomes must echo it (older ones are stale)."""
    scheduling_cycle: int = field(metadata=wire("cycle"))
    """The tenant queue's scheduling cycle this pop opened (every pop opens one, as upstream)."""
    priority: int = field(default=0, metadata=wire("prio"))
    timestamp: float = field(default=0.0, metadata=wire("ts"))
    """Latest enqueue time, epoch seconds (the PrioritySort tie-break)."""
    initial_attempt_timestamp: float = field(default=0.0, metadata=wire("its"))
    """First enqueue, epoch seconds (e2e latency)."""
    lease_expires_at: float = field(default=0.0, metadata=wire("lease"))
    nominated_node_name: str = field(default="", metadata=wire("nnn"))
    redispatches: int = field(default=0, metadata=wire("redispatches"))
    """How many leases of this pod expired before (a lost worker or message)."""
    pod: bytes = field(default=b"", metadata=wire("pod"))
    """shared.models.codec.encode(pod) as the queue last saw it."""
    fingerprint: str = field(default="", metadata=wire("fp"))
    """pod_fingerprint of that pod, as the queue computed it when it read the pod ("":
    unknown); the worker echoes it in its proposal instead of computing it again."""
    resource_version: int = field(default=0, metadata=wire("rv"))
    """That pod's resourceVersion (0: unknown): a worker whose view holds this very version
    uses its copy instead of decoding `pod`."""

    def decode_pod(self) -> Pod:
        """Decode the pod (MessageError if the bytes are not a Pod)."""
        return decode_pod(self.pod, f"pod {self.pod_key}")


@dataclass(frozen=True, slots=True)
class ScheduleBatch(WireMessage):
    """Schedule requests in queue order (one tenant's pop, or a few tenants' in WRR order)."""

    requests: tuple[ScheduleRequest, ...] = field(metadata=wire("requests"))

    TYPE = "schedule"

    @classmethod
    def encode_raw(cls, count: int, parts: Iterable[bytes]) -> bytes:
        """The payload `encode()` would give for `count` requests already encoded as msgpack
        maps (each with `ScheduleRequest.to_body()`'s fields), whose bytes are the
        concatenation of `parts`: the queue's dispatcher assembles them from pre-encoded
        pieces without building a ScheduleRequest per pod. `decode` reads it like any other.
        """
        return _SCHEDULE_HEAD + array_header(count) + b"".join(parts)


# The fixed start of every ScheduleBatch payload, up to the requests array (`encode_raw`).
_SCHEDULE_HEAD = b"\x83" + b"".join(
    pack_value(x) for x in ("v", SCHEMA_VERSION, "t", ScheduleBatch.TYPE, "requests")
)


# ---------------------------------------------------------------------------------------------
# scheduler workers and binder -> queue


# Not frozen (read-only by convention), as ScheduleRequest: a binder builds one per pod it
# decides on and the queue decodes it; a frozen dataclass's __init__ costs 1.4 µs here
# against 0.3.
@dataclass(slots=True)
class Outcome(BatchedMessage):
    """The end (or a heartbeat) of one scheduling attempt of one pod."""

    tenant: str = field(metadata=wire("tenant", "tenant"))
    pod_key: str = field(metadata=wire("key", "pod-key"))
    uid: str = field(metadata=wire("uid", "uid"))
    attempt: int = field(metadata=wire("attempt", "attempt"))
    result: OutcomeResult = field(metadata=wire("result"))
    unschedulable_plugins: tuple[str, ...] = field(default=(), metadata=wire("plugins"))
    """Plugins that rejected the pod in PreFilter/Filter/Permit (QueuedPodInfo)."""
    pending_plugins: tuple[str, ...] = field(default=(), metadata=wire("pending"))
    """Plugins that returned Pending (upstream PendingPlugins; they wake the pod too)."""
    message: str = field(default="", metadata=wire("msg"))
    """The FitError / status message shown by `berth get pods`."""
    node_name: str = field(default="", metadata=wire("node"))
    """For scheduled: the node the pod was bound to."""
    nominated_node_name: str | None = field(default=None, metadata=wire("nnn"))
    """None: leave the nomination as is; "": clear it; a name: nominate (preemption)."""
    pods_to_activate: tuple[str, ...] = field(default=(), metadata=wire("activate"))
    """Pod keys of the same tenant to Activate (the PodsToActivate cycle-state entry)."""
    lease_seconds: float | None = field(default=None, metadata=wire("lease_s"))
    """For extend: the new lease duration (None: the queue's default)."""

    TYPE = "outcome"
    BATCH = "outcomes"
    """A batch of outcomes in one record (shared.messaging.wire.pack_batch): binders and workers
    send one per partition for the attempts that ended together."""


# ---------------------------------------------------------------------------------------------
# dead letters


class ConsumedRecord(Protocol):
    """What a dead letter keeps of a consumed record (aiokafka's ConsumerRecord has it)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class DeadLetter(WireMessage):
    """A message a service could not use, with where it came from and why."""

    service: str = field(metadata=wire("service"))
    topic: str = field(metadata=wire("topic"))
    partition: int = field(metadata=wire("partition"))
    offset: int = field(metadata=wire("offset"))
    error: str = field(metadata=wire("error"))
    key: bytes | None = field(default=None, metadata=wire("key"))
    payload: bytes = field(default=b"", metadata=wire("payload"))

    TYPE = "dlq"

    @classmethod
    def of_record(
        cls, service: str, record: ConsumedRecord, error: str, payload: bytes | None = None
    ) -> DeadLetter:
        """The dead letter of a consumed Kafka record (its topic, partition, offset, key and
        bytes kept, so it can be inspected or replayed); `payload`: the one bad item of a
        batch record, alone, instead of the record's bytes."""
        return cls(
            service=service,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            error=error,
            key=record.key,
            payload=(record.value or b"") if payload is None else payload,
        )


Message = ScheduleBatch | Outcome | DeadLetter

_DECODERS: dict[str, Callable[[Mapping[str, Any]], Message]] = {
    ScheduleBatch.TYPE: ScheduleBatch.from_body,
    Outcome.TYPE: Outcome.from_body,
    DeadLetter.TYPE: DeadLetter.from_body,
}


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Any berth message; MessageError if undecodable, unknown or invalid."""
    kind, body = unpack(data)
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise MessageError(f"unknown message type {kind!r}")
    return decoder(body)
