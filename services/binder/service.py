"""The binder service: consume `berth.proposals`, bind, publish outcomes.

    service = BinderService(redis, bootstrap, BinderConfig())
    await service.start()      # view loaded, consumer joined
    ...
    await service.stop()       # in-flight proposals finish or are left for redelivery

At-least-once: a proposal's offset is committed once it and every earlier proposal of its
partition are finished (outcome delivered). A pod waiting at Permit holds back its partition's
commit; if this binder dies, the redelivered proposals are duplicates the store recognises
(a reservation nobody drives is adopted). Undecodable messages go to `berth.dlq`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from redis.asyncio import Redis

from scheduling.cache.cache import ClusterCache
from scheduling.cache.sync import CacheSync
from services.binder.binder import Binder
from services.binder.config import BinderConfig
from services.binder.kube_api import KubeWriter
from shared.messaging.batch_sender import BatchSender
from shared.messaging.kafka import (
    FETCH_MAX_WAIT_MS,
    Headers,
    ensure_topics,
    make_consumer,
    make_producer,
    message_signer,
    message_verifier,
    refusal,
)
from shared.messaging.message_auth import Verifier
from shared.messaging.messages import DeadLetter, Outcome
from shared.messaging.proposals import Proposal
from shared.messaging.wire import BatchItem, MessageError, checked
from shared.observability.metrics import default_metrics, report_consumer_lag
from shared.runtime.retry import Retry
from shared.runtime.security import KafkaSecurity
from shared.runtime.tasks import finish
from shared.store import ClusterStore

log = logging.getLogger(__name__)

FETCH_RECORDS = 10_000
VIEW_LINGER_SECONDS = 0.02
"""How long the view's follower lets changes gather after a short batch. A cross-node check
waiting for its reservation's version hurries it (scheduling/cache/sync.py); the view's copy
of a pod just created may be missing meanwhile, and is then read from the store."""


@dataclass(slots=True)
class _PartitionOffsets:
    pending: dict[int, int] = field(default_factory=dict)
    """offset -> proposals of that record still unfinished (a record may hold a batch)."""
    next_offset: int = -1
    """One past the highest offset seen."""
    committed: int = -1


class OffsetTracker:
    """Which offset of each partition may be committed: the lowest unfinished one, or one
    past the highest seen when all are finished. A record holding a batch of proposals is
    finished when all of them are."""

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _PartitionOffsets] = {}

    def started(self, tp: TopicPartition, offset: int, items: int = 1) -> None:
        state = self._partitions.setdefault(tp, _PartitionOffsets())
        if items > 0:  # a record with none (dead-lettered whole) is finished as it starts
            state.pending[offset] = state.pending.get(offset, 0) + items
        state.next_offset = max(state.next_offset, offset + 1)

    def finished(self, tp: TopicPartition, offset: int) -> None:
        """One item of the record at `offset` is finished."""
        state = self._partitions.get(tp)
        if state is None:
            return
        left = state.pending.get(offset, 0) - 1
        if left > 0:
            state.pending[offset] = left
        else:
            state.pending.pop(offset, None)

    def committable(
        self, only: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Offsets that moved since they were last marked committed."""
        wanted = self._partitions if only is None else {tp: None for tp in only}
        out: dict[TopicPartition, int] = {}
        for tp in wanted:
            state = self._partitions.get(tp)
            if state is None or state.next_offset < 0:
                continue
            offset = min(state.pending) if state.pending else state.next_offset
            if offset > state.committed:
                out[tp] = offset
        return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            state = self._partitions.get(tp)
            if state is not None:
                state.committed = max(state.committed, offset)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._partitions.pop(tp, None)


@dataclass(frozen=True, slots=True)
class Arrival:
    """A decoded proposal and where it came from."""

    tp: TopicPartition
    offset: int
    timestamp: int
    """The record's timestamp (ms): when the worker sent it."""
    proposal: Proposal
    headers: Headers

    @property
    def order(self) -> tuple[int, int]:
        return self.timestamp, self.proposal.sequence


def in_decision_order(runs: Iterable[Sequence[Arrival]]) -> Iterator[Arrival]:
    """One fetch's proposals, each partition's (`runs`) in its own order, merged by the
    time the worker sent them and its sequence number: the order the workers decided them
    in, which the cross-node checks must follow (a worker decides a pod counting every pod it
    proposed before; they arrive on the partitions of their nodes)."""
    return heapq.merge(*runs, key=lambda arrival: arrival.order)


