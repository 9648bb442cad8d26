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

from dataclasses import dataclass, field
from typing import Literal

from shared.messaging.wire import (
    BatchedMessage,
    WireBody,
    wire,
)

ProposalKind = Literal["bind", "preempt"]
PermitCode = Literal["allow", "wait"]


@dataclass(frozen=True, slots=True)
class Victim(WireBody):
    """A pod the worker's preemption chose to evict."""

    pod_key: str = field(metadata=wire("key", "pod-key"))
    uid: str = field(metadata=wire("uid", "uid"))


# Not frozen (read-only by convention), as ScheduleRequest: one per scheduled pod, built,
# stamped and decoded on the hot path; frozen, its __init__ cost 2.4 µs against 0.4.
@dataclass(slots=True)
class Proposal(BatchedMessage):
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
