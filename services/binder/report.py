"""How a binding attempt ends: its outcome to the queue (with the cycle's span result and
kube-scheduler's attempt metrics), the end recorded in the store so duplicates are dropped,
and the outcome re-sent for a duplicate of an attempt that ended already.

Every outcome carries the pod uid and attempt. A duplicate or stale proposal (same pod and
attempt, or an older attempt) changes nothing; a pod is bound at most once.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from opentelemetry.trace import Span

from scheduling.cache.cache import ClusterCache
from scheduling.framework.waiting_pods import go_duration
from scheduling.plugins import binding, names
from services.binder.checks import Checks
from shared.messaging.kafka import Headers
from shared.messaging.messages import Outcome, OutcomeResult
from shared.messaging.proposals import Proposal
from shared.models import Pod, PodGroup
from shared.observability.logs import DecisionLog
from shared.observability.metrics import BerthMetrics
from shared.observability.tracing import inject_headers, set_result
from shared.runtime.retry import OutageGate
from shared.store import ClusterStore
from shared.store.bindings import AttemptState, Bindings

_REPLAYED_CONFLICTS = {
    "c": "the attempt ended in a conflict",
    "x": "the reservation expired",
}
"""Conflict messages of re-sent outcomes (the original reasons are not kept)."""


class Emitter(Protocol):
    """Where the binder's messages go (Kafka in the service). `headers` carry the binding
    cycle's trace context (empty when tracing is off)."""

    async def outcome(self, outcome: Outcome, headers: Headers | None = None) -> None: ...

    async def refused(self, proposal: Proposal, reason: str) -> None:
        """A proposal not obeyed (forged, or stale against the queue): to the dead letters."""


@dataclass(slots=True)
class Cycle:
    """The proposal a task is handling: its span and start, for the outcome's metrics."""

    span: Span
    started: float
    result: str = ""
    replay: bool = False
    """The outcome re-sends an attempt's end (counted when it first ended)."""


CYCLE: contextvars.ContextVar[Cycle | None] = contextvars.ContextVar("binding_cycle", default=None)
"""The binding cycle of the running task (set by Binder.handle)."""


def mark_replay() -> None:
    """The running cycle's outcome re-sends an end: not an attempt of its own."""
    cycle = CYCLE.get()
    if cycle is not None:
        cycle.replay = True


async def stored_pod(store: ClusterStore, p: Proposal) -> Pod | None:
    """The store's copy of the proposal's pod (None: gone, or another pod of that name)."""
    namespace, name = p.pod_key.split("/", 1)
    pod = await store.get_pod(namespace, name)
    if pod is None or pod.metadata.uid != p.uid:
        return None
    return pod


async def pod_group(store: ClusterStore, view: ClusterCache, key: str) -> PodGroup | None:
    """A PodGroup from the view, else the store."""
    group = view.pod_groups.get(key)
    if group is not None:
        return group
    namespace, name = key.split("/", 1)
    return await store.get_as(PodGroup, namespace, name)


