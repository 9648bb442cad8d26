"""What a scheduler worker does with each decision: the result on its cycle span, its part of
kube-scheduler's metrics, the proposal stamped with its times and numbered in decision order,
and the records sent (proposals keyed by node, outcomes by pod uid, dead letters) through one
batch sender per topic."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import AIOKafkaProducer
from opentelemetry.trace import Span

from services.scheduler.config import WorkerConfig
from services.scheduler.cycle import Decision
from services.scheduler.heartbeat import WorkerStats
from shared.messaging.batch_sender import BatchSender
from shared.messaging.kafka import Headers
from shared.messaging.messages import DeadLetter, Outcome, ScheduleRequest
from shared.messaging.proposals import Proposal
from shared.models.evolve import evolve
from shared.observability.logs import DecisionLog
from shared.observability.metrics import BerthMetrics
from shared.observability.tracing import add_victim_events, set_result

log = logging.getLogger(__name__)


def record_result(span: Span, decision: Decision) -> None:
    """The attempt's result as the worker sees it, on its scheduling-cycle span."""
    proposal, outcome = decision.proposal, decision.outcome
    if proposal is not None:
        result = "proposed" if proposal.kind == "bind" else "preempting"
        set_result(
            span,
            result,
            node_name=proposal.node_name,
            message=proposal.message,
            plugins=proposal.unschedulable_plugins,
        )
        if proposal.victims:
            victims = [(v.pod_key, v.uid) for v in proposal.victims]
            add_victim_events(span, victims, proposal.node_name)
    elif outcome is not None:
        set_result(
            span,
            outcome.result,
            node_name=outcome.node_name,
            message=outcome.message,
            plugins=outcome.unschedulable_plugins,
        )


class Results:
    """The worker's sending side; `start(producer)` once the producer runs."""

    def __init__(self, config: WorkerConfig, stats: WorkerStats, metrics: BerthMetrics) -> None:
        self.config = config
        self.stats = stats
        self.metrics = metrics
        self._decisions = DecisionLog(log)
        self._producer: AIOKafkaProducer | None = None
        self._proposals: BatchSender | None = None
        self._outcomes: BatchSender | None = None
        """Proposals and outcomes, one record per partition for the pods of one flush
        (shared.messaging.batch_sender): flushed after a schedule batch that leaves FLUSH_AT
        of them unsent or after a fetch's last batch (services.scheduler.service), and
        before a preemptor waits."""
        self._sequence = 0
        self.unsent = 0
        """Decisions submitted since the last `flush`."""

    async def start(self, producer: AIOKafkaProducer) -> None:
        topics = self.config.topics
        self._producer = producer
        self._proposals = BatchSender(producer, topics.proposals, Proposal.BATCH)
        self._outcomes = BatchSender(producer, topics.outcomes, Outcome.BATCH)
        await self._proposals.prepare()
        await self._outcomes.prepare()

    def measured(
        self, decision: Decision, request: ScheduleRequest, cycle_started: float, began: float
    ) -> Decision:
        """Record the worker's part of kube-scheduler's metrics; stamp a proposal with the
        times the binder needs for the attempt's duration and the pod's SLI latency."""
        elapsed = time.perf_counter() - began
        proposal, outcome = decision.proposal, decision.outcome
        if proposal is not None:
            self.metrics.algorithm_duration.observe(elapsed)
            if proposal.kind == "preempt":
                self.metrics.record_preemption(len(proposal.victims))
            stamped = evolve(
                proposal,
                cycle_started=cycle_started,
                queued_at=request.initial_attempt_timestamp,
            )
            return Decision(proposal=stamped)
        if outcome is not None and outcome.result in ("unschedulable", "error"):
            if outcome.result == "unschedulable":
                self.metrics.algorithm_duration.observe(elapsed)
            self.metrics.record_attempt(outcome.result, elapsed)
        return decision

    def submit(self, decision: Decision, headers: Headers) -> asyncio.Future[None]:
        """Queue the decision's proposal or outcome (sent at the next `flush`)."""
        assert self._proposals is not None
        assert self._outcomes is not None
        self.unsent += 1
        if decision.proposal is not None:
            # Numbered in decision order: the binder merges its partitions by it.
            self._sequence += 1
            proposal = decision.proposal
            if proposal.kind == "preempt":
                self.stats.preemptions += 1
            self.stats.proposals += 1
            body = proposal.to_body()
            body["seq"] = self._sequence  # Proposal.sequence, set on the wire
            return self._proposals.submit(proposal.node_name.encode(), body, headers)
        outcome = decision.outcome
        assert outcome is not None
        self.stats.outcomes += 1
        return self._outcomes.submit(outcome.uid.encode(), outcome.to_body(), headers)

    async def flush(self) -> None:
        assert self._proposals is not None
        assert self._outcomes is not None
        self.unsent = 0
        await self._proposals.flush()
        await self._outcomes.flush()

    async def dead_letter(self, record: Any, error: str) -> asyncio.Future[Any]:
        assert self._producer is not None
        self.stats.dead_letters += 1
        self.metrics.dead_letters.labels(topic=str(record.topic)).inc()
        self._decisions.info(
            "dead_letter",
            "dead letter from %s@%s: %s",
            record.topic,
            record.offset,
            error,
            topic=str(record.topic),
        )
        letter = DeadLetter.of_record(self.config.service_name, record, error)
        delivery: asyncio.Future[Any] = await self._producer.send(
            self.config.topics.dlq, value=letter.encode(), key=record.key
        )
        return delivery
