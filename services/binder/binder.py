"""The binding cycle, one proposal at a time (any number concurrently).

bind proposal:
  1. check-and-reserve in one Lua script (node exists, schedulable, taints tolerated, resources
     fit counting nominated pods of higher priority, host ports free); proposals for one node
     reserve in arrival order. A pod with no cross-node constraint of its own and no Permit
     wait is bound by that same script while the store counts no pod whose required
     anti-affinity can match its namespace (steps 2-4 would have nothing to do:
     ProfileChecks.check_alone);
  2. re-check the profile's other Filters (NodeAffinity, InterPodAffinity, PodTopologySpread,
     ...: services/binder/checks.py) against the binder's view (which has reached the
     reservation's resourceVersion), then assume the pod in the view;
  3. WaitOnPermit: gangs (pods of a PodGroup, where the pod's profile runs Coscheduling at
     Permit; timeout and minMember from the plugin's `gang_of` and the profile's args) wait
     until minMember are reserved or bound (the store counts them across binders), or time
     out and unreserve the whole generation; a non-gang Wait from the worker waits its
     timeout and fails;
  4. PreBind (nothing in berth), Bind (binding, usage and change-stream entry in one script),
     PostBind: the outcome "scheduled" (the binding itself reaches the queue on the change
     stream).
  Unreserve on any failure after 1.
preempt proposal: claim the attempt, evict the victims through `shared.lifecycle.eviction.evict`
  (PodDisruptionBudget bookkeeping), delete them, nominate the pod, report it unschedulable
  with the nomination.

An attempt that ends without a binding is streamed by the store (scripts unreserve, claim,
ended; reserve's conflicts with the node's usage): workers forget their assumptions and stop
waiting on a preemption from their views, not from outcomes.

Every outcome carries the pod uid and attempt. A duplicate or stale proposal (same pod and
attempt, or an older attempt) changes nothing; a pod is bound at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from opentelemetry.trace import Span

from scheduling.cache.cache import ClusterCache
from scheduling.framework.status import Status
from scheduling.framework.waiting_pods import go_duration
from scheduling.plugins import binding, names
from services.binder.checks import Checks, ProfileChecks
from services.binder.config import BinderConfig
from services.binder.gang import GangMonitor
from services.binder.kube_api import KubeWriter
from services.binder.order import CheckOrder
from services.binder.refusals import victims_refusal
from services.queue.client import lease_reader
from shared.lifecycle.eviction import evict
from shared.messaging.kafka import Headers
from shared.messaging.messages import (
    Outcome,
    OutcomeResult,
    pod_fingerprint,
)
from shared.messaging.proposals import Proposal
from shared.models import Pod, PodDisruptionBudget, PodGroup, priority_of
from shared.models.evolve import evolve
from shared.observability.logs import DecisionLog
from shared.observability.metrics import BerthMetrics, default_metrics
from shared.observability.tracing import (
    add_victim_events,
    binding_cycle_span,
    binding_step_span,
    inject_headers,
    set_result,
)
from shared.runtime.retry import OutageGate, describe, is_outage, is_redis_outage
from shared.runtime.tasks import finish
from shared.store import (
    ClusterStore,
    PodCharge,
    ReserveRequest,
    ReserveResult,
    ReserveStatus,
)
from shared.store.bindings import AttemptState
from shared.store.records import unpack

log = logging.getLogger(__name__)

_REPLAYED_CONFLICTS = {
    "c": "the attempt ended in a conflict",
    "x": "the reservation expired",
}
"""Conflict messages of re-sent outcomes (the original reasons are not kept)."""


def _scheduled_as(pod: Pod, p: Proposal) -> bool:
    """Whether `pod` is the pod the worker scheduled, as upstream's isPodUpdated sees it:
    the same version, or one that differs in status or metadata bookkeeping only."""
    if p.pod_resource_version and pod.metadata.resource_version == p.pod_resource_version:
        return True
    return not p.pod_fingerprint or pod_fingerprint(pod) == p.pod_fingerprint


class Emitter(Protocol):
    """Where the binder's messages go (Kafka in the service). `headers` carry the binding
    cycle's trace context (empty when tracing is off)."""

    async def outcome(self, outcome: Outcome, headers: Headers | None = None) -> None: ...

    async def refused(self, proposal: Proposal, reason: str) -> None:
        """A proposal not obeyed (forged, or stale against the queue): to the dead letters."""