class KafkaEmitter:
    """Outcomes to berth.outcomes, refusals to berth.dlq; each send waits for the broker's
    acknowledgement (the proposal is committed after it). The outcomes of the attempts that
    end in one turn of the event loop travel as one batch record per partition (key: the pod
    uid, as a single outcome's). Bindings and evictions are facts in the store: the queue
    reads them from the change stream."""

    def __init__(self, producer: AIOKafkaProducer, config: BinderConfig) -> None:
        self._producer = producer
        self._topics = config.topics
        self._service = config.service_name
        self.outcomes = BatchSender(
            producer, config.topics.outcomes, Outcome.BATCH, auto_flush=True
        )

    async def outcome(self, outcome: Outcome, headers: Headers | None = None) -> None:
        await self.outcomes.submit(outcome.uid.encode(), outcome.to_body(), headers)

    async def refused(self, proposal: Proposal, reason: str) -> None:
        default_metrics().dead_letters.labels(topic=self._topics.proposals).inc()
        letter = DeadLetter(
            service=self._service,
            topic=self._topics.proposals,
            partition=-1,
            offset=-1,
            error=f"refused: {reason}",
            key=proposal.node_name.encode(),
            payload=proposal.encode(),
        )
        await self._send(self._topics.dlq, proposal.uid, letter.encode(), None)

    async def _send(self, topic: str, key: str, value: bytes, headers: Headers | None) -> None:
        delivery = await self._producer.send(
            topic, value=value, key=key.encode(), headers=headers or None
        )
        await delivery


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, service: BinderService) -> None:
        self._service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._service._commit(list(revoked))
        self._service.tracker.forget(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        return None


class BinderService:
    def __init__(
        self,
        redis: Redis,
        bootstrap: str,
        config: BinderConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        kube: KubeWriter | None = None,
        kafka_security: KafkaSecurity | None = None,
    ) -> None:
        self.config = config if config is not None else BinderConfig()
        self.kube = kube
        """Kubernetes mode: binds and evicts through the API server."""
        self.redis = redis
        self.bootstrap = bootstrap
        self.kafka_security = kafka_security or KafkaSecurity()
        self.clock = clock
        self.store = ClusterStore(redis, cluster=self.config.cluster, prefix=self.config.key_prefix)
        self.view = ClusterCache(holder=f"{self.config.service_name}-{uuid.uuid4().hex[:12]}")
        self.sync = CacheSync(
            self.store, self.view, name="binder-view-sync", linger_seconds=VIEW_LINGER_SECONDS
        )
        self.tracker = OffsetTracker()
        self._producer: AIOKafkaProducer | None = None
        self._emitter: KafkaEmitter | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._verifier: Verifier | None = None
        """Checks the proposals' authenticators (None: no message keys)."""
        self.binder: Binder | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._lag_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.dead_letters = 0

    async def start(self) -> None:
        topics = self.config.topics
        await ensure_topics(
            self.bootstrap,
            [topics.proposals, topics.outcomes, topics.dlq],
            security=self.kafka_security,
        )
        self._producer = make_producer(
            self.bootstrap,
            security=self.kafka_security,
            signer=message_signer(self.kafka_security, "binder", topics),
            **dict(self.config.producer_options),
        )
        self._verifier = message_verifier(self.kafka_security, topics)
        await self._producer.start()
        await self.sync.start()
        self._emitter = KafkaEmitter(self._producer, self.config)
        await self._emitter.outcomes.prepare()
        self.binder = Binder(
            self.store,
            self.view,
            self._emitter,
            self.config,
            clock=self.clock,
            kube=self.kube,
        )
        options = {"fetch_max_wait_ms": FETCH_MAX_WAIT_MS, **self.config.consumer_options}
        self._consumer = make_consumer(
            self.bootstrap, [], self.config.group_id, security=self.kafka_security, **options
        )
        self._consumer.subscribe([topics.proposals], listener=_Rebalance(self))
        await self._consumer.start()
        self._tasks = [
            asyncio.create_task(self._consume(), name="binder-consume"),
            asyncio.create_task(self._commit_loop(), name="binder-commit"),
            asyncio.create_task(self._expire_loop(), name="binder-expire"),
        ]
        self._lag_task = asyncio.create_task(
            report_consumer_lag(self._consumer), name="binder-consumer-lag"
        )

    async def stop(self, *, drain_seconds: float = 5.0) -> None:
        """Stop consuming, give in-flight proposals `drain_seconds`, commit, close. Loops
        are told to stop rather than cancelled mid-command (see shared.runtime.tasks)."""
        self._stopping.set()
        if self._lag_task is not None:
            self._lag_task.cancel()  # aiokafka calls only: cancelling is safe
            await asyncio.gather(self._lag_task, return_exceptions=True)
            self._lag_task = None
        tasks, self._tasks = self._tasks, []
        if tasks:
            await finish(tasks[0], 2.0)  # the consumer loop: at most one fetch to wait for
        if self.binder is not None:
            await self.binder.close(drain_seconds)
        for task in tasks[1:]:
            await finish(task, 2.0)
        if self._consumer is not None:
            await self._commit()
            await self._consumer.stop()
            self._consumer = None
        await self.sync.stop()
        if self._emitter is not None:
            await self._emitter.outcomes.close()
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def run(self, stop: asyncio.Event) -> None:
        """start(), wait for `stop`, stop()."""
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()

    # -------------------------------------------------------------- consuming
    async def _consume(self) -> None:
        assert self._consumer is not None
        assert self.binder is not None
        consumer, binder = self._consumer, self.binder
        retry = Retry(f"{self.config.service_name}: fetching proposals", log)
        while not self._stopping.is_set():
            try:
                # Everything fetched (not a few partitions' worth): the merge below can
                # only order what it sees together.
                batches = await consumer.getmany(timeout_ms=200, max_records=FETCH_RECORDS)
                retry.succeeded()
            except KafkaError as exc:
                await retry.pause(exc, self._stopping)
                continue
            if batches and not binder.redis_gate.is_open:
                # Redis is away (binding cycles met the outage): hold the new proposals
                # until it answers rather than start them only to wait at the gate.
                await self._until(binder.redis_gate.wait())
            runs = [await self._decode_all(tp, records) for tp, records in batches.items()]
            for arrival in in_decision_order(runs):
                slot = await binder.admit()
                task = binder.submit(arrival.proposal, slot, arrival.headers)
                task.add_done_callback(self._finisher(arrival.tp, arrival.offset))

    async def _decode_all(self, tp: TopicPartition, records: Sequence[Any]) -> list[Arrival]:
        """Every usable proposal of the records (one each, or a batch), in their order."""
        out: list[Arrival] = []
        for record in records:
            items = await self._items(record)
            self.tracker.started(tp, record.offset, len(items))
            for item in items:
                proposal = await self._decode(record, item)
                if proposal is None:
                    self.tracker.finished(tp, record.offset)
                    continue
                out.append(Arrival(tp, record.offset, record.timestamp, proposal, item.headers))
        return out

    def _finisher(self, tp: TopicPartition, offset: int) -> Callable[[object], None]:
        def finished(_: object) -> None:
            self.tracker.finished(tp, offset)

        return finished

    async def _items(self, record: Any) -> list[BatchItem]:
        """The record's proposals, unchecked; none after sending the record to the
        dead-letter topic (not authentic, empty, not a proposal or a batch of them)."""
        refused = refusal(self._verifier, record)
        if refused:
            await self._dead_letter(record, refused)
            return []
        if record.value is None:
            await self._dead_letter(record, "empty message")
            return []
        try:
            return Proposal.items_of(record.value, record.headers or ())
        except MessageError as exc:
            await self._dead_letter(record, str(exc))
            return []

    async def _decode(self, record: Any, item: BatchItem) -> Proposal | None:
        """The item's proposal, or None after sending the item alone to the dead-letter
        topic (one bad proposal of a batch never holds back the others)."""
        try:
            return Proposal.from_body(checked(item))
        except MessageError as exc:
            await self._dead_letter(record, str(exc), item.alone(Proposal.TYPE))
            return None

    async def _dead_letter(self, record: Any, error: str, payload: bytes | None = None) -> None:
        assert self._producer is not None
        self.dead_letters += 1
        default_metrics().dead_letters.labels(topic=str(record.topic)).inc()
        letter = DeadLetter.of_record(self.config.service_name, record, error, payload)
        delivery = await self._producer.send(
            self.config.topics.dlq, value=letter.encode(), key=record.key
        )
        await delivery

    async def _commit(self, only: Iterable[TopicPartition] | None = None) -> None:
        if self._consumer is None:
            return
        offsets = self.tracker.committable(only)
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:  # a rebalance: redelivery is harmless
            log.warning("commit failed: %s", exc)
            return
        self.tracker.mark_committed(offsets)

    async def _until(self, event: Awaitable[None]) -> None:
        """Until `event`, or the service stops."""
        waits = [asyncio.ensure_future(event), asyncio.ensure_future(self._stopping.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _pause(self, seconds: float) -> bool:
        """Sleep `seconds`; False when the service is stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        return not self._stopping.is_set()

    async def _commit_loop(self) -> None:
        while await self._pause(self.config.commit_interval_seconds):
            await self._commit()

    async def _expire_loop(self) -> None:
        """Release reservations whose binder died (any replica may do it)."""
        retry = Retry(f"{self.config.service_name}: expiring reservations", log)
        pause = self.config.expire_interval_seconds
        while await self._pause(pause):
            try:
                released = await self.store.bindings.expire(self.clock())
                retry.succeeded()
                pause = self.config.expire_interval_seconds
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                pause = max(self.config.expire_interval_seconds, retry.failed(exc))
                continue
            for reservation in released:
                self.view.forget(reservation.uid)
