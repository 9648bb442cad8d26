"""The scheduler worker service: consume `berth.schedule`, run the cycles, publish proposals.

    worker = SchedulerWorker(redis, bootstrap, WorkerConfig(...))
    await worker.start()     # snapshot loaded, change stream followed, consumer joined
    ...
    await worker.stop()

- The view: one store snapshot (every object and the stream position, read by one script),
  then the change stream (a new snapshot when the stream was trimmed past the position).
- Consumption: one consumer group on `berth.schedule`. A fetched batch of messages is processed
  in order, one pod at a time; proposals (key: node) and outcomes (key: pod uid) are sent,
  their acknowledgements awaited, and only then the offsets committed. A worker killed at any
  moment loses nothing: the uncommitted messages go to another member, and pods whose messages
  were committed but whose proposals never landed come back when the queue's lease expires.
- Before each batch the view catches up with the store's current resourceVersion (bounded
  wait), so a pod never meets a cluster older than the one it was queued in.
- Assumptions end when the binding arrives on the stream, or when the store streams that the
  attempt ended without one (a conflict, a Permit rejection, an error: scheduling/cache), or
  after `assume_ttl_seconds`. Workers read no outcomes: `berth.outcomes` is the queue's (and
  the adapter's), and every fact a worker needs reaches it once, on the change stream.
- A conflict found by check-and-reserve is streamed with the node's usage then; a view that
  counts less there, at that very version, counts wrong and reloads its snapshot.
- A heartbeat hash (`<prefix>{<cluster>}:workers`: worker id ->
  shared.store.objects.WorkerHeartbeat, read by shared.store.objects.read_heartbeats) tells
  `berth run` and `berth get` how far each worker's view is (services/scheduler/heartbeat.py).
- What each decision becomes (its span's result, metrics, the records sent) is
  services/scheduler/results.py.
- Observability: a `scheduling_cycle` span per request (parent from the record's headers, its
  context passed on in the proposal's), scheduler_schedule_attempts for the worker's own
  unschedulable/error results, berth_consumer_lag; `run(stop, health)` drives readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from redis.asyncio import Redis

from scheduling.cache.cache import WORKER_HOLDER, ClusterCache
from scheduling.cache.sync import CacheSync
from scheduling.framework.extender import build_extenders
from scheduling.framework.runtime import Framework, build_frameworks
from scheduling.plugins.registry import in_tree_registry
from services.scheduler.config import WorkerConfig
from services.scheduler.cycle import Decision, decide, failed_decision
from services.scheduler.heartbeat import WorkerStats, heartbeat_key, report_view, write_heartbeat
from services.scheduler.instrument import instrument
from services.scheduler.results import Results, record_result
from shared.messaging.kafka import (
    FETCH_MAX_WAIT_MS,
    ensure_topics,
    make_consumer,
    make_producer,
    message_signer,
    message_verifier,
    refusal,
)
from shared.messaging.message_auth import Verifier
from shared.messaging.messages import ScheduleBatch, ScheduleRequest
from shared.messaging.proposals import Proposal
from shared.messaging.wire import MessageError
from shared.observability.health import HealthServer
from shared.observability.metrics import BerthMetrics, default_metrics, report_consumer_lag
from shared.observability.tracing import (
    inject_headers,
    scheduling_cycle_span,
)
from shared.runtime.retry import Retry, outage_errors, until_answered
from shared.runtime.tasks import finish
from shared.store import ClusterStore

log = logging.getLogger(__name__)

FOLLOW_BLOCK_MS = 500
"""XREAD block of the stream follower: how long stop() may wait for it."""
FOLLOW_LINGER_SECONDS = 0.05
"""How long the follower lets changes gather after a short batch (scheduling/cache/sync.py).
The view barrier before each batch of pods hurries it, so no pod waits for the linger."""
YIELD_EVERY = 32
"""Pods scheduled between two yields to the event loop (stream, heartbeats, Kafka)."""
FLUSH_AT = 64
"""Decisions sent together: after a schedule record whose pods bring this many unsent, else
after the last record of the fetch. The queue's records carry 64 pods of one tenant when it
is busy, so those go one record each as they come; with many tenants a record may carry one
or two pods (Kueue's baseline: 30 ClusterQueues), and their decisions leave together, a
Kafka record per partition for the fetch instead of one per schedule record."""


class WorkerFailedError(RuntimeError):
    """One of the worker's loops died; the process exits so that it is restarted."""


class SchedulerWorker:
    def __init__(
        self,
        redis: Redis,
        bootstrap: str,
        config: WorkerConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        metrics: BerthMetrics | None = None,
    ) -> None:
        self.config = config if config is not None else WorkerConfig()
        self.redis = redis
        self.bootstrap = bootstrap
        self.clock = clock
        self.store = ClusterStore(redis, cluster=self.config.cluster, prefix=self.config.key_prefix)
        self.view = ClusterCache(
            WORKER_HOLDER, extenders=build_extenders(self.config.profiles().extenders)
        )
        self._view_lock = asyncio.Lock()
        """Held while a cycle runs in a thread (extenders' HTTP calls must not block the event
        loop): the follower, the outcome listener and housekeeping change the view only
        between cycles."""
        self.frameworks: dict[str, Framework] = build_frameworks(
            self.config.profiles(), in_tree_registry(), self.view, seed=self.config.seed
        )
        self.stats = WorkerStats()
        self.metrics = metrics if metrics is not None else default_metrics()
        self._sampler = instrument(self.frameworks, self.metrics)
        self._reuse_seen: dict[tuple[str, str], int] = {}
        self._heartbeat_key = heartbeat_key(self.config.key_prefix, self.config.cluster)
        self._producer: AIOKafkaProducer | None = None
        self.results = Results(self.config, self.stats, self.metrics)
        """Where each decision goes (its span, metrics, proposal or outcome sent)."""
        self._consumer: AIOKafkaConsumer | None = None
        self._verifier: Verifier | None = None
        """Checks the schedule requests' authenticators (None: no message keys)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._advanced = asyncio.Event()
        self.sync = CacheSync(
            self.store,
            self.view,
            block_ms=FOLLOW_BLOCK_MS,
            count=5000,
            lock=self._view_lock,
            on_advance=self._signal_advanced,
            name="worker-follow",
            linger_seconds=FOLLOW_LINGER_SECONDS,
        )
        """Keeps the view fresh from the change stream (and reloads it when a conflict's
        facts show it counting short)."""
        self.view.on_undercount = self._undercounts
        self.failed = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        topics = self.config.topics
        security = self.config.kafka_security
        await ensure_topics(self.bootstrap, topics.all(), security=security)
        await self.sync.start()
        self._producer = make_producer(
            self.bootstrap,
            security=security,
            signer=message_signer(security, "scheduler", topics),
            **dict(self.config.producer_options),
        )
        self._verifier = message_verifier(security, topics)
        await self._producer.start()
        await self.results.start(self._producer)
        options = {"fetch_max_wait_ms": FETCH_MAX_WAIT_MS, **self.config.consumer_options}
        self._consumer = make_consumer(
            self.bootstrap, [topics.schedule], self.config.group_id, security=security, **options
        )
        await self._consumer.start()
        self._tasks = [
            asyncio.create_task(self._consume(), name="worker-consume"),
            asyncio.create_task(self._housekeeping(), name="worker-housekeeping"),
            asyncio.create_task(
                report_consumer_lag(self._consumer, self.metrics), name="worker-lag"
            ),
        ]
        assert self.sync.task is not None
        for task in [*self._tasks, self.sync.task]:
            task.add_done_callback(self._task_done)
        await self._heartbeat()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        """A loop that ends on its own is a bug: fail the worker (its process restarts)."""
        if task.cancelled() or self._stopping.is_set():
            return
        log.error("%s ended: %r", task.get_name(), task.exception())
        self.failed.set()

    async def stop(self) -> None:
        """Stop taking work; the batch in progress finishes and is committed. Loops that
        talk to Redis are told to stop (`_stopping`) rather than cancelled: cancelling a
        task blocked in a redis-py command (the stream follower's XREAD) can leave it hanging
        in the client's disconnect path (shared.runtime.tasks)."""
        self._stopping.set()
        self._signal_advanced()
        await self.sync.stop()
        if self._tasks:
            by_name = {task.get_name(): task for task in self._tasks}
            consume = by_name.pop("worker-consume", None)
            if consume is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(consume), 10.0)
            for name in ("worker-housekeeping",):
                task = by_name.pop(name, None)
                if task is not None:
                    await finish(task, FOLLOW_BLOCK_MS / 1000 + 2.0)
            for task in [consume, *by_name.values()]:  # Kafka loops: cancelling is safe
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            self._tasks = []
        if self._consumer is not None:
            await self._consumer.stop()
        self._consumer = None
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        with contextlib.suppress(Exception):
            await self.redis.hdel(self._heartbeat_key, self.config.worker_id)

    async def run(self, stop: asyncio.Event, health: HealthServer | None = None) -> None:
        """start(), wait for `stop` (or a failure: WorkerFailedError), stop(); `health`'s
        readiness follows (ready once started, not while draining)."""
        await self.start()
        if health is not None:
            health.set_ready(True)
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.failed.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
            if health is not None:
                health.set_ready(False, "draining")
            await self.stop()
        if self.failed.is_set():
            if health is not None:
                health.set_live(False, "a worker loop failed")
            raise WorkerFailedError("a worker loop failed (see the log)")

    # ------------------------------------------------------------------ consuming
    async def _consume(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        retry = Retry(f"worker {self.config.worker_id}: scheduling", log)
        while not self._stopping.is_set():
            try:
                batches = await consumer.getmany(timeout_ms=200, max_records=64)
                if not batches:
                    continue
                await self._catch_up()
                offsets: dict[TopicPartition, int] = {}
                deliveries: list[asyncio.Future[Any]] = []
                for tp, records in batches.items():
                    for record in records:
                        deliveries += await self._process(tp, record)
                        offsets[tp] = record.offset + 1
                await self.results.flush()
                if deliveries:
                    await asyncio.gather(*deliveries)
                retry.succeeded()
            except outage_errors() as exc:
                # The broker (or Redis, for a preemptor's victims) went away mid-batch:
                # the pods whose proposals or outcomes did not land come back when the
                # queue's leases on them expire.
                await retry.pause(exc, self._stopping)
                continue
            try:
                await consumer.commit(offsets)
            except (CommitFailedError, KafkaError) as exc:  # a rebalance: redelivery is harmless
                log.warning("commit failed: %s", exc)

    async def _catch_up(self) -> None:
        target = await self._store_version()
        if target is None or self.view.resource_version >= target:
            return
        self.stats.barrier_waits += 1
        self.sync.hurry()
        deadline = asyncio.get_running_loop().time() + self.config.view_barrier_seconds
        while self.view.resource_version < target:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                log.warning("view at %d, store at %d", self.view.resource_version, target)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._advanced.wait(), remaining)

    async def _store_version(self) -> int | None:
        """The store's resourceVersion (the view barrier's target), waited for while Redis is
        away: a pod is never decided on a view the worker cannot bring up to date (None: the
        worker is stopping)."""
        return await until_answered(
            f"worker {self.config.worker_id}: reading the store's resourceVersion",
            log,
            self.store.resource_version,
            self._stopping,
        )

    async def _process(self, tp: TopicPartition, record: Any) -> list[asyncio.Future[Any]]:
        """Schedule one record's pods; the futures say when their proposals and outcomes
        (and dead letters) landed. They are sent here when FLUSH_AT decisions wait, else by
        the caller's flush after the fetch's last record."""
        refused = refusal(self._verifier, record)
        if refused:
            return [await self.results.dead_letter(record, refused)]
        if record.value is None:
            return [await self.results.dead_letter(record, "empty message")]
        try:
            batch = ScheduleBatch.decode(record.value)
        except MessageError as exc:
            return [await self.results.dead_letter(record, str(exc))]
        deliveries: list[asyncio.Future[Any]] = []
        started = time.perf_counter()
        for index, request in enumerate(batch.requests):
            if index and index % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            with scheduling_cycle_span(request, record.headers) as span:
                cycle_started = time.time()
                began = time.perf_counter()
                self._sampler.begin_cycle()
                try:
                    decision = await self._decide(request)
                except Exception as exc:  # a framework bug must not stop the partition
                    log.exception(
                        "scheduling %s (attempt %d) failed", request.pod_key, request.attempt
                    )
                    decision = failed_decision(request, exc)
                decision = self.results.measured(decision, request, cycle_started, began)
                record_result(span, decision)
                headers = inject_headers()  # the binder's (or queue's) parent
            deliveries.append(self.results.submit(decision, headers))
            proposal = decision.proposal
            if proposal is not None and proposal.kind == "preempt":
                await self.results.flush()
                await asyncio.gather(*deliveries)
                await self._await_victims(proposal)
        if self.results.unsent >= FLUSH_AT:
            await self.results.flush()
        self.stats.cycle_seconds += time.perf_counter() - started
        self.stats.pods += len(batch.requests)
        return deliveries

    async def _decide(self, request: ScheduleRequest) -> Decision:
        """One scheduling cycle. With extenders, in a thread (their calls block on HTTP for up
        to httpTimeout) while the view is locked; without, inline (no await: nothing else
        touches the view meanwhile)."""
        if not self.view.extenders:
            return decide(self.frameworks, self.view, request, self.clock())
        async with self._view_lock:
            return await asyncio.to_thread(
                decide, self.frameworks, self.view, request, self.clock()
            )

    async def _await_victims(self, proposal: Proposal) -> None:
        """After proposing a preemption, the next cycles see its victims gone (as the dry run
        and upstream's synchronous preemption do): wait until the view has applied their
        deletion, or the store streamed that the preemptor's attempt ended without it (the
        binder refused, or a budget stopped it), for `view_barrier_seconds` at most. Without
        this, the pods right after a preemptor would be scored against nodes still holding
        the victims, and the placements would depend on how fast the binder evicts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.view_barrier_seconds
        while not self._victims_gone(proposal) and not self._attempt_ended(proposal):
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning("victims of %s still in the view", proposal.pod_key)
                return
            self.sync.hurry()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._advanced.wait(), remaining)

    def _attempt_ended(self, proposal: Proposal) -> bool:
        return self.view.ended_attempts.get(proposal.uid, 0) >= proposal.attempt

    def _victims_gone(self, proposal: Proposal) -> bool:
        pods = self.view.pods
        for victim in proposal.victims:
            held = pods.get(victim.pod_key)
            if held is not None and held.metadata.uid == victim.uid:
                return False
        return True

    # --------------------------------------------------------------- the view
    async def _pause(self, seconds: float) -> None:
        """Sleep `seconds`, or less when the worker stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _signal_advanced(self) -> None:
        self._advanced.set()
        self._advanced = asyncio.Event()

    def _undercounts(self, reason: str) -> None:
        """The view counts short of the store (a conflict's usage showed it): reload."""
        if self.sync.reload(f"the view counts short of the store: {reason}"):
            self.stats.corrections += 1

    async def _housekeeping(self) -> None:
        while not self._stopping.is_set():
            await self._pause(self.config.heartbeat_seconds)
            if self._stopping.is_set():
                return
            async with self._view_lock:
                self.view.expire(self.clock(), self.config.assume_ttl_seconds)
            with contextlib.suppress(Exception):
                await self._heartbeat()

    async def _heartbeat(self) -> None:
        await report_view(
            self.view,
            self.store,
            self.metrics,
            self.frameworks,
            self._reuse_seen,
            self.config.service_name,
        )
        await write_heartbeat(
            self.redis,
            self._heartbeat_key,
            self.config.worker_id,
            self.view,
            self.stats,
            self.clock(),
        )
