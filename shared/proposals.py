"""`berth.proposals`: what a scheduler worker asks the binder to do (msgpack, like
shared.wire: ``{"v": SCHEMA_VERSION, "t": "proposal", ...}``, key = node name; workers send
the proposals of one schedule batch as one "proposals" batch per partition, each item routed
by its node's name).

A *bind* proposal carries the node the worker chose after Reserve and Permit, the node's
resourceVersion it saw, and its Permit result. A *preempt* proposal carries the victims the
worker's PostFilter chose and the node to nominate; the binder evicts the victims, records the
nomination and reports the attempt unschedulable (with the nomination), as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import msgpack

from shared.models.names import dns1123_subdomain
from shared.wire import (
    SCHEMA_VERSION,
    BatchItem,
    MessageError,
    attempt_field,
    batch_items,
    choice_field,
    decode_items,
    need_field,
    opt_field,
    pod_key_field,
    strings_field,
    tenant_field,
    uid_field,
    unpack,
)

ProposalKind = Literal["bind", "preempt"]
PermitCode = Literal["allow", "wait"]
PROPOSAL_KINDS: tuple[str, ...] = get_args(ProposalKind)
PERMIT_CODES: tuple[str, ...] = get_args(PermitCode)


@dataclass(frozen=True, slots=True)
class Victim:
    """A pod the worker's preemption chose to evict."""

    pod_key: str
    uid: str


