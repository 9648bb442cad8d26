"""The queue service: the store's change stream and outcomes in, Redis queue, Kafka out.

Cluster facts (pods, nodes, PodGroups) come from the store's change stream through the
informer (services/queue/informer.py: one tailing replica, a cursor, idempotent steps);
`berth.outcomes` (one consumer group for all replicas; offsets committed after processing)
brings the results of scheduling attempts. Both are applied to the `QueueStore`, pods of
Kueue ClusterQueues through quota admission (services/queue/quota/admission.py). Its
dispatcher (services/queue/dispatch.py) pops leased pods per tenant by weighted round-robin
and publishes them to `berth.schedule` in batches. Periodic flushes (backoff, unschedulable
leftover, expired leases) are idempotent scripts, so every replica runs them and none needs
to lead.

Bad input never stops the service: an undecodable or invalid message, or a stored pod the
queue cannot take (an invalid tenant name, say), goes to `berth.dlq` with the error, and
processing goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.errors import KafkaError
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.queue.affinity_wake import NamespaceLabels
from services.queue.clock import Clock, SystemClock
from services.queue.config import QueueConfig
from services.queue.dispatch import Dispatcher, HeadersHook
from services.queue.hints import NODE_ADD, ActionType, ClusterEvent
from services.queue.housekeeping import Housekeeping, count_incoming
from services.queue.informer import PodChange, QueueEvent, StoreInformer
from services.queue.keys import InvalidTenantError
from services.queue.outcomes_in import Source, read_outcomes
from services.queue.quota.admission import Admission
from services.queue.quota.workload import QuotaObjectsChanged, Verdict
from services.queue.quota_rounds import QuotaRounds
from services.queue.records import PodRecord
from services.queue.routing import Step, group_steps, route_pod_change
from services.queue.spans import trace_outcomes
from services.queue.store import QueueStore
from shared.messaging.kafka import (
    ensure_topics,
    make_consumer,
    make_producer,
    message_signer,
    message_verifier,
)
from shared.messaging.messages import DeadLetter
from shared.observability.metrics import BerthMetrics, default_metrics, report_consumer_lag
from shared.observability.tracing import tracing_enabled
from shared.runtime.redisconn import connect
from shared.runtime.retry import Retry
from shared.runtime.security import KafkaSecurity
from shared.store import ClusterStore

log = logging.getLogger(__name__)

INCOMING_QUEUES = ("active", "backoff", "unschedulable", "gated")
"""Outcome effects that put a pod in one of upstream's queues (ScheduleAttemptFailure)."""
_NOTHING_TO_DISPATCH = frozenset({"noted", "stale", "extended"})
"""Outcome effects after which the dispatcher has nothing new to pop: no pod became active
and no lease ended (a binding ends its pod's lease when the informer sees it, and wakes the
dispatcher then). Every "scheduled" outcome is one of them: waking the dispatcher for each
made a pop round that found nothing, a Redis round trip over every tenant."""

SERVICE_NAME = "queue"

STREAM_TOPIC = "store-stream"
"""The `topic` of a dead letter for a stored pod the queue could not take."""
# Errors worth retrying from the last commit; anything else (a script error included) is
# the record's fault, and retrying would loop on it forever.
_TRANSIENT = (RedisConnectionError, RedisTimeoutError, KafkaError, OSError)


_Source = TypeVar("_Source")
"""Where a step came from (a consumed record, or the stored pod), for its dead letter."""


