"""`berth.proposals`: what a scheduler worker asks the binder to do (msgpack, like
shared.messaging.wire: ``{"v": SCHEMA_VERSION, "t": "proposal", ...}``, key = node name; workers
send the proposals of one schedule batch as one "proposals" batch per partition, each item routed
by its node's name).

A *bind* proposal carries the node the worker chose after Reserve and Permit, the node's
resourceVersion it saw, and its Permit result. A *preempt* proposal carries the victims the
worker's PostFilter chose and the node to nominate; the binder evicts the victims, records the
nomination and reports the attempt unschedulable (with the nomination), as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from shared.messaging.wire import (
    SCHEMA_VERSION,
    BatchItem,
    batch_items,
    decode_body,
    decode_items,
    encode_body,
    expect_message,
    pack_message,
    wire,
)

ProposalKind = Literal["bind", "preempt"]
PermitCode = Literal["allow", "wait"]
PROPOSAL_KINDS: tuple[str, ...] = get_args(ProposalKind)
PERMIT_CODES: tuple[str, ...] = get_args(PermitCode)


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod the worker's preemption chose to evict."""

    pod_key: str = field(metadata=wire("key", "pod-key"))
    uid: str = field(metadata=wire("uid", "uid"))


@dataclass(frozen=True, slots=True)
class Proposal:
    tenant: str = field(metadata=wire("tenant", "tenant"))
    pod_key: str = field(metadata=wire("key", "pod-key"))
    """namespace/name"""
    uid: str = field(metadata=wire("uid", "uid"))
    attempt: int = field(metadata=wire("attempt", "attempt"))
    """The queue's attempt number (ScheduleRequest.attempt); outcomes echo it."""
    node_name: str = field(metadata=wire("node", "node-name"))
    """bind: the node the worker chose; preempt: the node to nominate."""
    kind: ProposalKind = field(default="bind", metadata=wire("kind"))
    node_resource_version: int = field(default=0, metadata=wire("nrv"))
    """The node's resourceVersion in the worker's snapshot (0: unknown). When the node changed
    since, the binder re-runs NodeAffinity on the current node."""
    pod_fingerprint: str = field(default="", metadata=wire("fp"))
    """shared.messaging.messages.pod_fingerprint of the pod the worker scheduled ("": not checked);
    the binder answers "conflict" when the stored pod's spec differs."""
    pod_resource_version: int = field(default=0, metadata=wire("prv"))
    """The resourceVersion of the pod the worker scheduled (0: unknown). When the binder's
    copy has the same one, it is the same pod and the fingerprint need not be computed."""
    scheduling_cycle: int = field(default=0, metadata=wire("cycle"))
    permit: PermitCode = field(default="allow", metadata=wire("permit"))
    """The worker's Permit result: allow, or wait (a Permit plugin asked to wait)."""
    permit_timeout_seconds: float = field(default=0.0, metadata=wire("permit_s"))
    permit_plugins: tuple[str, ...] = field(default=(), metadata=wire("permit_plugins"))
    """The plugins that asked to wait."""
    victims: tuple[Victim, ...] = field(default=(), metadata=wire("victims"))
    """preempt: the pods to evict."""
    unschedulable_plugins: tuple[str, ...] = field(default=(), metadata=wire("plugins"))
    """preempt: the plugins of the FitError (the attempt's outcome is unschedulable)."""
    message: str = field(default="", metadata=wire("msg"))
    """preempt: the FitError message."""
    pods_to_activate: tuple[str, ...] = field(default=(), metadata=wire("activate"))
    cycle_started: float = field(default=0.0, metadata=wire("t0"))
    """Wall-clock time the worker's scheduling cycle started (scheduling_attempt_duration)."""
    queued_at: float = field(default=0.0, metadata=wire("tq"))
    """Wall-clock time the pod first entered the queue (pod_scheduling_sli_duration)."""
    sequence: int = field(default=0, metadata=wire("seq"))
    """The worker's count of proposals sent: with the record's timestamp, the order the
    worker decided them in (the binder checks them in that order across partitions)."""

    TYPE = "proposal"
    BATCH = "proposals"
    """A batch of proposals in one record (shared.messaging.wire.pack_batch): the worker sends one
    per partition for the pods it decided together."""

    def encode(self) -> bytes:
        return pack_message({"v": SCHEMA_VERSION, "t": self.TYPE, **encode_body(self)})

    def to_body(self) -> dict[str, Any]:
        """The message's fields (without "v" and "t"): a single message's or a batch item's."""
        return encode_body(self)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Proposal:
        return decode_body(cls, body)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Proposal:
        return cls.from_body(expect_message(data, cls.TYPE))

    @classmethod
    def items_of(
        cls, data: bytes | bytearray | memoryview, headers: Sequence[tuple[str, bytes]] = ()
    ) -> list[BatchItem]:
        """The proposals of a record: one, or a batch (see shared.messaging.wire.batch_items)."""
        return batch_items(data, cls.TYPE, cls.BATCH, headers)

    @classmethod
    def decode_all(
        cls, data: bytes | bytearray | memoryview, *, lenient: bool = False
    ) -> list[Proposal]:
        """Every proposal of a record; MessageError if the record or (unless `lenient`:
        then they are skipped) one of them is invalid. For readers that dead-letter nothing
        (tools, tests)."""
        return decode_items(cls.items_of(data), cls.from_body, lenient=lenient)