@dataclass(frozen=True, slots=True)
class Proposal:
    tenant: str
    pod_key: str
    """namespace/name"""
    uid: str
    attempt: int
    """The queue's attempt number (ScheduleRequest.attempt); outcomes echo it."""
    node_name: str
    """bind: the node the worker chose; preempt: the node to nominate."""
    kind: ProposalKind = "bind"
    node_resource_version: int = 0
    """The node's resourceVersion in the worker's snapshot (0: unknown). When the node changed
    since, the binder re-runs NodeAffinity on the current node."""
    pod_fingerprint: str = ""
    """shared.messages.pod_fingerprint of the pod the worker scheduled ("": not checked); the
    binder answers "conflict" when the stored pod's spec differs."""
    pod_resource_version: int = 0
    """The resourceVersion of the pod the worker scheduled (0: unknown). When the binder's
    copy has the same one, it is the same pod and the fingerprint need not be computed."""
    scheduling_cycle: int = 0
    permit: PermitCode = "allow"
    """The worker's Permit result: allow, or wait (a Permit plugin asked to wait)."""
    permit_timeout_seconds: float = 0.0
    permit_plugins: tuple[str, ...] = ()
    """The plugins that asked to wait."""
    victims: tuple[Victim, ...] = ()
    """preempt: the pods to evict."""
    unschedulable_plugins: tuple[str, ...] = ()
    """preempt: the plugins of the FitError (the attempt's outcome is unschedulable)."""
    message: str = ""
    """preempt: the FitError message."""
    pods_to_activate: tuple[str, ...] = ()
    cycle_started: float = 0.0
    """Wall-clock time the worker's scheduling cycle started (scheduling_attempt_duration)."""
    queued_at: float = 0.0
    """Wall-clock time the pod first entered the queue (pod_scheduling_sli_duration)."""
    sequence: int = 0
    """The worker's count of proposals sent: with the record's timestamp, the order the
    worker decided them in (the binder checks them in that order across partitions)."""

    TYPE = "proposal"
    BATCH = "proposals"
    """A batch of proposals in one record (shared.wire.pack_batch): the worker sends one per
    partition for the pods it decided together."""

    def encode(self) -> bytes:
        return cast(
            bytes,
            msgpack.packb(
                {"v": SCHEMA_VERSION, "t": self.TYPE, **self.to_body()}, use_bin_type=True
            ),
        )

    def to_body(self) -> dict[str, Any]:
        """The message's fields (without "v" and "t"): a single message's or a batch item's."""
        body: dict[str, Any] = {
            "tenant": self.tenant,
            "key": self.pod_key,
            "uid": self.uid,
            "attempt": self.attempt,
            "node": self.node_name,
            "kind": self.kind,
        }
        if self.node_resource_version:
            body["nrv"] = self.node_resource_version
        if self.pod_fingerprint:
            body["fp"] = self.pod_fingerprint
        if self.pod_resource_version:
            body["prv"] = self.pod_resource_version
        if self.scheduling_cycle:
            body["cycle"] = self.scheduling_cycle
        if self.permit != "allow":
            body["permit"] = self.permit
            body["permit_s"] = self.permit_timeout_seconds
            body["permit_plugins"] = list(self.permit_plugins)
        if self.victims:
            body["victims"] = [{"key": v.pod_key, "uid": v.uid} for v in self.victims]
        if self.unschedulable_plugins:
            body["plugins"] = list(self.unschedulable_plugins)
        if self.message:
            body["msg"] = self.message
        if self.pods_to_activate:
            body["activate"] = list(self.pods_to_activate)
        if self.sequence:
            body["seq"] = self.sequence
        if self.cycle_started:
            body["t0"] = self.cycle_started
        if self.queued_at:
            body["tq"] = self.queued_at
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Proposal:
        attempt = attempt_field(body)
        node = need_field(body, "node", str)
        if dns1123_subdomain(node):
            raise MessageError(f"field 'node': {node!r:.80} is not a node name")
        key = pod_key_field(body)
        victims = []
        for index, item in enumerate(opt_field(body, "victims", list, [])):
            if not isinstance(item, dict):
                raise MessageError(f"victims[{index}]: expected a map")
            try:
                victims.append(Victim(pod_key_field(item), uid_field(item)))
            except MessageError as e:
                raise MessageError(f"victims[{index}]: {e}") from None
        return cls(
            tenant=tenant_field(body),
            pod_key=key,
            uid=uid_field(body),
            attempt=attempt,
            node_name=node,
            kind=choice_field(body, "kind", PROPOSAL_KINDS, "bind"),
            node_resource_version=opt_field(body, "nrv", int, 0),
            pod_fingerprint=opt_field(body, "fp", str, ""),
            pod_resource_version=opt_field(body, "prv", int, 0),
            scheduling_cycle=opt_field(body, "cycle", int, 0),
            permit=choice_field(body, "permit", PERMIT_CODES, "allow"),
            permit_timeout_seconds=float(opt_field(body, "permit_s", (int, float), 0.0)),
            permit_plugins=strings_field(body, "permit_plugins"),
            victims=tuple(victims),
            unschedulable_plugins=strings_field(body, "plugins"),
            message=opt_field(body, "msg", str, ""),
            pods_to_activate=strings_field(body, "activate"),
            sequence=opt_field(body, "seq", int, 0),
            cycle_started=float(opt_field(body, "t0", (int, float), 0.0)),
            queued_at=float(opt_field(body, "tq", (int, float), 0.0)),
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Proposal:
        kind, body = unpack(data)
        if kind != cls.TYPE:
            raise MessageError(f"expected a {cls.TYPE!r} message, got {kind!r}")
        return cls.from_body(body)

    @classmethod
    def items_of(
        cls, data: bytes | bytearray | memoryview, headers: Sequence[tuple[str, bytes]] = ()
    ) -> list[BatchItem]:
        """The proposals of a record: one, or a batch (see shared.wire.batch_items)."""
        return batch_items(data, cls.TYPE, cls.BATCH, headers)

    @classmethod
    def decode_all(
        cls, data: bytes | bytearray | memoryview, *, lenient: bool = False
    ) -> list[Proposal]:
        """Every proposal of a record; MessageError if the record or (unless `lenient`:
        then they are skipped) one of them is invalid. For readers that dead-letter nothing
        (tools, tests)."""
        return decode_items(cls.items_of(data), cls.from_body, lenient=lenient)
