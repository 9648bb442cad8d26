"""The node agent: KWOK's pod stages, node heartbeats, the node lifecycle controller and the
taint eviction controller, for the nodes this replica owns (services/agent/partition.py).

One loop follows the store's change stream into an `AgentView`; one fires pod stages when
they are due (a pod bound with `pod-complete` / `pod-delete` delays completes or is deleted,
shared.lifecycle.actions): it sleeps until the earliest stage, not to the next tick, because a
tick's lateness would lengthen every pod's run (KWOK's delays are what a harness measures);
another ticks:

- every tick: stages due (again, should the stage loop lag), and taint-based evictions due
  (shared.lifecycle.taint_eviction over the owned nodes' NoExecute taints);
- every heartbeat: membership, heartbeats of the owned nodes (not the ones `berth node fail`
  made unreachable), and the lifecycle pass (shared.lifecycle.node_lifecycle.monitor: Ready
  from the heartbeat's age, the taints from the conditions), written to the store only when
  something changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
import random
import time
from collections.abc import Mapping

from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.agent.config import AgentConfig
from services.agent.partition import live_members, owner
from services.agent.view import AgentView
from shared.lifecycle import actions
from shared.lifecycle.kwok import COMPLETE, StageError, plan
from shared.lifecycle.node_lifecycle import (
    FALSE,
    TRUE,
    condition,
    fully_disrupted,
    monitor,
    ready_status,
    with_condition,
    with_ready,
)
from shared.lifecycle.pressure import NodePressure, decide
from shared.lifecycle.state import FAIL_NOT_READY, FAIL_UNREACHABLE, LifecycleState, PodEvent
from shared.lifecycle.taint_eviction import EVICTION_REASON, TaintEvictionQueue, no_execute_taints
from shared.models import Node, Pod, pod_group_key
from shared.observability.logs import DecisionLog
from shared.runtime.retry import Retry
from shared.store import BodiesSkipped, ClusterStore, StreamGapError

log = logging.getLogger(__name__)

STAGE_MIN_SLEEP = 0.002
"""The stage loop's shortest sleep: stages due within it fire together."""
NOT_READY_REASON = "KubeletNotReady"
GANG_REASON = "GangEviction"
PRESSURE_REASON = "Evicted"
ORPHAN_REASON = "DeletionByPodGC"
_NOT_BOUND = BodiesSkipped(deleted=True, unbound_pods=True)
"""The agent runs bound pods only (AgentView): a pending pod, or a pod gone, is dropped by its
key without decoding it (two of a finished pod's three changes)."""
_FAILED = "node failed (berth node fail)"
_READY = "kubelet is posting ready status"