class Reporter:
    """The binder's outcomes: one per attempt's end, re-sent for duplicates."""

    def __init__(
        self,
        store: ClusterStore,
        view: ClusterCache,
        checks: Checks,
        emitter: Emitter,
        metrics: BerthMetrics,
        stats: Counter[str],
        decisions: DecisionLog,
        redis_gate: OutageGate,
    ) -> None:
        self.store = store
        self.bindings: Bindings = store.bindings
        self.view = view
        self.checks = checks
        self.emitter = emitter
        self.metrics = metrics
        self.stats = stats
        self.redis_gate = redis_gate
        self.decisions = decisions

    async def already_bound(self, p: Proposal, node: str) -> None:
        """A proposal for a bound pod: report the binding unless the attempt is stale."""
        seen = await self.bindings.attempt_of(p.uid)
        if seen is not None and seen[0] > p.attempt:
            self.stats["stale"] += 1
            return
        self.stats["duplicate"] += 1
        mark_replay()
        await self.outcome(p, "scheduled", node=node)

    async def final_conflict(
        self, p: Proposal, message: str, plugin: str = "", *, conflict: str = "kept_changing"
    ) -> None:
        await self.claim_and_report(p, "c", "conflict", message, plugin, conflict=conflict)

    async def claim_and_report(
        self,
        p: Proposal,
        state: AttemptState,
        result: OutcomeResult,
        message: str,
        plugin: str,
        *,
        conflict: str = "kept_changing",
    ) -> None:
        """Record the attempt's end (so duplicates are dropped) and report it."""
        claimed, _, seen = await self.bindings.claim(p.uid, p.attempt, state, p.pod_key)
        if claimed == "stale":
            return
        if claimed == "dup" and seen == "r":
            # A reservation of this attempt that a binder which died left behind.
            await self.bindings.unreserve(p.pod_key, p.uid, p.attempt, state)
        elif claimed == "dup" and seen != state:
            await self.replay(p, seen)
            return
        if result == "conflict":
            self.stats["conflict"] += 1
        await self.outcome(
            p, result, message=message, plugins=(plugin,) if plugin else (), conflict=conflict
        )

    async def replay(self, p: Proposal, state: str, pod: Pod | None = None) -> None:
        """A duplicate of an attempt that ended already: send its outcome again. The binder
        that ended it may have died before reporting (the queue would wait for the pod's
        lease); if it did report, the queue drops this copy as stale."""
        self.stats["duplicate"] += 1
        self.stats["replayed"] += 1
        mark_replay()
        if state == "b":
            node = await self.bindings.bound_node(p.pod_key)
            if node:
                await self.outcome(p, "scheduled", node=node)
        elif state == "u":
            await self._replay_permit_rejection(p, pod)
        elif state == "p":
            await self.outcome(
                p,
                "unschedulable",
                message=p.message,
                plugins=p.unschedulable_plugins,
                nominated=p.node_name,
            )
        elif state == "e":
            await self.outcome(p, "error", message="binder: the attempt failed")
        else:
            reason = _REPLAYED_CONFLICTS.get(state, "the reservation was lost")
            await self.outcome(p, "conflict", message=reason)

    async def _replay_permit_rejection(self, p: Proposal, pod: Pod | None) -> None:
        if pod is None:
            pod = self.view.pods.get(p.pod_key) or await stored_pod(self.store, p)
        args = self.checks.for_pod(pod).coscheduling if pod is not None else None
        group_key = binding.group_key(pod) if pod is not None and args is not None else ""
        if not group_key:
            await self.permit_rejected(p, p.permit_timeout_seconds, p.permit_plugins)
            return
        group = await pod_group(self.store, self.view, group_key)
        wait_seconds = binding.wait_seconds(group, args)
        await self.permit_rejected(p, wait_seconds, (names.COSCHEDULING,))

    async def permit_rejected(
        self, p: Proposal, wait_seconds: float, plugins: Sequence[str]
    ) -> None:
        waited = go_duration(wait_seconds)  # upstream reports the plugin's timeout
        plugin = plugins[0] if plugins else ""
        await self.outcome(
            p,
            "unschedulable",
            message=f"rejected due to timeout after waiting {waited} at plugin {plugin}",
            plugins=tuple(plugins),
        )

    async def fail(self, p: Proposal, exc: BaseException) -> None:
        # While Redis is away the reservation would stay (charging its node) until its ttl:
        # release it once Redis answers again.
        with contextlib.suppress(Exception):
            await self.redis_gate.call(
                lambda: self.bindings.unreserve(p.pod_key, p.uid, p.attempt, "e")
            )
        self.view.forget(p.uid)
        self.stats["error"] += 1
        with contextlib.suppress(Exception):
            await self.outcome(p, "error", message=f"binder: {type(exc).__name__}: {exc}")

    async def outcome(
        self,
        p: Proposal,
        result: OutcomeResult,
        *,
        node: str = "",
        message: str = "",
        plugins: Sequence[str] = (),
        nominated: str | None = None,
        lease: float | None = None,
        stream_end: bool = True,
        conflict: str = "reserve",
    ) -> None:
        if p.kind == "preempt" and result != "extend" and stream_end:
            # Streamed first: the worker that proposed it waits for its victims' deletion
            # or for this (refused, stopped, or done with victims the API server deletes).
            await self.bindings.ended(p.pod_key, p.uid, p.attempt)
        cycle = CYCLE.get()
        if cycle is not None and result != "extend":
            cycle.result = result
            set_result(cycle.span, result, node_name=node, message=message, plugins=plugins)
            if not cycle.replay:
                self._count_attempt(p, result, conflict)
        await self.emitter.outcome(
            Outcome(
                tenant=p.tenant,
                pod_key=p.pod_key,
                uid=p.uid,
                attempt=p.attempt,
                result=result,
                unschedulable_plugins=tuple(plugins),
                message=message,
                node_name=node,
                nominated_node_name=nominated,
                pods_to_activate=p.pods_to_activate if result != "extend" else (),
                lease_seconds=lease,
            ),
            inject_headers(),
        )

    def _count_attempt(self, p: Proposal, result: OutcomeResult, conflict: str) -> None:
        """kube-scheduler's attempt metrics for the attempt this outcome ends (a preempting
        attempt is unschedulable, as upstream counts it)."""
        now = time.time()
        seconds = now - p.cycle_started if p.cycle_started else None
        self.metrics.record_attempt(result, seconds)
        if result == "conflict":
            self.metrics.conflict(conflict)
            self.decisions.info(
                "conflict",
                "conflict: %s on %s (%s)",
                p.pod_key,
                p.node_name,
                conflict,
                pod=p.pod_key,
                node=p.node_name,
                reason=conflict,
            )
        elif result == "scheduled":
            self.metrics.record_scheduled(p.attempt, now - p.queued_at if p.queued_at else None)
