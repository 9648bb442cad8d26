"""The adapter service: Kubernetes mode's way in and way out.

    service = AdapterService(redis, bootstrap, api, AdapterConfig(...))
    await service.run(stop)     # waits for the Lease, then leads until `stop` or lost

- **Leader-elected** (services.adapter.leader): replicas are safe; only the Lease holder
  writes. Losing the Lease ends `run` with LeadershipLostError: the process exits and its
  supervisor (Kubernetes, or `berth up`) starts it again as a candidate, as kube-scheduler
  does.
- **In**: one Reflector per kind (services.adapter.reflector) lists and watches Nodes,
  Pods, Namespaces, PriorityClasses, PodDisruptionBudgets, PodGroups and Kueue's
  ResourceFlavors, ClusterQueues, LocalQueues and Cohorts (when their CRDs are installed:
  shared.kube.kinds) into the store
  (services.adapter.sink decides which pods are berth's). Everything downstream is the same
  as standalone mode: the queue, the workers and the binder follow the store's change
  stream, so a pod deleted in Kubernetes leaves the queue and a node change wakes parked pods
  through the same queueing hints.
- **Out**: the StatusWriter (services.adapter.status) follows `berth.outcomes` and writes
  PodScheduled conditions, nominatedNodeName and Events; pods the sink refuses (volumes to
  bind) get the same condition and Event, saying why; pods held for quota admission say why
  in their condition (services.adapter.quota). Binding and eviction are the
  binder's (services.binder.kube_api): they need the server's answer before anything is
  recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.adapter.events import TICK_SECONDS
from services.adapter.leader import LeaderElector, LeaseSettings
from services.adapter.quota import QuotaReports
from services.adapter.reflector import Reflector
from services.adapter.sink import StoreSink
from services.adapter.status import Reporter, StatusWriter, failed_scheduling, stop_consumer
from services.queue.client import QueueClient
from shared.kube.client import WATCHED, KubeApi, KubeApiError, KubeUnavailableError
from shared.messaging.kafka import Topics, ensure_topics, make_consumer, message_verifier
from shared.runtime.security import KafkaSecurity
from shared.store import ClusterStore

log = logging.getLogger(__name__)


class LeadershipLostError(RuntimeError):
    """The Lease was not renewed in time: another replica may be leading now."""


@dataclass(frozen=True)
class AdapterConfig:
    identity: str
    scheduler_names: frozenset[str]
    cluster: str = "default"
    key_prefix: str = "berth:"
    topics: Topics = field(default_factory=Topics)
    group_id: str = "berth-adapter"
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    kinds: tuple[str, ...] = tuple(WATCHED)
    watch_timeout_seconds: int = 300
    consumer_options: dict[str, Any] = field(default_factory=dict)
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    leader_elect: bool = True
    """False (leaderElection.leaderElect: false): lead at once, without a Lease (one
    replica only, as kube-scheduler with --leader-elect=false)."""
    store_check_seconds: float = 5.0
    """How often the adapter checks that Redis still holds what it wrote (its epoch)."""
    queue_prefix: str = "berth:q:"
    """The queue's key prefix: the adapter reads, through its client, which pods wait for
    quota and why (services.adapter.quota)."""
    quota_report_seconds: float = 2.0


class AdapterService:
    def __init__(self, redis: Redis, bootstrap: str, api: KubeApi, config: AdapterConfig) -> None:
        self.redis = redis
        self.bootstrap = bootstrap
        self.api = api
        self.config = config
        self.store = ClusterStore(redis, cluster=config.cluster, prefix=config.key_prefix)
        self.sink = StoreSink(self.store, config.scheduler_names)
        self.elector = LeaderElector(api, config.identity, config.lease)
        self.reflectors = [
            Reflector(api, kind, self.sink, watch_timeout_seconds=config.watch_timeout_seconds)
            for kind in config.kinds
        ]
        self.reporter = Reporter(api, config.identity)
        """Writes conditions and Events to pods (outcomes, and pods the sink refuses)."""
        self.quota = QuotaReports(
            QueueClient(redis, config.queue_prefix),
            self.store,
            self.reporter,
            config.scheduler_names,
            config.quota_report_seconds,
        )
        """Writes why pods wait for quota admission to them."""
        self.status: StatusWriter | None = None
        self.synced = asyncio.Event()
        """Set once every kind's first list is in the store (readiness)."""

    @property
    def stats(self) -> Counter[str]:
        out = Counter(self.sink.stats)
        out["relists"] = sum(r.relists for r in self.reflectors)
        out["events_written"] = self.reporter.written
        return out

    async def run(self, stop: asyncio.Event) -> None:
        """Candidate until the Lease is ours, then lead until `stop` (or the Lease is lost:
        LeadershipLostError)."""
        if not self.config.leader_elect:
            log.warning("leader election is off: this replica leads without a Lease")
            await self._lead(stop)
            return
        acquired = asyncio.create_task(self.elector.acquire())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({acquired, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not acquired.done():
            await _cancel_all([acquired, stopped])
            return
        stopped.cancel()
        await self._lead(stop)

    async def _lead(self, stop: asyncio.Event) -> None:
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(self._check_store(), name="adapter-store-check")
        ]
        if self.config.leader_elect:
            tasks.append(asyncio.create_task(self.elector.hold(), name="adapter-lease"))
        tasks += [
            asyncio.create_task(r.run(), name=f"adapter-reflect-{r.kind}") for r in self.reflectors
        ]
        tasks.append(asyncio.create_task(self._ready(), name="adapter-ready"))
        tasks.append(asyncio.create_task(self._report(), name="adapter-status"))
        tasks.append(asyncio.create_task(self._explain_refusals(), name="adapter-refusals"))
        tasks.append(asyncio.create_task(self.quota.run(), name="adapter-quota-waits"))
        tasks.append(asyncio.create_task(self._tick_events(), name="adapter-event-series"))
        watchers: list[asyncio.Task[Any]] = [
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self.elector.lost.wait()),
        ]
        try:
            done, _ = await asyncio.wait([*watchers, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception() if task in tasks else None
                if error is not None:
                    raise error
        finally:
            await _cancel_all([*tasks, *watchers])
            if not self.elector.lost.is_set():
                await self.elector.release()
        if self.elector.lost.is_set() and not stop.is_set():
            raise LeadershipLostError(f"{self.config.identity} lost the Lease")

    async def _report(self) -> None:
        """The StatusWriter, once its consumer joined the group (that takes seconds on the
        embedded broker; the reflectors do not wait for it)."""
        topics = self.config.topics
        security = self.config.kafka_security
        await ensure_topics(self.bootstrap, [topics.outcomes], security=security)
        consumer = make_consumer(
            self.bootstrap,
            [topics.outcomes],
            self.config.group_id,
            security=security,
            **self.config.consumer_options,
        )
        starting = asyncio.create_task(consumer.start())
        try:
            # A consumer cancelled half-way through start() leaks its connections: let the
            # start finish, then stop it.
            await asyncio.shield(starting)
            self.status = StatusWriter(
                self.reporter,
                self.store,
                consumer,
                self.config.scheduler_names,
                message_verifier(security, topics),
            )
            await self.status.run()
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(starting, 30)
            await stop_consumer(consumer)

    async def _explain_refusals(self) -> None:
        """Pods the sink will not take say why, as an unschedulable pod does."""
        while True:
            refusal = await self.sink.refusals.get()
            await self.reporter.deliver(
                refusal.namespace,
                refusal.name,
                refusal.uid,
                failed_scheduling(refusal.message),
                refusal.scheduler_name,
            )

    async def _tick_events(self) -> None:
        """Event series are refreshed and finished (services.adapter.events)."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                await self.reporter.recorder.tick()
            except (KubeApiError, KubeUnavailableError) as e:
                log.warning("adapter: writing Event series: %s", e)

    async def _check_store(self) -> None:
        """Every store_check_seconds: a reflector whose last list was written into another
        Redis epoch (Redis lost data, restarted or failed over) lists again."""
        while True:
            await asyncio.sleep(self.config.store_check_seconds)
            try:
                epoch = await self.sink.epoch()
            except RedisError:
                continue  # the reflectors meet it too, and check again before watching
            for reflector in self.reflectors:
                if reflector.epoch and reflector.version and reflector.epoch != epoch:
                    reflector.resync()

    async def _ready(self) -> None:
        for reflector in self.reflectors:
            await reflector.synced.wait()
        log.info("adapter synced: %s", dict(self.sink.stats))
        self.synced.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    done, pending = await asyncio.wait(tasks, timeout=30.0)
    for task in pending:
        log.warning("task %s did not stop", task.get_name())
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            log.warning("task %s ended with %r", task.get_name(), task.exception())