class QueueService:
    """One queue replica. Use `async with QueueService(...) as service:` or start()/stop()."""

    def __init__(
        self,
        redis: Redis | str,
        kafka_bootstrap: str,
        config: QueueConfig | None = None,
        *,
        clock: Clock | None = None,
        namespace_labels: NamespaceLabels | None = None,
        headers_hook: HeadersHook | None = None,
        consumer_options: dict[str, Any] | None = None,
        producer_options: dict[str, Any] | None = None,
        replica_id: str | None = None,
        cluster_store: ClusterStore | None = None,
        kafka_security: KafkaSecurity | None = None,
    ) -> None:
        self.config = config or QueueConfig()
        self.redis = connect(redis) if isinstance(redis, str) else redis
        self._owns_redis = isinstance(redis, str)
        self.bootstrap = kafka_bootstrap
        self.kafka_security = kafka_security or KafkaSecurity()
        self._verifier = message_verifier(self.kafka_security, self.config.topics)
        """Checks the outcomes' authenticators (None: no message keys configured)."""
        self.clock = clock or SystemClock()
        self.store = QueueStore(
            self.redis, self.config, self.clock, namespace_labels=namespace_labels
        )
        self.replica_id = replica_id or uuid.uuid4().hex[:8]
        self.metrics: Counter[str] = Counter()
        self.prom: BerthMetrics = default_metrics()
        """kube-scheduler's and berth's Prometheus families (self.metrics: counts for tests)."""
        self._consumer_options = consumer_options or {}
        self._producer_options = producer_options or {}
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._work = asyncio.Event()
        self.dispatcher = Dispatcher(
            self.store,
            self.config,
            self.metrics,
            stopping=self._stopping,
            work=self._work,
            headers_hook=headers_hook,
        )
        self._effects: dict[int, str] = {}
        """id(outcome) -> what the queue did with it, for its span (tracing only)."""
        self._outcomes_freed = False
        """Set by the outcomes applied since `handle_records` began when one may let the
        dispatcher pop (see _NOTHING_TO_DISPATCH)."""
        self.informer: StoreInformer | None = None
        """Tails `cluster_store`'s change stream (None without: events via apply_events)."""
        self.admission: Admission | None = None  # quota admission, on the informer's events
        if cluster_store is not None:
            self.admission = Admission.for_queue(self.redis, cluster_store, self.config)
            self.informer = StoreInformer(
                self.redis,
                cluster_store,
                key_prefix=self.config.key_prefix,
                replica_id=self.replica_id,
                handle=self.apply_events,
                relist=self.relist,
            )
        self.rounds: QuotaRounds | None = None
        if self.admission is not None:
            self.rounds = QuotaRounds(self.admission, self.config, self._settle)
        self._batch_lock = self.rounds.lock if self.rounds is not None else asyncio.Lock()
        """A batch of store events never interleaves with a quota round."""
        self.housekeeping = Housekeeping(
            self.store,
            self.config,
            self.metrics,
            self.prom,
            stopping=self._stopping,
            work=self._work,
            quota_tick=(
                self.rounds.tick
                if self.rounds is not None and self.config.wait_for_pods_ready.timeout_s > 0
                else None
            ),
        )
        self.ready = False

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> QueueService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        topics = self.config.topics
        await ensure_topics(
            self.bootstrap,
            [topics.outcomes, topics.schedule, topics.dlq],
            partitions=self.config.topic_partitions,
            security=self.kafka_security,
        )
        self._producer = make_producer(
            self.bootstrap,
            security=self.kafka_security,
            signer=message_signer(self.kafka_security, SERVICE_NAME, topics),
            **self._producer_options,
        )
        await self._producer.start()
        self.dispatcher.producer = self._producer
        self._consumer = make_consumer(
            self.bootstrap,
            [topics.outcomes],
            self.config.group_id,
            client_id=f"berth-queue-{self.replica_id}",
            security=self.kafka_security,
            **self._consumer_options,
        )
        await self._consumer.start()
        self._tasks = [
            asyncio.create_task(self._consume_loop(), name="queue-consume"),
            asyncio.create_task(
                report_consumer_lag(self._consumer, self.prom), name="queue-consumer-lag"
            ),
            *(
                [asyncio.create_task(self.informer.run(self._stopping), name="queue-informer")]
                if self.informer is not None
                else []
            ),
            *(
                asyncio.create_task(self.dispatcher.loop(), name=f"queue-dispatch-{i}")
                for i in range(max(1, self.config.dispatch_concurrency))
            ),
            *(
                asyncio.create_task(loop, name=name)
                for name, loop in self.housekeeping.loops().items()
            ),
        ]
        self.ready = True

    async def stop(self, grace: float = 5.0) -> None:
        """Stop taking work, let the current step finish (bounded), then close clients."""
        self.ready = False
        self._stopping.set()
        self._work.set()
        if self.rounds is not None:
            await self.rounds.stop()
        if self._tasks:
            _done, pending = await asyncio.wait(self._tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks = []
        await self.dispatcher.drain()
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
        if self._producer is not None:
            await self._producer.stop()
            self._producer = self.dispatcher.producer = None
        if self._owns_redis:
            await self.redis.aclose()

    async def wait_stopped(self) -> None:
        await self._stopping.wait()

    # ------------------------------------------------------------------ consuming

    async def _consume_loop(self) -> None:
        assert self._consumer is not None
        retry = Retry("queue: applying outcomes", log)
        while not self._stopping.is_set():
            try:
                fetched = await self._consumer.getmany(timeout_ms=100, max_records=20_000)
                records = [record for batch in fetched.values() for record in batch]
                if not records:
                    continue
                await self.handle_records(records)
                await self._consumer.commit()
                retry.succeeded()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                # Redis or Kafka trouble: nothing was committed, so re-read from the last
                # commit once things work again (every step is idempotent).
                self.metrics["processing_errors"] += 1
                await retry.pause(exc, self._stopping)
                with contextlib.suppress(Exception):
                    await self._consumer.seek_to_committed()

    async def handle_records(self, records: Sequence[ConsumerRecord]) -> None:
        """Apply a batch of consumed records in order, coalescing runs into store calls.

        Undecodable or invalid records go to the DLQ. If the store rejects the batch for a
        reason other than a Redis or Kafka failure, its records are applied one by one and the
        ones that still fail go to the DLQ: one bad record never blocks the others.
        """
        outcomes = await read_outcomes(
            records, self.config.topics.outcomes, self._verifier, self._dead_letter
        )
        decoded = [(source, "outcome", outcome) for source, outcome in outcomes]
        started = time.time()
        self._effects.clear()
        self._outcomes_freed = False
        await self._apply_or_reject(decoded, self._dead_letter)
        if tracing_enabled():
            trace_outcomes([(s.headers, o) for s, o in outcomes], self._effects, started)
        self.metrics["consumed"] += len(records)
        if self._outcomes_freed:
            self._work.set()

    async def _apply_or_reject(
        self,
        decoded: Sequence[tuple[_Source, str, Any]],
        reject: Callable[[_Source, str], Awaitable[None]],
    ) -> None:
        """Apply the steps in order, coalescing runs into store calls. If the store rejects
        the batch for a reason other than a Redis or Kafka failure, apply the steps one by
        one and hand the ones that still fail to `reject` (the DLQ): one bad record or pod
        never blocks the others, and nothing is dropped silently."""
        try:
            await self._apply_all(decoded)
        except _TRANSIENT:
            raise
        except Exception:
            log.exception("queue: a batch failed; applying its steps one by one")
            for one in decoded:
                try:
                    await self._apply_all([one])
                except _TRANSIENT:
                    raise
                except Exception as e:
                    log.exception("queue: a step was rejected (to the dead letters)")
                    await reject(one[0], f"{type(e).__name__}: {e}")

    async def _apply_all(self, decoded: Sequence[tuple[Any, str, Any]]) -> None:
        for step in group_steps(decoded):
            await self._apply(step)

    # ------------------------------------------------------------- store events

    async def apply_events(self, events: Sequence[QueueEvent]) -> None:
        """Apply the informer's events in order, coalescing runs into store calls. A pod the
        queue cannot take goes to the DLQ; one bad pod never blocks the others."""
        if self.admission is not None:
            events = await self._gate(events)
        decoded: list[tuple[PodRecord | None, str, Any]] = []
        for event in events:
            if isinstance(event, QuotaObjectsChanged):
                continue
            if isinstance(event, ClusterEvent):
                decoded.append((None, "cluster", event))
                continue
            try:
                steps = route_pod_change(event, self.store.tenant_of, self.config.scheduler_names)
            except InvalidTenantError as e:
                await self._dead_letter_pod(event.pod, str(e))
                continue
            decoded.extend((event.pod, kind, item) for kind, item in steps if kind != "skip")

        async with self._batch_lock:
            await self._apply_or_reject(decoded, self._reject_pod)
            self.metrics["store_events"] += len(events)
            if self.rounds is not None:
                await self.rounds.after_events()
        self._work.set()

    async def _reject_pod(self, pod: PodRecord | None, error: str) -> None:
        if pod is not None:  # a cluster event: nothing to dead-letter, logged where it failed
            await self._dead_letter_pod(pod, error)

    async def _gate(self, events: Sequence[QueueEvent]) -> list[QueueEvent]:
        """Quota objects reload admission (once a batch: it reads the store as it is now,
        with every change of the batch); a pod waiting for quota is taken gated; a pod gone
        gives its quota back."""
        assert self.admission is not None
        out: list[QueueEvent] = []
        reloaded = False
        for event in events:
            if isinstance(event, QuotaObjectsChanged) and not reloaded:
                await self.admission.load()
                reloaded = True
            elif isinstance(event, PodChange):
                gated = await self.admission.gate(event.pod, event.op)
                if gated is not event.pod:
                    event = PodChange(event.op, gated, event.old)
            out.append(event)
        # The batch's releases (pods gone), in one call, before the informer moves past it.
        await self.admission.flush()
        return out

    async def _settle(self, verdict: Verdict) -> None:
        """Admitted pods are ungated (an update of their record), the others get a reason.
        The dispatcher takes the admitted pods before the reasons are worked out (with
        15,000 workloads waiting, up to ~100 ms of CPU once a second): their quota is held
        from admission on, and a pod's start is what frees it again."""
        if verdict.admitted:
            await self._apply_or_reject(
                [(p, "upsert", ("update", p)) for p in verdict.admitted], self._reject_pod
            )
            self._work.set()
            await asyncio.sleep(0)
        explained = 0.0 if self.admission is None else await self.admission.explain(verdict)
        written = None if self.admission is None else self.admission.written
        started = time.perf_counter()
        await verdict.write_whys(self.redis, self.store.keys, self.store.tenant_of, written)
        if explained and self.admission is not None:
            self.admission.reasons_took(explained + time.perf_counter() - started)
        self.metrics["quota_admitted"] += len(verdict.admitted)
        self.metrics["quota_rounds"] += 1

    async def relist(self, pods: Sequence[PodRecord]) -> None:
        """After a relist (stream trimmed past the cursor): take every stored pod again, drop
        the ones the store no longer has, wake the unschedulable (a node may have come)."""
        stored = {(pod.key, pod.uid) for pod in pods}
        await self.apply_events([PodChange("update", pod) for pod in pods])
        for tenant in await self.store.tenants():
            view = await self.store.pending(tenant)
            gone = [(p.key, p.uid) for p in view.pods if (p.key, p.uid) not in stored]
            self.metrics["deleted"] += await self.store.delete_in(tenant, gone)
        await self.apply_events([NODE_ADD])

    async def _apply(self, step: Step) -> None:
        store = self.store
        if step.kind == "upsert":
            placed = await store.upsert(step.items)
            for (op, _pod), queue in zip(step.items, placed, strict=True):
                if op == "add" and queue:
                    self.prom.incoming_pods.labels(queue=queue, event="PodAdd").inc()
        elif step.kind == "delete":
            self.metrics["deleted"] += await store.delete(step.items)
        elif step.kind == "outcome":
            effects = await store.record_outcomes(step.items)
            if any(e not in _NOTHING_TO_DISPATCH for e in effects) or any(
                o.pods_to_activate for o in step.items
            ):
                self._outcomes_freed = True
            if tracing_enabled():
                self._effects.update(zip(map(id, step.items), effects, strict=True))
            self.metrics.update(f"outcome_{effect}" for effect in effects)
            for effect in effects:
                if effect in INCOMING_QUEUES:
                    self.prom.incoming_pods.labels(
                        queue=effect, event="ScheduleAttemptFailure"
                    ).inc()
        elif step.kind == "cluster":
            for event in step.items:
                if event.action != ActionType.NONE:
                    moved = await store.move_all(event)
                    self.metrics["woken"] += moved.moved
                    count_incoming(self.prom, moved, event.label)
        elif step.kind == "bound":
            await store.delete(step.items)
            added = await store.assigned_pods_added(step.items)
            self.metrics["woken"] += added.moved
            count_incoming(self.prom, added, "AssignedPodAdd")
        elif step.kind == "assigned_update":
            updated = await store.assigned_pods_updated(step.items)
            self.metrics["woken"] += updated.moved
            count_incoming(self.prom, updated, "AssignedPodUpdate")
        elif step.kind == "assigned_delete":
            await store.delete(step.items)
            # One move for a run of deletions: each would move the same pods.
            deleted = await store.assigned_pod_deleted(step.items[-1])
            self.metrics["woken"] += deleted.moved
            count_incoming(self.prom, deleted, "AssignedPodDelete")

    async def _dead_letter(self, source: Source, error: str) -> None:
        """A consumed record, or the one bad outcome of a batch record, to the dead letters."""
        assert self._producer is not None
        record = source.record
        log.warning("queue: dead letter from %s@%s: %s", record.topic, record.offset, error)
        self.prom.dead_letters.labels(topic=str(record.topic)).inc()
        await self._send_dead_letter(source.dead_letter(SERVICE_NAME, error))

    async def _dead_letter_pod(self, pod: PodRecord, error: str) -> None:
        log.warning("queue: dead letter for stored pod %s: %s", pod.key, error)
        self.prom.dead_letters.labels(topic=STREAM_TOPIC).inc()
        letter = DeadLetter(
            service=SERVICE_NAME,
            topic=STREAM_TOPIC,
            partition=0,
            offset=pod.resource_version,
            error=f"pod {pod.key}: {error}",
            key=pod.uid.encode(),
            payload=pod.body,
        )
        await self._send_dead_letter(letter)

    async def _send_dead_letter(self, letter: DeadLetter) -> None:
        assert self._producer is not None
        await self._producer.send_and_wait(self.config.topics.dlq, letter.encode(), key=letter.key)
        self.metrics["dead_letters"] += 1