class AgentService:
    def __init__(self, redis: Redis, config: AgentConfig) -> None:
        self.redis = redis
        self.config = config
        self.store = ClusterStore(redis, cluster=config.cluster, prefix=config.key_prefix)
        self.state = LifecycleState(redis, self.store.keys)
        self.view = AgentView()
        self.rng = random.Random(config.seed)
        self.stages: list[tuple[float, str, str, str]] = []
        """Heap of (due, pod key, uid, action)."""
        self._planned: dict[str, float] = {}
        """pod key -> the due time of the stage planned for its current binding."""
        self._started: dict[str, float] = {}
        """pod key -> when its current binding was seen (its start, for the finish record)."""
        self.evictions = TaintEvictionQueue()
        self.pressure: dict[str, NodePressure] = {}
        self.disrupted = False
        self.gone: dict[str, float] = {}
        """Deleted nodes that still have bound pods -> when first seen so."""
        self._owners: tuple[list[str], dict[str, bool]] | None = None
        """Ownership by node, for the members it was computed with."""
        """Every node unready (full disruption): no NoExecute lifecycle taints."""
        self.members: list[str] = [config.name]
        self.failures: dict[str, str] = {}
        self.started = 0.0
        self._next_beat = 0.0
        self._stop = asyncio.Event()
        self._stage_sooner = asyncio.Event()
        """Set when a stage is planned before the stage loop's next wake-up."""
        self._stage_wake_at = math.inf
        self._tasks: list[asyncio.Task[None]] = []
        self._loaded = asyncio.Event()
        self.counts: dict[str, int] = {"completed": 0, "deleted": 0, "evicted": 0, "replaced": 0}
        self.decisions = DecisionLog(log)

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        self.started = time.time()
        rv = await self._load()
        self._tasks = [
            asyncio.create_task(self._follow(rv), name="agent-follow"),
            asyncio.create_task(self._ticking(), name="agent-tick"),
            asyncio.create_task(self._staging(), name="agent-stages"),
        ]

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=5)
        with contextlib.suppress(RedisError):
            await self.redis.hdel(self.state.keys.agents, self.config.name)

    async def _load(self) -> int:
        snapshot = await self.store.load_snapshot()
        self.view = AgentView.of(snapshot)
        now = time.time()
        for pod in self.view.pods.values():
            self._plan(pod, now)
        self._loaded.set()
        return snapshot.resource_version

    # ---------------------------------------------------------------- follow
    async def _follow(self, rv: int) -> None:
        position = rv
        retry = Retry("agent: following the change stream", log)
        while not self._stop.is_set():
            try:
                async for batch in self.store.follow_batches(
                    position, stop=self._stop, block_ms=500, skip=_NOT_BOUND
                ):
                    now = time.time()
                    for change in batch:
                        for pod in self.view.apply(change):
                            self._plan(pod, now)
                        if change.kind == "Pod" and change.op == "delete":
                            self.evictions.forget(change.key)
                            self._planned.pop(change.key, None)
                            self._started.pop(change.key, None)
                        position = change.resource_version
                    retry.succeeded()
            except StreamGapError:
                log.warning("change stream trimmed past %d: reloading", position)
                try:
                    position = await self._load()
                except Exception as exc:  # noqa: BLE001 (an outage or a bug: logged, retried)
                    await retry.pause(exc, self._stop)
            except Exception as exc:  # noqa: BLE001
                await retry.pause(exc, self._stop)

    def _plan(self, pod: Pod, now: float) -> None:
        try:
            stage = plan(pod.metadata.annotations, pod.key, self.rng)
        except StageError as exc:
            log.warning("%s (the pod keeps running)", exc)
            return
        if stage is not None:
            due = now + stage.after
            self._planned[pod.key] = due
            self._started[pod.key] = now
            heapq.heappush(self.stages, (due, pod.key, pod.metadata.uid, stage.action))
            if due < self._stage_wake_at:
                self._stage_sooner.set()

    # ---------------------------------------------------------------- stages
    async def _staging(self) -> None:
        """Fire stages as they fall due: sleep until the earliest planned one (a tick at
        most), woken early when a sooner one is planned."""
        retry = Retry("agent: pod stages", log)
        while not self._stop.is_set():
            try:
                await self._fire_stages(time.time())
                retry.succeeded()
            except Exception as exc:  # noqa: BLE001 (an outage or a bug: logged, retried)
                await retry.pause(exc, self._stop)
                continue
            now = time.time()
            wake = now + self.config.tick_seconds
            if self.stages:
                wake = min(wake, self.stages[0][0])
            self._stage_wake_at = wake
            self._stage_sooner.clear()
            await self._sleep(max(STAGE_MIN_SLEEP, wake - now), self._stage_sooner)
        self._stage_wake_at = math.inf

    async def _sleep(self, seconds: float, early: asyncio.Event) -> None:
        """`seconds`, or until `early` is set or the agent stops."""
        waits = [asyncio.ensure_future(early.wait()), asyncio.ensure_future(self._stop.wait())]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    # ------------------------------------------------------------------ tick
    async def _ticking(self) -> None:
        retry = Retry("agent: stages, heartbeats and evictions", log)
        while not self._stop.is_set():
            try:
                await self.tick(time.time())
                retry.succeeded()
            except Exception as exc:  # noqa: BLE001 (an outage or a bug: logged, retried)
                await retry.pause(exc, self._stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.config.tick_seconds)

    def owns(self, node: str) -> bool:
        owners = self._owners
        if owners is None or owners[0] != self.members:
            owners = self._owners = (list(self.members), {})
        found = owners[1].get(node)
        if found is None:
            found = owners[1][node] = owner(self.members, node) == self.config.name
        return found

    async def tick(self, now: float) -> None:
        if now >= self._next_beat:
            self._next_beat = now + self.config.heartbeat_seconds
            await self._beat(now)
            await self._monitor(now)
        await self._fire_stages(now)
        await self._evict(now)

    async def _beat(self, now: float) -> None:
        agents = self.state.keys.agents
        await self.redis.hset(agents, self.config.name, now)
        seen = {
            (k.decode() if isinstance(k, bytes) else str(k)): float(v)
            for k, v in (await self.redis.hgetall(agents)).items()
        }
        self.members = live_members(seen, now, self.config.member_ttl, self.config.name)
        self.failures = await self.state.failures()
        beats = {
            name: now
            for name in self.view.nodes
            if self.owns(name) and self.failures.get(name) != FAIL_UNREACHABLE
        }
        await self.state.heartbeat(beats)

    # --------------------------------------------------------- node lifecycle
    async def _monitor(self, now: float) -> None:
        heartbeats = await self.state.heartbeats()
        grace = self.config.node_monitor_grace_period
        nodes = list(self.view.nodes.values())
        disrupted = fully_disrupted(nodes, heartbeats, now, grace, self.started)
        if disrupted != self.disrupted:
            log.warning(
                "every node is unready: taint-based eviction paused (full disruption)"
                if disrupted
                else "a node is ready again: taint-based eviction resumed"
            )
        self.disrupted = disrupted
        await self._collect_orphans(now)
        for name in sorted(self.view.nodes):
            if not self.owns(name):
                continue
            node = self.view.nodes[name]
            pressure = await self._pressure(node, now)
            if self._update(node, heartbeats.get(name), now, pressure) is None:
                continue
            fresh = await self.store.get_node(name)  # write over the latest copy only
            if fresh is None:
                continue
            updated = self._update(fresh, heartbeats.get(name), now, pressure)
            if updated is not None:
                await self.store.apply([updated[0]])
                self.view.nodes[name] = updated[0]
                log.info("node %s: %s", name, updated[1])

    def _update(
        self,
        node: Node,
        heartbeat: float | None,
        now: float,
        pressure: Mapping[str, bool] | None = None,
    ) -> tuple[Node, str] | None:
        """The kubelet's report (Ready False while `berth node fail --not-ready`, back to True
        after; the pressure conditions), then the controller's pass."""
        name = node.metadata.name
        current, why = node, []
        for kind, on in sorted((pressure or {}).items()):
            status = TRUE if on else FALSE
            found = condition(current, kind)
            if (found.status if found is not None else FALSE) != status:
                reason = f"KubeletHas{'' if on else 'No'}{kind.replace('Pressure', '')}Pressure"
                current = with_condition(current, kind, status, reason, "", now)
                why.append(f"{kind}={status}")
        mode = self.failures.get(name)
        ready = ready_status(node)
        if mode == FAIL_NOT_READY and ready != FALSE:
            changed = with_ready(current, FALSE, NOT_READY_REASON, _FAILED, now)
            if changed is not None:
                current = changed
                why.append("Ready=False (kubelet)")
        elif mode is None and ready == FALSE and _reason(node) == NOT_READY_REASON:
            changed = with_ready(current, "True", "KubeletReady", _READY, now)
            if changed is not None:
                current = changed
                why.append("Ready=True (kubelet)")
        result = monitor(
            current,
            heartbeat,
            now,
            self.config.node_monitor_grace_period,
            self.started,
            evicting=not self.disrupted,
        )
        if result is not None:
            current = result.node
            why.append(result.why)
        return None if current is node else (current, "; ".join(why))

    async def _collect_orphans(self, now: float) -> None:
        """Upstream PodGC: a pod bound to a node that no longer exists is deleted once the
        node has been gone for the quarantine (the grace period here), and its owner brings
        it back pending."""
        quarantine = self.config.node_monitor_grace_period
        for name in sorted(set(self.view.by_node) - set(self.view.nodes)):
            if not self.owns(name):
                continue
            since = self.gone.setdefault(name, now)
            if now - since < quarantine:
                continue
            for pod in self.view.pods_on(name):
                message = f"Deleting Pod {pod.key}: its node {name} is gone (PodGC)"
                gang = pod_group_key(pod)
                evicted = await self._evict_one(pod, ORPHAN_REASON, message, now, bool(gang))
                if evicted and gang:
                    await self._requeue_gang(gang, pod.key, now)
        for name in list(self.gone):
            if name in self.view.nodes or name not in self.view.by_node:
                del self.gone[name]

    async def _pressure(self, node: Node, now: float) -> dict[str, bool] | None:
        """Node-pressure eviction on a node (one pod a pass, as the kubelet's housekeeping);
        the pressure conditions to report, None when not configured."""
        config = self.config.pressure
        name = node.metadata.name
        if config is None or self.failures.get(name) is not None:
            return None
        state = self.pressure.setdefault(name, NodePressure())
        decision = decide(config, state, node, self.view.pods_on(name), now)
        if decision.victim is not None:
            victim = decision.victim
            gang = pod_group_key(victim)
            evicted = await self._evict_one(
                victim, PRESSURE_REASON, decision.message, now, bool(gang)
            )
            if evicted and gang:
                await self._requeue_gang(gang, victim.key, now)
        return decision.conditions

    # ---------------------------------------------------------------- stages
    async def _fire_stages(self, now: float) -> None:
        later: list[tuple[float, str, str, str]] = []
        completing: list[tuple[Pod, float | None]] = []
        deleting: list[Pod] = []
        while self.stages and self.stages[0][0] <= now:
            due, key, uid, action = heapq.heappop(self.stages)
            pod = self.view.pods.get(key)
            if pod is None or pod.metadata.uid != uid or self._planned.get(key) != due:
                # Gone, or bound again since (a pod evicted back to waiting keeps its uid):
                # only the plan of its current binding counts.
                continue
            node = pod.spec.node_name
            if not self.owns(node) or self.failures.get(node) is not None:
                # Another replica's node: kept until the pod is gone, in case that replica
                # goes away first. A failed node's kubelet reports nothing: the pod finishes
                # once it is back.
                again = now + self.config.heartbeat_seconds
                self._planned[key] = again
                later.append((again, key, uid, action))
                continue
            if action == COMPLETE:
                completing.append((pod, self._started.get(key)))
            else:
                deleting.append(pod)
        for item in later:
            heapq.heappush(self.stages, item)
        # The stages due together end together: a few round trips for all of them.
        done = await actions.complete_all(self.store, self.state, completing, now=now)
        self.counts["completed"] += sum(done)
        gone = await actions.delete_all(self.store, self.state, deleting, now=now)
        self.counts["deleted"] += sum(gone)
        ended = zip([p for p, _ in completing] + deleting, done + gone, strict=True)
        for pod, over in ended:
            self._planned.pop(pod.key, None)
            self._started.pop(pod.key, None)
            if over:
                self.view.drop_pod(pod.key)

    # --------------------------------------------------------- taint eviction
    async def _evict(self, now: float) -> None:
        tainted = {
            name
            for name, node in self.view.nodes.items()
            if no_execute_taints(node.spec.taints) and self.owns(name)
        }
        watched = tainted | {s.node for s in self.evictions.scheduled.values()}
        for name in watched:
            node = self.view.nodes.get(name)
            taints = node.spec.taints if node is not None else []
            for pod in self.view.pods_on(name):
                self.evictions.update(
                    pod.key, pod.metadata.uid, name, taints, pod.spec.tolerations, now
                )
        for key, due in self.evictions.due(now):
            victim = self.view.pods.get(key)
            where = None if victim is None else (victim.metadata.uid, victim.spec.node_name)
            if victim is None or where != (due.uid, due.node):
                continue
            message = f"Marking for deletion Pod {key}: node {due.node}: {due.reason}"
            gang = pod_group_key(victim)
            if not await self._evict_one(victim, EVICTION_REASON, message, now, bool(gang)):
                continue
            if gang:
                await self._requeue_gang(gang, key, now)

    async def _evict_one(
        self, pod: Pod, reason: str, message: str, now: float, requeue: bool
    ) -> bool:
        result = await actions.evict(
            self.store, self.state, pod, reason=reason, message=message, now=now, requeue=requeue
        )
        if result is False:
            return False
        self.counts["evicted"] += 1
        self.counts["replaced"] += int(isinstance(result, Pod))
        # One INFO line per eviction (rate limited: a node failing evicts many at once).
        self.decisions.info(
            "eviction", "%s", message, pod=pod.key, node=pod.spec.node_name, reason=reason
        )
        self.view.drop_pod(pod.key)
        self.evictions.forget(pod.key)
        return True

    async def _requeue_gang(self, gang: str, lost: str, now: float) -> None:
        """A gang that lost a member is requeued whole (Coscheduling's all-or-nothing, Kueue's
        waitForPodsReady): its other bound members are evicted too, and every member comes
        back pending with a new uid, so the gang is placed again as one."""
        members = [p for p in self.view.pods.values() if pod_group_key(p) == gang]
        for member in sorted(members, key=lambda p: p.key):
            message = f"Requeueing Pod {member.key}: gang {gang} lost member {lost} to eviction"
            await self._evict_one(member, GANG_REASON, message, now, True)

    async def record(self, pod: Pod, event: PodEvent) -> None:
        await self.state.record(pod.key, event)


def _reason(node: Node) -> str:
    found = next((c for c in node.status.conditions if c.type == "Ready"), None)
    return "" if found is None else found.reason