@dataclass(slots=True)
class _Cycle:
    """The proposal a task is handling: its span and start, for the outcome's metrics."""

    span: Span
    started: float
    result: str = ""
    replay: bool = False
    """The outcome re-sends an attempt's end (counted when it first ended)."""


_CYCLE: contextvars.ContextVar[_Cycle | None] = contextvars.ContextVar(
    "binding_cycle", default=None
)


def _mark_replay() -> None:
    cycle = _CYCLE.get()
    if cycle is not None:
        cycle.replay = True


class Slot:
    """One unit of the in-flight bound; released once, when the proposal finishes or starts
    waiting at Permit."""

    __slots__ = ("_held", "_semaphore")

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self._semaphore = semaphore
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._semaphore.release()


@dataclass(frozen=True, slots=True)
class _Attempt:
    """What check-and-reserve answered for a proposal, and what the next steps need."""

    pod: Pod
    profile: ProfileChecks
    result: ReserveResult
    gang: str
    wait_seconds: float


@dataclass(frozen=True, slots=True)
class _Reserved:
    pod: Pod
    node: str
    gang: str
    generation: int
    gang_permitted: bool
    wait_seconds: float
    """How long Permit may hold the pod (0: no wait)."""


class Binder:
    def __init__(
        self,
        store: ClusterStore,
        view: ClusterCache,
        emitter: Emitter,
        config: BinderConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        metrics: BerthMetrics | None = None,
        kube: KubeWriter | None = None,
    ) -> None:
        self.kube = kube
        """Kubernetes mode: bind and evict through the API server (services.binder.kube_api)."""
        self.metrics = metrics if metrics is not None else default_metrics()
        self.decisions = DecisionLog(log)
        """Notable decisions at INFO (preemptions, conflicts), rate limited per kind."""
        self.store = store
        self.bindings = store.bindings
        self.view = view
        self.emitter = emitter
        self.config = config if config is not None else BinderConfig()
        self.clock = clock
        self.checks = Checks(self.config.scheduler_config, view)
        self.holder = view.holder or f"{self.config.service_name}-{uuid.uuid4().hex[:12]}"
        """This binder's id on its reservations (other binders' views count them)."""
        self.gangs = GangMonitor(self.bindings, self.config.gang_poll_seconds)
        self.stats: Counter[str] = Counter()
        self._slots = asyncio.Semaphore(self.config.max_in_flight)
        self._waiting = asyncio.Semaphore(self.config.max_waiting)
        self._active: dict[str, int] = {}
        """pod uid -> the attempt this binder is handling."""
        self._node_locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._order = CheckOrder()
        """Cross-node checks run in submission order (see services.binder.order)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.redis_gate = OutageGate("binder: reaching Redis", log, self.store.redis.ping)
        """Closed while Redis is away: proposals wait at their first Redis call."""
        prefix = self.config.queue_key_prefix
        self._leases = (
            None
            if prefix is None
            else lease_reader(self.store.redis, prefix, self.bindings.batcher)
        )

    # ------------------------------------------------------------------ intake
    async def admit(self) -> Slot:
        """Wait for room under max_in_flight."""
        await self._slots.acquire()
        return Slot(self._slots)

    def submit(
        self, proposal: Proposal, slot: Slot | None = None, headers: Headers | None = None
    ) -> asyncio.Task[None]:
        """Handle `proposal` in its own task (tasks start in submission order, so proposals
        for one node reserve in that order, and every proposal's cross-node check counts the
        proposals submitted before it). `headers`: the record's, for the trace."""
        ticket = self._order.take()
        task = asyncio.create_task(
            self.handle(proposal, slot, headers, ticket), name=f"bind-{proposal.pod_key}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self) -> None:
        """Wait for every submitted proposal to finish."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self, drain_seconds: float = 0.0) -> None:
        """Give in-flight proposals `drain_seconds`, then cancel what is left (a cancelled
        proposal keeps its reservation until it expires or its redelivery adopts it)."""
        if self._tasks and drain_seconds > 0:
            await asyncio.wait(set(self._tasks), timeout=drain_seconds)
        for task in list(self._tasks):
            await finish(task, 0.0)
        await self.gangs.close()
        await self.redis_gate.close()

    async def handle(
        self,
        proposal: Proposal,
        slot: Slot | None = None,
        headers: Headers | None = None,
        ticket: int | None = None,
    ) -> None:
        """The whole binding cycle of one proposal; never raises (errors become outcomes).
        `ticket`: its place in the order of cross-node checks (taken now when None)."""
        p = proposal
        if ticket is None:
            ticket = self._order.take()
        try:
            active = self._active.get(p.uid)
            if active is not None and active >= p.attempt:
                self.stats["duplicate"] += 1
                return
            if await self._lease_refusal(p) is not None:
                return
            self._active[p.uid] = p.attempt
            with binding_cycle_span(p, headers) as span:
                cycle = _Cycle(span, time.perf_counter())
                _CYCLE.set(cycle)
                try:
                    if p.kind == "preempt":
                        self._order.done(ticket)
                        await self._preempt(p)
                    else:
                        await self._bind_cycle(p, slot, ticket)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if is_outage(exc):  # one line each: many fail together
                        log.warning("binding %s failed: %s", p.pod_key, describe(exc))
                        if is_redis_outage(exc):
                            self.redis_gate.trip(exc)
                    else:
                        log.exception("binding %s (attempt %d) failed", p.pod_key, p.attempt)
                    self._order.done(ticket)
                    await self._fail(p, exc)
                finally:
                    if self._active.get(p.uid) == p.attempt:
                        del self._active[p.uid]
                    if cycle.result:
                        elapsed = time.perf_counter() - cycle.started
                        self.metrics.record_binding(cycle.result, elapsed)
        finally:
            self._order.done(ticket)
            if slot is not None:
                slot.release()

    # ------------------------------------------------------------------- bind
    async def _bind_cycle(self, p: Proposal, slot: Slot | None, ticket: int) -> None:
        with binding_step_span("Reserve"):
            # Proposals for one node reserve one at a time, in arrival order; the cross-node
            # check that follows only waits for its turn among all proposals (CheckOrder).
            async with self._node_lock(p.node_name):
                attempt = await self._reserve(p)
            if attempt is None:
                return
            reserved = await self._reserved(p, attempt, ticket)
        if reserved is None:
            return
        with binding_step_span("WaitOnPermit"):
            permitted = await self._wait_on_permit(p, reserved, slot)
        if permitted:
            await self._bind(p, reserved)

    async def _reserve(self, p: Proposal) -> _Attempt | None:
        # The view's copy saves a round trip; check-and-reserve verifies its resourceVersion
        # (POD_CHANGED below re-reads the store).
        pod: Pod | None = self.view.pods.get(p.pod_key)
        if pod is None or pod.metadata.uid != p.uid or not _scheduled_as(pod, p):
            pod = await self._stored_pod(p)  # the view may be behind: ask the store
        if pod is None:
            await self._outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
            return None
        if pod.spec.node_name:
            await self._already_bound(p, pod.spec.node_name)
            return None
        if pod.metadata.deletion_timestamp is not None:
            await self._outcome(p, "error", message=f"pod {p.pod_key} is being deleted")
            return None
        if not _scheduled_as(pod, p):
            await self._final_conflict(p, "the pod changed since it was scheduled")
            return None
        profile = self.checks.for_pod(pod)
        gang, min_member, wait_seconds = "", 0, 0.0
        if p.permit == "wait":
            wait_seconds = p.permit_timeout_seconds
        # A gang only where the pod's profile runs Coscheduling at Permit; elsewhere a
        # labelled pod is an ordinary pod (the reservation's gang "").
        group_key = binding.group_key(pod) if profile.coscheduling is not None else ""
        if group_key:
            group = await self._pod_group(group_key)
            if group is None:
                await self._claim_and_report(
                    p, "e", "unschedulable", f"PodGroup {group_key} not found", names.COSCHEDULING
                )
                return None
            member = binding.gang_of(pod, group, profile.coscheduling)
            gang, min_member, wait_seconds = member.key, member.min_member, member.wait_seconds
        # A pod whose cross-node check would have nothing to check (and that waits at no
        # Permit, outside Kubernetes mode where the API server binds first) may be bound by
        # check-and-reserve itself, which grants it while the store counts no pod whose
        # required anti-affinity can match its namespace: one script and one change instead
        # of two of each.
        alone = None
        if self.kube is None and not gang and p.permit != "wait":
            alone = profile.check_alone(pod, p.node_name, p.node_resource_version)
            if alone is not None and not alone.is_success():
                await self._final_conflict(p, alone.message(), alone.plugin)
                return None
        at_once = alone is not None
        request = self._request(p, pod, profile, gang, min_member, wait_seconds, at_once)
        result: ReserveResult | None = None
        for _ in range(self.config.node_changed_retries + 1):
            result = await self.bindings.reserve(request, self.clock())
            if result.status is ReserveStatus.NODE_CHANGED:
                node = await self.store.get_node(p.node_name)
                if node is not None:
                    static = profile.check_node_static(pod, node)
                    if not static.is_success():
                        await self._final_conflict(p, static.message(), static.plugin)
                        return None
                    version = node.metadata.resource_version
                    request = evolve(request, node_resource_version=version)
                continue
            if result.status is ReserveStatus.POD_CHANGED:
                fresh = await self._stored_pod(p)
                if fresh is None or fresh.spec.node_name:
                    continue  # the next reserve reports gone / bound
                if not _scheduled_as(fresh, p):
                    # The view's copy was the scheduled one; the store's is newer and differs.
                    await self._final_conflict(p, "the pod changed since it was scheduled")
                    return None
                pod = fresh
                node_rv = request.node_resource_version
                request = self._request(p, pod, profile, gang, min_member, wait_seconds, at_once)
                request = evolve(request, node_resource_version=node_rv)
                continue
            break
        assert result is not None
        return _Attempt(pod, profile, result, gang, wait_seconds)

    def _request(
        self,
        p: Proposal,
        pod: Pod,
        profile: ProfileChecks,
        gang: str,
        min_member: int,
        wait_seconds: float,
        bind_at_once: bool,
    ) -> ReserveRequest:
        return ReserveRequest(
            pod_key=p.pod_key,
            uid=p.uid,
            attempt=p.attempt,
            node=p.node_name,
            priority=priority_of(pod),
            charge=PodCharge.of(pod),
            check=profile.fit_check(pod),
            tolerations=pod.spec.tolerations,
            pod_resource_version=pod.metadata.resource_version,
            node_resource_version=p.node_resource_version,
            gang=gang,
            min_member=min_member,
            ttl_seconds=wait_seconds + self.config.reservation_margin_seconds,
            holder=self.holder,
            node_checks=profile.node_checks,
            bind_at_once=bind_at_once,
        )

    async def _reserved(self, p: Proposal, a: _Attempt, ticket: int) -> _Reserved | None:
        result = a.result
        status = result.status
        if status is ReserveStatus.OK:
            at = result.store_resource_version
            return await self._check_cross_node(p, a, ticket, p.node_name, at)
        if status is ReserveStatus.BOUND_AT_ONCE:
            # Nothing to check across nodes, no Permit: bound already. Later cross-node
            # checks of this binder run as of reservations taken after this binding, so
            # their views count it without an assumption.
            self._order.done(ticket)
            self.stats["bound"] += 1
            self.stats["bound_at_once"] += 1
            await self._outcome(p, "scheduled", node=p.node_name)
        elif status is ReserveStatus.CONFLICT:
            # The store streamed the refusal with the node's usage: the worker's view checks
            # itself against it there (scheduling/cache).
            self.stats["conflict"] += 1
            await self._outcome(
                p, "conflict", message=", ".join(result.reasons), conflict="reserve"
            )
        elif status is ReserveStatus.STALE:
            self.stats["stale"] += 1
        elif status is ReserveStatus.DUPLICATE:
            if result.seen_state == "r" and result.node:
                # A reservation nobody here drives (its binder died before committing the
                # proposal, perhaps before its cross-node check): adopt it, check it here,
                # as of when it was taken, then carry on from Permit.
                self.stats["adopted"] += 1
                taken_at = self.view.take_over(a.pod.metadata.uid)
                at = self.view.resource_version if taken_at is None else taken_at
                return await self._check_cross_node(p, a, ticket, result.node, at)
            await self._replay(p, result.seen_state, a.pod)
        elif status is ReserveStatus.BOUND:
            await self._already_bound(p, result.node)
        elif status is ReserveStatus.GONE:
            await self._outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
        else:  # the pod or node kept changing under us
            await self._final_conflict(
                p, f"the {status.value.split('_')[0]} kept changing", conflict="kept_changing"
            )
        return None

    async def _check_cross_node(
        self, p: Proposal, a: _Attempt, ticket: int, node: str, reserved_at: int
    ) -> _Reserved | None:
        """InterPodAffinity and PodTopologySpread for the pod reserved on `node` at
        `reserved_at` (the reservation's resourceVersion)."""
        # Every binding committed, and every reservation other binders took, before this
        # reservation is in the view once it reaches the reservation's resourceVersion
        # (`as_of` leaves out the reservations taken after it); every proposal submitted to
        # this binder before this one has been checked (and assumed in the view if it
        # passed) once it is our turn.
        caught_up = await self.view.wait_for(reserved_at, self.config.view_timeout_seconds)
        await self._order.turn(ticket)
        if caught_up:
            with self.view.as_of(reserved_at):
                status = a.profile.check_cross_node(a.pod, node)
        else:
            status = Status.error("the binder's view of the cluster is behind")
        if status.is_success():
            # No await between the check and this: the next check counts this pod.
            self.view.assume(a.pod, node)
        self._order.done(ticket)
        if not status.is_success():
            await self.bindings.unreserve(p.pod_key, p.uid, p.attempt, "c")
            self.stats["conflict"] += 1
            plugins = (status.plugin,) if status.plugin else ()
            await self._outcome(
                p, "conflict", message=status.message(), plugins=plugins, conflict="cross_node"
            )
            return None
        result = a.result
        permitted = result.gang == "permit"
        if permitted:
            self.gangs.note(a.gang, result.gang_generation, "p")
        return _Reserved(a.pod, node, a.gang, result.gang_generation, permitted, a.wait_seconds)

    async def _wait_on_permit(self, p: Proposal, r: _Reserved, slot: Slot | None) -> bool:
        """True when the pod may bind; otherwise it was unreserved and reported."""
        if r.gang and r.gang_permitted:
            return True
        if not r.gang and p.permit != "wait":
            return True
        if slot is not None:
            slot.release()  # waiting pods do not hold an in-flight slot
        async with self._waiting:
            lease = r.wait_seconds + self.config.lease_margin_seconds
            await self._outcome(p, "extend", lease=lease)
            waiting_since = time.perf_counter()
            allowed = await self._permit_verdict(p, r)
            waited = time.perf_counter() - waiting_since
            self.metrics.permit_wait_duration.labels(
                result="Success" if allowed else "Unschedulable"
            ).observe(waited)
            if allowed:
                return True
            plugins: Sequence[str] = (names.COSCHEDULING,) if r.gang else p.permit_plugins
        await self.bindings.unreserve(p.pod_key, p.uid, p.attempt, "u")
        self.view.forget(p.uid)
        self.stats["permit_rejected"] += 1
        await self._permit_rejected(p, r.wait_seconds, plugins)
        return False

    async def _permit_verdict(self, p: Proposal, r: _Reserved) -> bool:
        """WaitOnPermit: True when the gang was permitted in time (a pod alone waits out its
        timeout: nothing in the binder allows it)."""
        if not r.gang:
            await asyncio.sleep(r.wait_seconds)
            return False
        deadline = asyncio.get_running_loop().time() + r.wait_seconds
        verdict = await self.gangs.wait(r.gang, r.generation, deadline)
        if verdict == "timeout":
            rejected = await self.bindings.gang_reject(r.gang, r.generation)
            verdict = "permit" if rejected.status == "permitted" else "rejected"
        return verdict == "permit"

    async def _permit_rejected(
        self, p: Proposal, wait_seconds: float, plugins: Sequence[str]
    ) -> None:
        waited = go_duration(wait_seconds)  # upstream reports the plugin's timeout
        plugin = plugins[0] if plugins else ""
        await self._outcome(
            p,
            "unschedulable",
            message=f"rejected due to timeout after waiting {waited} at plugin {plugin}",
            plugins=tuple(plugins),
        )

    async def _bind(self, p: Proposal, r: _Reserved) -> None:
        # No PreBind span: berth has no volumes or other pre-binding work.
        with binding_step_span("Bind"):
            if self.kube is not None and not await self._api_bind(p, r.node):
                return
            result = await self.bindings.bind(p.pod_key, p.uid, p.attempt, r.node)
        if result.status != "ok":
            self.view.forget(p.uid)
            if result.status == "gone":
                await self._outcome(p, "error", message=f"pod {p.pod_key} was deleted")
            else:  # the reservation expired, or a newer attempt or a gang timeout took it
                self.stats["lost"] += 1
                await self._outcome(
                    p, "conflict", message="the reservation was lost", conflict="reservation_lost"
                )
            return
        with binding_step_span("PostBind"):
            self.stats["bound"] += 1
            await self._outcome(p, "scheduled", node=r.node)

    async def _api_bind(self, p: Proposal, node: str) -> bool:
        """Kubernetes mode: POST pods/binding first; a refusal gives the node back."""
        assert self.kube is not None
        answer = await self.kube.bind(p.pod_key, p.uid, node)
        if answer.result == "ok":
            return True
        self.view.forget(p.uid)
        conflict = answer.result == "conflict"
        await self.bindings.unreserve(p.pod_key, p.uid, p.attempt, "c" if conflict else "e")
        self.stats["api_" + answer.result] += 1
        await self._outcome(
            p, "conflict" if conflict else "error", message=answer.message, conflict="api"
        )
        return False

    # ---------------------------------------------------------------- preempt
    async def _lease_refusal(self, p: Proposal) -> str | None:
        """Why the queue's lease does not cover this proposal (None: it does; see
        services/binder/refusals.py). A refusal is dead-lettered."""
        leases = self._leases
        if leases is None:
            return None
        # The proposal's first Redis call: while Redis is away it waits here (nothing done
        # yet, nothing to undo) rather than fail and cost its pod a backoff.
        verdict = await self.redis_gate.call(lambda: leases.verdict(p))
        if verdict.kind == "ok":
            return None
        if verdict.kind == "stale":
            self.stats["stale"] += 1
            return verdict.reason
        self.stats["refused"] += 1
        log.warning("refused %s proposal for %s: %s", p.kind, p.pod_key, verdict.reason)
        await self.emitter.refused(p, verdict.reason)
        return verdict.reason

    async def _preempt(self, p: Proposal) -> None:
        pod = await self._stored_pod(p)
        if pod is None:
            await self._outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
            return
        victims: list[Pod] = []
        for victim_ref in p.victims:
            namespace, name = victim_ref.pod_key.split("/", 1)
            victim = await self.store.get_pod(namespace, name)
            if victim is not None and victim.metadata.uid == victim_ref.uid:
                victims.append(victim)  # the others are gone already
        refusal = victims_refusal(p, pod, victims)
        if refusal:
            self.stats["refused"] += 1
            log.warning("refused preemption for %s: %s", p.pod_key, refusal)
            await self.emitter.refused(p, refusal)
            # Forged or a duplicate of one that ended: no worker waits on it, nothing is
            # written.
            message = f"preemption refused: {refusal}"
            _mark_replay()  # not an attempt's end: counted (if ever) when it ended
            await self._outcome(p, "error", message=message, stream_end=False)
            return
        unjustified = await self._unjustified(p, pod, victims)
        if unjustified:
            self.stats["unjustified"] += 1
            log.warning("refused preemption for %s: %s", p.pod_key, unjustified)
            await self.emitter.refused(p, unjustified)
            # Perhaps only stale (the cluster changed since the worker looked): the pod
            # tries again after a backoff, and the worker waiting on it stops waiting.
            await self._outcome(p, "error", message=f"preemption refused: {unjustified}")
            return
        status, _, seen = await self.bindings.claim(p.uid, p.attempt, "p")
        if status == "stale":
            self.stats["stale"] += 1
            return
        if status == "dup":
            if seen != "p":
                await self._replay(p, seen)
                return
            # Claimed by a binder that may have died half-way: evicting the victims left,
            # nominating and reporting are idempotent, so do it all again.
            self.stats["duplicate"] += 1
        pods = self.view.bound_pods()
        pdbs: dict[str, PodDisruptionBudget] = dict(self.view.pdbs)
        evicted = 0
        if self.kube is not None:
            stopped = await self._api_evict(p, pod, victims)
            if stopped is not None:
                await self._outcome(
                    p, "unschedulable", message=stopped, plugins=p.unschedulable_plugins
                )
                return
            victims = []  # the adapter deletes them from the store once the server has
        for victim in victims:
            namespace, name = victim.metadata.namespace, victim.metadata.name
            answer = evict(victim, list(pdbs.values()), pods)
            if not answer.allowed:
                if self.config.preemption_honors_pdb:
                    await self._outcome(
                        p,
                        "unschedulable",
                        message=f"preemption stopped: {victim.key}: {answer.message}",
                        plugins=p.unschedulable_plugins,
                    )
                    return
                log.info("preempting %s despite its budget: %s", victim.key, answer.message)
            elif answer.pdb is not None and answer.status is not None:
                budget = replace(answer.pdb, status=answer.status)
                await self.store.apply([budget])
                pdbs[budget.key] = budget
            uid = victim.metadata.uid
            if await self.store.delete("Pod", namespace, name, uid=uid) is None:
                continue
            evicted += 1
            pods = [q for q in pods if q.metadata.uid != uid]
        await self.bindings.nominate(
            p.pod_key, p.uid, p.node_name, priority_of(pod), PodCharge.of(pod)
        )
        await self._clear_lower_nominations(p, priority_of(pod))
        self.stats["preempted"] += evicted
        cycle = _CYCLE.get()
        if cycle is not None:
            evicted_refs = [(v.pod_key, v.uid) for v in p.victims]
            add_victim_events(cycle.span, evicted_refs, p.node_name)
        self.decisions.info(
            "preemption",
            "preempted %d pod(s) on %s for %s: %s",
            len(p.victims),
            p.node_name,
            p.pod_key,
            ", ".join(v.pod_key for v in p.victims),
            pod=p.pod_key,
            node=p.node_name,
            victims=[v.pod_key for v in p.victims],
        )
        await self._outcome(
            p,
            "unschedulable",
            message=p.message,
            plugins=p.unschedulable_plugins,
            nominated=p.node_name,
        )

    async def _unjustified(self, p: Proposal, pod: Pod, victims: Sequence[Pod]) -> str:
        """Why this binder's own view, caught up with the store, does not call for evicting
        `victims` for `pod` ("" when it does; see checks.ProfileChecks.preemption_refusal)."""
        target = await self.store.resource_version()
        if not await self.view.wait_for(target, self.config.view_timeout_seconds):
            return "the binder's view of the cluster is behind"
        profile = self.checks.for_pod(pod)
        return profile.preemption_refusal(pod, p.node_name, victims)

    async def _api_evict(self, p: Proposal, pod: Pod, victims: Sequence[Pod]) -> str | None:
        """Kubernetes mode: evict each victim through the API (PodDisruptionBudgets are the
        server's to enforce). Returns why preemption stopped, or None."""
        assert self.kube is not None
        for victim in victims:
            answer = await self.kube.evict(victim, pod, p.node_name)
            if answer.result != "ok":
                return f"preemption stopped: {victim.key}: {answer.message}"
            self.stats["preempted"] += 1
        return None

    async def _clear_lower_nominations(self, p: Proposal, priority: int) -> None:
        """Pods of lower priority nominated to the node the preemptor took lose their
        nomination, so they look elsewhere (upstream prepareCandidate; the dry run does the
        same)."""
        keys = self.store.keys
        nominated = await self.store.redis.hgetall(keys.nominated(p.node_name))
        for raw_key, raw_record in nominated.items():
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            record = raw_record if isinstance(raw_record, bytes) else raw_record.encode()
            if key == p.pod_key or not binding.loses_nomination(
                unpack(record).get("prio", 0), priority
            ):
                continue
            meta = await self.store.redis.hget(keys.meta("Pod"), key)
            if meta is None:
                continue
            uid = (meta.decode() if isinstance(meta, bytes) else str(meta)).partition(" ")[2]
            await self.bindings.nominate(key, uid, "", 0, PodCharge())
            self.stats["nominations_cleared"] += 1

    # ---------------------------------------------------------------- helpers
    async def _already_bound(self, p: Proposal, node: str) -> None:
        """A proposal for a bound pod: report the binding unless the attempt is stale."""
        seen = await self.bindings.attempt_of(p.uid)
        if seen is not None and seen[0] > p.attempt:
            self.stats["stale"] += 1
            return
        self.stats["duplicate"] += 1
        _mark_replay()
        await self._outcome(p, "scheduled", node=node)

    async def _stored_pod(self, p: Proposal) -> Pod | None:
        namespace, name = p.pod_key.split("/", 1)
        pod = await self.store.get_pod(namespace, name)
        if pod is None or pod.metadata.uid != p.uid:
            return None
        return pod

    async def _pod_group(self, key: str) -> PodGroup | None:
        group = self.view.pod_groups.get(key)
        if group is not None:
            return group
        namespace, name = key.split("/", 1)
        return await self.store.get_as(PodGroup, namespace, name)

    async def _final_conflict(
        self, p: Proposal, message: str, plugin: str = "", *, conflict: str = "kept_changing"
    ) -> None:
        await self._claim_and_report(p, "c", "conflict", message, plugin, conflict=conflict)

    async def _claim_and_report(
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
            await self._replay(p, seen)
            return
        if result == "conflict":
            self.stats["conflict"] += 1
        await self._outcome(
            p, result, message=message, plugins=(plugin,) if plugin else (), conflict=conflict
        )

    async def _replay(self, p: Proposal, state: str, pod: Pod | None = None) -> None:
        """A duplicate of an attempt that ended already: send its outcome again. The binder
        that ended it may have died before reporting (the queue would wait for the pod's
        lease); if it did report, the queue drops this copy as stale."""
        self.stats["duplicate"] += 1
        self.stats["replayed"] += 1
        _mark_replay()
        if state == "b":
            node = await self.bindings.bound_node(p.pod_key)
            if node:
                await self._outcome(p, "scheduled", node=node)
        elif state == "u":
            await self._replay_permit_rejection(p, pod)
        elif state == "p":
            await self._outcome(
                p,
                "unschedulable",
                message=p.message,
                plugins=p.unschedulable_plugins,
                nominated=p.node_name,
            )
        elif state == "e":
            await self._outcome(p, "error", message="binder: the attempt failed")
        else:
            reason = _REPLAYED_CONFLICTS.get(state, "the reservation was lost")
            await self._outcome(p, "conflict", message=reason)

    async def _replay_permit_rejection(self, p: Proposal, pod: Pod | None) -> None:
        if pod is None:
            pod = self.view.pods.get(p.pod_key) or await self._stored_pod(p)
        args = self.checks.for_pod(pod).coscheduling if pod is not None else None
        group_key = binding.group_key(pod) if pod is not None and args is not None else ""
        if not group_key:
            await self._permit_rejected(p, p.permit_timeout_seconds, p.permit_plugins)
            return
        group = await self._pod_group(group_key)
        wait_seconds = binding.wait_seconds(group, args)
        await self._permit_rejected(p, wait_seconds, (names.COSCHEDULING,))

    async def _fail(self, p: Proposal, exc: BaseException) -> None:
        # While Redis is away the reservation would stay (charging its node) until its ttl:
        # release it once Redis answers again.
        with contextlib.suppress(Exception):
            await self.redis_gate.call(
                lambda: self.bindings.unreserve(p.pod_key, p.uid, p.attempt, "e")
            )
        self.view.forget(p.uid)
        self.stats["error"] += 1
        with contextlib.suppress(Exception):
            await self._outcome(p, "error", message=f"binder: {type(exc).__name__}: {exc}")

    async def _outcome(
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
        cycle = _CYCLE.get()
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

    @contextlib.asynccontextmanager
    async def _node_lock(self, node: str) -> AsyncIterator[None]:
        """Proposals for one node reserve one at a time, in arrival order (asyncio locks
        are fair)."""
        entry = self._node_locks.get(node)
        if entry is None:
            entry = self._node_locks[node] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if users[0] == 0:
                del self._node_locks[node]
