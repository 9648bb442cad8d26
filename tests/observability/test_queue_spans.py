"""The queue's spans (services/queue/spans.py) on a real queue service (Redis, Kafka) read
from an OTLP receiver: its handling of each outcome is a span in the pod's trace, a child of
the span that sent the outcome, and a conflict retry's dispatch span starts when the
conflict put the pod back, not at the pod's first enqueue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from services.queue.config import QueueConfig
from services.queue.service import QueueService
from services.queue.spans import (
    ATTR_EFFECT,
    ATTR_OUTCOME,
    SPAN_OUTCOME,
    schedule_headers,
    trace_outcomes,
)
from shared.messaging.kafka import Topics, ensure_topics, make_producer
from shared.messaging.messages import Outcome, ScheduleBatch, ScheduleRequest
from shared.observability.tracing import (
    ATTR_ATTEMPT,
    ATTR_PLUGINS,
    ATTR_POD_UID,
    SPAN_BINDING_CYCLE,
    SPAN_DISPATCH,
    binding_cycle_span,
    dispatch_headers,
    inject_headers,
    pod_span,
    pod_trace_id,
)
from shared.observability.tracing_setup import Tracing
from shared.store import ClusterStore
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.queue.builders import make_pod, outcome
from tests.queue.kafka_helpers import CONSUMER_OPTIONS

STATUS_UNSET, STATUS_ERROR = 0, 2


def request_of(uid: str, *, attempt: int = 1, queued_at: float = 0.0) -> ScheduleRequest:
    return ScheduleRequest(
        tenant="default",
        pod_key=f"default/{uid}",
        uid=uid,
        attempt=attempt,
        scheduling_cycle=1,
        priority=0,
        timestamp=queued_at,
        initial_attempt_timestamp=queued_at,
        lease_expires_at=queued_at + 30,
    )


# ------------------------------------------------------------------------------ units
def test_a_dispatch_span_starts_when_the_pod_was_put_back(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    first_queued, put_back, now = 1_000.0, 1_050.0, 1_060.0
    retried = request_of("uid-c", attempt=2, queued_at=first_queued)
    fresh = request_of("uid-f", queued_at=first_queued)
    dispatch_headers([retried, fresh], now=now, requeued={"default/uid-c": put_back})
    tracing.shutdown()
    spans = {s.attributes[ATTR_POD_UID]: s for s in receiver.wait_for(2)}
    assert spans["uid-c"].start_ns == int(put_back * 1e9)
    assert spans["uid-f"].start_ns == int(first_queued * 1e9)  # never put back: its timestamp
    assert {s.end_ns for s in spans.values()} == {int(now * 1e9)}


def test_a_pod_span_without_a_parent_is_in_the_pods_trace(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    start = time.time() - 2.0
    with pod_span(SPAN_OUTCOME, request_of("uid-r"), start_time=start):
        pass
    tracing.shutdown()
    (span,) = receiver.wait_for(1)
    assert span.trace_id == format(pod_trace_id("uid-r"), "032x")
    assert span.parent_span_id == ""
    assert span.start_ns == int(start * 1e9)


def test_an_outcome_not_applied_is_an_error_span(receiver: OtlpReceiver, tracing: Tracing) -> None:
    failed = Outcome(
        tenant="default",
        pod_key="default/uid-x",
        uid="uid-x",
        attempt=1,
        result="unschedulable",
        unschedulable_plugins=("NodePorts",),
    )
    kept = Outcome(
        tenant="default", pod_key="default/uid-y", uid="uid-y", attempt=1, result="scheduled"
    )
    trace_outcomes([(None, failed), (None, kept)], {id(kept): "noted"}, time.time())
    tracing.shutdown()
    spans = {s.attributes[ATTR_POD_UID]: s for s in receiver.wait_for(2)}
    assert spans["uid-x"].status_code == STATUS_ERROR
    assert ATTR_EFFECT not in spans["uid-x"].attributes
    assert spans["uid-x"].attributes[ATTR_PLUGINS] == ["NodePorts"]
    assert (spans["uid-y"].status_code, spans["uid-y"].attributes[ATTR_EFFECT]) == (
        STATUS_UNSET,
        "noted",
    )


# ------------------------------------------------------------------ the queue service
class ScheduleRecords:
    """Every record of the schedule topic from the start: (request, its record's headers)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        self.seen: list[tuple[ScheduleRequest, Any]] = []

    async def __aenter__(self) -> ScheduleRecords:
        await self.consumer.start()
        partitions = self.consumer.partitions_for_topic(self.topic)
        while not partitions:
            await asyncio.sleep(0.1)
            await self.consumer.topics()
            partitions = self.consumer.partitions_for_topic(self.topic)
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(tps)
        await self.consumer.seek_to_beginning(*tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def wait_for(self, count: int, within: float = 20.0) -> list[tuple[ScheduleRequest, Any]]:
        deadline = time.monotonic() + within
        while len(self.seen) < count:
            assert time.monotonic() < deadline, f"timed out: {len(self.seen)} requests"
            fetched = await self.consumer.getmany(timeout_ms=50)
            for records in fetched.values():
                for record in records:
                    for request in ScheduleBatch.decode(record.value or b"").requests:
                        self.seen.append((request, record.headers))
        return self.seen


@pytest.fixture
async def queue(
    redis_url: str,
    redis_client: Any,
    redis_prefix: str,
    kafka_bootstrap: str,
    topics: Topics,
    group_id: str,
    tracing: Tracing,
) -> AsyncIterator[tuple[QueueService, ClusterStore]]:
    await ensure_topics(kafka_bootstrap, topics.all(), partitions=2)
    cluster = ClusterStore(redis_client, cluster="c", prefix=redis_prefix + "store:")
    config = QueueConfig(
        key_prefix=redis_prefix,
        topics=topics,
        group_id=group_id,
        topic_partitions=2,
        max_inflight_per_tenant=0,
        dispatch_idle_interval=0.02,
    )
    service = QueueService(
        redis_url,
        kafka_bootstrap,
        config,
        consumer_options=CONSUMER_OPTIONS,
        cluster_store=cluster,
        headers_hook=schedule_headers,  # as `python -m services.queue` runs it
    )
    await service.start()
    try:
        yield service, cluster
    finally:
        await service.stop()


async def send_outcome(bootstrap: str, topic: str, result: Outcome, headers: Any) -> None:
    producer = make_producer(bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, result.encode(), key=result.uid.encode(), headers=headers
        )
    finally:
        await producer.stop()


async def wait(condition: Any, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def of_pod(spans: list[ReceivedSpan], name: str, uid: str) -> list[ReceivedSpan]:
    found = [s for s in spans if s.name == name and s.attributes.get(ATTR_POD_UID) == uid]
    return sorted(found, key=lambda s: (s.attributes.get(ATTR_ATTEMPT, 0), s.start_ns))


async def test_outcomes_are_spans_and_a_conflict_retry_waits_from_the_conflict(
    queue: tuple[QueueService, ClusterStore],
    receiver: OtlpReceiver,
    tracing: Tracing,
    kafka_bootstrap: str,
    topics: Topics,
) -> None:
    service, cluster = queue
    pod = make_pod("p")
    await cluster.apply([pod])
    uid = pod.metadata.uid
    async with ScheduleRecords(kafka_bootstrap, topics.schedule) as schedule:
        [(first, first_headers)] = await schedule.wait_for(1)
        # The binder refuses the node (a conflict), from a binding cycle under the dispatch.
        await asyncio.sleep(0.3)  # the retry's wait must not be the first attempt's
        with binding_cycle_span(first, first_headers):
            conflict_headers = inject_headers()
        conflict = outcome(first, "conflict", message="node taken")
        await send_outcome(kafka_bootstrap, topics.outcomes, conflict, conflict_headers)
        await wait(lambda: service.metrics["outcome_active"] == 1)
        _, (second, second_headers) = await schedule.wait_for(2)
        assert second.attempt == 2
        assert second.timestamp == first.timestamp  # the conflict kept its place
        with binding_cycle_span(second, second_headers):
            bound_headers = inject_headers()
        done = outcome(second, "scheduled", node_name="n1")
        await send_outcome(kafka_bootstrap, topics.outcomes, done, bound_headers)
        await wait(lambda: service.metrics["outcome_noted"] == 1)
    tracing.shutdown()
    spans = receiver.wait_for(6)
    trace_id = format(pod_trace_id(uid), "032x")
    assert {s.trace_id for s in spans if s.attributes.get(ATTR_POD_UID) == uid} == {trace_id}

    d1, d2 = of_pod(spans, SPAN_DISPATCH, uid)
    b1, b2 = of_pod(spans, SPAN_BINDING_CYCLE, uid)
    o1, o2 = of_pod(spans, SPAN_OUTCOME, uid)
    # Each outcome's span is the child of the binding cycle that sent it.
    assert (o1.parent_span_id, o2.parent_span_id) == (b1.span_id, b2.span_id)
    assert (o1.attributes[ATTR_OUTCOME], o1.attributes[ATTR_EFFECT]) == ("conflict", "active")
    assert (o2.attributes[ATTR_OUTCOME], o2.attributes[ATTR_EFFECT]) == ("scheduled", "noted")
    assert o1.status_code == o2.status_code == STATUS_UNSET
    assert o1.start_ns <= o1.end_ns
    # The retry's dispatch waits from the conflict's handling, after the first attempt.
    assert d1.start_ns == int(first.timestamp * 1e9)
    assert d2.start_ns >= o1.start_ns > d1.end_ns
    assert d2.start_ns <= d2.end_ns
