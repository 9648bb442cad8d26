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
preempt proposal: services/binder/preempt.py. Outcomes, and the ends of attempts re-sent for
duplicates: services/binder/report.py.

An attempt that ends without a binding is streamed by the store (scripts unreserve, claim,
ended; reserve's conflicts with the node's usage): workers forget their assumptions and stop
waiting on a preemption from their views, not from outcomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from scheduling.cache.cache import ClusterCache
from scheduling.framework.status import Status
from scheduling.plugins import binding, names
from services.binder.checks import Checks, ProfileChecks
from services.binder.config import BinderConfig
from services.binder.gang import GangMonitor
from services.binder.kube_api import KubeWriter
from services.binder.order import CheckOrder
from services.binder.preempt import Preemption
from services.binder.report import CYCLE, Cycle, Emitter, Reporter, pod_group, stored_pod
from services.queue.client import lease_reader
from shared.messaging.kafka import Headers
from shared.messaging.messages import (
    pod_fingerprint,
)
from shared.messaging.proposals import Proposal
from shared.models import Pod, priority_of
from shared.models.evolve import evolve
from shared.observability.logs import DecisionLog
from shared.observability.metrics import BerthMetrics, default_metrics
from shared.observability.tracing import (
    binding_cycle_span,
    binding_step_span,
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

log = logging.getLogger(__name__)


def _scheduled_as(pod: Pod, p: Proposal) -> bool:
    """Whether `pod` is the pod the worker scheduled, as upstream's isPodUpdated sees it:
    the same version, or one that differs in status or metadata bookkeeping only."""
    if p.pod_resource_version and pod.metadata.resource_version == p.pod_resource_version:
        return True
    return not p.pod_fingerprint or pod_fingerprint(pod) == p.pod_fingerprint


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
        self.report = Reporter(
            store, view, self.checks, emitter, self.metrics, self.stats, self.decisions,
            self.redis_gate,
        )  # fmt: skip
        self.preemption = Preemption(
            store, view, self.checks, self.config, self.report, emitter, self.stats,
            self.decisions, kube,
        )  # fmt: skip
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
                cycle = Cycle(span, time.perf_counter())
                CYCLE.set(cycle)
                try:
                    if p.kind == "preempt":
                        self._order.done(ticket)
                        await self.preemption.run(p)
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
                    await self.report.fail(p, exc)
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
            # Proposals for one node make their check-and-reserve calls in arrival order (a
            # turn each, until its call is queued: the batcher keeps that order in Redis);
            # the cross-node check that follows only waits for its turn among all proposals
            # (CheckOrder).
            async with self._node_turn(p.node_name) as turn_over:
                attempt = await self._reserve(p, turn_over)
            if attempt is None:
                return
            reserved = await self._reserved(p, attempt, ticket)
        if reserved is None:
            return
        with binding_step_span("WaitOnPermit"):
            permitted = await self._wait_on_permit(p, reserved, slot)
        if permitted:
            await self._bind(p, reserved)

    async def _reserve(self, p: Proposal, turn_over: Callable[[], None]) -> _Attempt | None:
        """Check-and-reserve; `turn_over` once its first call is queued (the node's next
        proposal may then queue its own: it runs after this one in Redis, while this one's
        reply is on its way). A retry (the node or the pod changed) queues after them."""
        # The view's copy saves a round trip; check-and-reserve verifies its resourceVersion
        # (POD_CHANGED below re-reads the store).
        pod: Pod | None = self.view.pods.get(p.pod_key)
        if pod is None or pod.metadata.uid != p.uid or not _scheduled_as(pod, p):
            pod = await stored_pod(self.store, p)  # the view may be behind: ask the store
        if pod is None:
            await self.report.outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
            return None
        if pod.spec.node_name:
            await self.report.already_bound(p, pod.spec.node_name)
            return None
        if pod.metadata.deletion_timestamp is not None:
            await self.report.outcome(p, "error", message=f"pod {p.pod_key} is being deleted")
            return None
        if not _scheduled_as(pod, p):
            await self.report.final_conflict(p, "the pod changed since it was scheduled")
            return None
        profile = self.checks.for_pod(pod)
        gang, min_member, wait_seconds = "", 0, 0.0
        if p.permit == "wait":
            wait_seconds = p.permit_timeout_seconds
        # A gang only where the pod's profile runs Coscheduling at Permit; elsewhere a
        # labelled pod is an ordinary pod (the reservation's gang "").
        group_key = binding.group_key(pod) if profile.coscheduling is not None else ""
        if group_key:
            group = await pod_group(self.store, self.view, group_key)
            if group is None:
                await self.report.claim_and_report(
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
                await self.report.final_conflict(p, alone.message(), alone.plugin)
                return None
        at_once = alone is not None
        request = self._request(p, pod, profile, gang, min_member, wait_seconds, at_once)
        result: ReserveResult | None = None
        for _ in range(self.config.node_changed_retries + 1):
            pending = self.bindings.submit_reserve(request, self.clock())
            turn_over()
            result = await pending
            if result.status is ReserveStatus.NODE_CHANGED:
                node = await self.store.get_node(p.node_name)
                if node is not None:
                    static = profile.check_node_static(pod, node)
                    if not static.is_success():
                        await self.report.final_conflict(p, static.message(), static.plugin)
                        return None
                    version = node.metadata.resource_version
                    request = evolve(request, node_resource_version=version)
                continue
            if result.status is ReserveStatus.POD_CHANGED:
                fresh = await stored_pod(self.store, p)
                if fresh is None or fresh.spec.node_name:
                    continue  # the next reserve reports gone / bound
                if not _scheduled_as(fresh, p):
                    # The view's copy was the scheduled one; the store's is newer and differs.
                    await self.report.final_conflict(p, "the pod changed since it was scheduled")
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
            await self.report.outcome(p, "scheduled", node=p.node_name)
        elif status is ReserveStatus.CONFLICT:
            # The store streamed the refusal with the node's usage: the worker's view checks
            # itself against it there (scheduling/cache).
            self.stats["conflict"] += 1
            await self.report.outcome(
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
            await self.report.replay(p, result.seen_state, a.pod)
        elif status is ReserveStatus.BOUND:
            await self.report.already_bound(p, result.node)
        elif status is ReserveStatus.GONE:
            await self.report.outcome(p, "error", message=f"pod {p.pod_key} ({p.uid}) not found")
        else:  # the pod or node kept changing under us
            await self.report.final_conflict(
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
            await self.report.outcome(
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
            await self.report.outcome(p, "extend", lease=lease)
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
        await self.report.permit_rejected(p, r.wait_seconds, plugins)
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

    async def _bind(self, p: Proposal, r: _Reserved) -> None:
        # No PreBind span: berth has no volumes or other pre-binding work.
        with binding_step_span("Bind"):
            if self.kube is not None and not await self._api_bind(p, r.node):
                return
            result = await self.bindings.bind(p.pod_key, p.uid, p.attempt, r.node)
        if result.status != "ok":
            self.view.forget(p.uid)
            if result.status == "gone":
                await self.report.outcome(p, "error", message=f"pod {p.pod_key} was deleted")
            else:  # the reservation expired, or a newer attempt or a gang timeout took it
                self.stats["lost"] += 1
                await self.report.outcome(
                    p, "conflict", message="the reservation was lost", conflict="reservation_lost"
                )
            return
        with binding_step_span("PostBind"):
            self.stats["bound"] += 1
            await self.report.outcome(p, "scheduled", node=r.node)

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
        await self.report.outcome(
            p, "conflict" if conflict else "error", message=answer.message, conflict="api"
        )
        return False

    # ------------------------------------------------------------------ lease
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

    @contextlib.asynccontextmanager
    async def _node_turn(self, node: str) -> AsyncIterator[Callable[[], None]]:
        """The node's proposals take turns in arrival order (asyncio locks are fair); a
        turn ends with the block, or earlier when the callable it yields is called. Holding
        it until the reply came made a burst of proposals for one node one round trip each,
        one after the other (with 19 nodes, ~60 ms of waiting per pod in Kueue's baseline)."""
        entry = self._node_locks.get(node)
        if entry is None:
            entry = self._node_locks[node] = (asyncio.Lock(), [0])
        lock, users = entry
        users[0] += 1

        held = False

        def over() -> None:
            nonlocal held
            if held:
                held = False
                lock.release()

        try:
            await lock.acquire()
            held = True
            yield over
        finally:
            over()
            users[0] -= 1
            if users[0] == 0:
                del self._node_locks[node]
