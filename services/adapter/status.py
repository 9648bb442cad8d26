"""What `kubectl describe pod` shows about berth's decisions: conditions, nominations, Events.

The adapter follows `berth.outcomes` (its own consumer group, at-least-once) and, for each
attempt's end, writes to the API server what kube-scheduler writes (pkg/scheduler/schedule_one.go
handleSchedulingFailure and the binding cycle):

- scheduled: no status write (the binding set PodScheduled=True); a Normal `Scheduled`
  Event, "Successfully assigned ns/name to node".
- unschedulable: PodScheduled=False with reason `Unschedulable` and the FitError text, plus
  nominatedNodeName when preemption nominated a node; a Warning `FailedScheduling` Event
  with the same text.
- error: PodScheduled=False with reason `SchedulerError`; a Warning `FailedScheduling`.
- conflict, extend: nothing (berth retries at once; not the pod's fault).

Events are events.k8s.io/v1, aggregated into series as kube-scheduler's recorder does
(services.adapter.events), so a pod retried for hours does not flood the API.

What is written, and where, is limited (the outcomes topic is not trusted further than this):
- only pods the store holds as berth's: a pending or bound pod whose schedulerName is one of
  berth's profiles, with the outcome's uid (a pod of another scheduler, a pod the store never
  took, an older life of the name: nothing is written);
- an unschedulable or error outcome for a pod that is bound already (a stale outcome,
  delivered late or again) is dropped: a running pod is never marked PodScheduled=False;
- a status patch is sent only when it changes something (the same condition and nomination
  for the same pod are written once), and carries the pod's uid as precondition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from services.adapter.events import EventRecorder
from shared.kube.client import KubeApi, KubeApiError, KubeUnavailableError
from shared.kube.events import rfc3339
from shared.messaging.kafka import refusal
from shared.messaging.message_auth import Verifier
from shared.messaging.messages import Outcome
from shared.messaging.wire import MessageError
from shared.runtime.retry import Backoff, Retry
from shared.store import ClusterStore

log = logging.getLogger(__name__)

IN_FLIGHT = 32
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


@dataclass(frozen=True, slots=True)
class Report:
    """What to write for one outcome: a pods/status patch and/or an Event."""

    patch: dict[str, Any] | None
    event_type: str = ""
    reason: str = ""
    message: str = ""
    action: str = ""


def report_for(outcome: Outcome) -> Report | None:
    """The API writes for an outcome (see the module docstring), or None."""
    namespace, _, name = outcome.pod_key.partition("/")
    if outcome.result == "scheduled":
        message = f"Successfully assigned {namespace}/{name} to {outcome.node_name}"
        return Report(None, "Normal", "Scheduled", message, "Binding")
    if outcome.result not in ("unschedulable", "error"):
        return None
    reason = REASON_UNSCHEDULABLE if outcome.result == "unschedulable" else REASON_SCHEDULER_ERROR
    return failed_scheduling(outcome.message, reason=reason, nominated=outcome.nominated_node_name)


def failed_scheduling(
    message: str, *, reason: str = REASON_UNSCHEDULABLE, nominated: str | None = None
) -> Report:
    """kube-scheduler's report of a pod it could not schedule: PodScheduled=False with the
    reason and message (and the nomination, "" clearing it), a FailedScheduling Event with
    the same message."""
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": rfc3339(),
            }
        ]
    }
    if nominated is not None:
        # "" clears a nomination: null removes the field in a merge patch.
        status["nominatedNodeName"] = nominated or None
    return Report({"status": status}, "Warning", "FailedScheduling", message, "Scheduling")


class Reporter:
    """Writes reports to pods: the status patch (when it changes something), then the Event
    (into its series); retried on 429, 5xx and lost connections, given up on a pod that is
    gone."""

    def __init__(self, api: KubeApi, instance: str, clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.instance = instance
        self.recorder = EventRecorder(api, instance, clock)
        self._status: dict[str, tuple[str, str, str | None]] = {}
        """pod uid -> (reason, message, nomination) of the last condition written."""
        self.patches = 0

    @property
    def written(self) -> int:
        """Event writes: created, and series patched."""
        return self.recorder.created + self.recorder.patched

    async def deliver(
        self, namespace: str, name: str, uid: str, report: Report, component: str
    ) -> None:
        key = f"{namespace}/{name}"
        retry = Retry(f"adapter: reporting on {key}", log, Backoff(0.2, 5.0))
        for _ in range(5):
            try:
                await self._write(namespace, name, uid, report, component)
            except KubeApiError as e:
                if e.code in (404, 409):
                    return  # the pod is gone, or its name belongs to another pod now
                if e.code < 500 and e.code != 429:
                    log.warning("cannot report on %s: %s", key, e)
                    return
                await retry.pause(e)
            except KubeUnavailableError as e:
                await retry.pause(e)
            else:
                return
        log.warning("gave up reporting on %s after 5 tries", key)

    async def _write(
        self, namespace: str, name: str, uid: str, report: Report, component: str
    ) -> None:
        if report.patch is not None:
            status = report.patch.get("status") or {}
            (condition,) = status.get("conditions") or [{}]
            written = (
                str(condition.get("reason") or ""),
                str(condition.get("message") or ""),
                status.get("nominatedNodeName", "(unset)"),
            )
            if self._status.get(uid) != written:
                await self.api.patch_pod_status(namespace, name, report.patch, uid=uid)
                self.patches += 1
                self._status[uid] = written
                if len(self._status) > 50_000:
                    self._status.clear()
        if not report.event_type:
            return  # a condition only (services.adapter.quota)
        await self.recorder.record(
            namespace,
            name,
            uid,
            controller=component,
            event_type=report.event_type,
            reason=report.reason,
            action=report.action,
            note=report.message,
        )


class StatusWriter:
    """Follows outcomes and writes their reports; see the module docstring."""

    def __init__(
        self,
        reporter: Reporter,
        store: ClusterStore,
        consumer: AIOKafkaConsumer,
        scheduler_names: frozenset[str],
        verifier: Verifier | None = None,
    ) -> None:
        self.verifier = verifier
        """Outcomes without a valid authenticator are not acted on (None: none checked)."""
        self.reporter = reporter
        self.store = store
        self.consumer = consumer
        self.scheduler_names = scheduler_names
        self.dropped = 0
        """Outcomes written nowhere: not berth's pod, another life, or bound already."""
        self._in_flight = asyncio.Semaphore(IN_FLIGHT)
        """API calls of a batch run concurrently (one at a time would cap the reports at
        one round trip each, a few hundred pods per second)."""

    async def run(self) -> None:
        retry = Retry("adapter: following outcomes", log, Backoff(0.5, 30.0))
        while True:
            try:
                batches = await self.consumer.getmany(timeout_ms=500, max_records=500)
                # Outcomes are keyed by pod: one pod's stay in order (one partition, one
                # sequence), different pods' are written concurrently.
                by_pod: dict[bytes, list[bytes | None]] = {}
                for records in batches.values():
                    for record in records:
                        refused = refusal(self.verifier, record)
                        if refused:  # the queue dead-letters it; here it is only skipped
                            log.warning("adapter: skipped an outcome: %s", refused)
                            continue
                        by_pod.setdefault(record.key or b"", []).append(record.value)
                await asyncio.gather(*(self._in_order(values) for values in by_pod.values()))
                if batches:
                    await self.consumer.commit()
                retry.succeeded()
            except KafkaError as e:
                await retry.pause(e)

    async def _in_order(self, values: list[bytes | None]) -> None:
        for value in values:
            await self._one(value)

    async def _one(self, value: bytes | None) -> None:
        """A record's outcomes (one, or a batch), in order."""
        try:
            # Invalid ones are skipped: the queue dead-letters what nobody can read.
            outcomes = Outcome.decode_all(value or b"", lenient=True)
        except MessageError:
            return
        for outcome in outcomes:
            async with self._in_flight:
                await self.write(outcome)

    async def write(self, outcome: Outcome) -> None:
        report = report_for(outcome)
        if report is None:
            return
        namespace, _, name = outcome.pod_key.partition("/")
        pod = await self.store.get_pod(namespace, name)
        failed = report.patch is not None
        if (
            pod is None
            or pod.metadata.uid != outcome.uid
            or pod.spec.scheduler_name not in self.scheduler_names
            or (failed and pod.spec.node_name)
        ):
            self.dropped += 1
            return
        await self.reporter.deliver(namespace, name, outcome.uid, report, pod.spec.scheduler_name)


async def stop_consumer(consumer: AIOKafkaConsumer) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(consumer.stop(), 5)
