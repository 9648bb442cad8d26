"""The queue's spans in each pod's trace: `queue.dispatch` (the dispatcher's headers hook) and
`queue.outcome` (its handling of an attempt's outcome).

A dispatch span starts when the pod was last queued: its queue timestamp, or, when an
outcome put it back later (a conflict keeps its place in the queue, so its timestamp stays
the first attempt's), that moment (QueueReads.requeued_at), never before the attempt before.

Each consumed outcome gets one span, a child of the worker's or binder's span that sent it
(the record's trace headers; a root in the pod's trace when it has none, and nothing for an
attempt the queue chose not to trace). It covers the batch's store calls and carries the
outcome's result (`berth.queue.outcome`) and what the queue did with the pod
(`berth.queue.effect`): back to active (a first conflict), backoff, unschedulable (parked
until an event wakes it), noted (scheduled: the pod leaves when the store shows it bound),
extended (a lease renewed), stale (an outdated or duplicate outcome).
An outcome the queue could not apply (sent to the dead letters) is an ERROR span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opentelemetry.trace import SpanKind, Status, StatusCode

from shared.messaging.messages import Outcome, ScheduleBatch
from shared.observability.tracing import ATTR_PLUGINS, Headers, dispatch_headers, pod_span

SPAN_OUTCOME = "queue.outcome"
ATTR_EFFECT = "berth.queue.effect"
ATTR_OUTCOME = "berth.queue.outcome"
"""The outcome's result (not `berth.result`: that is the attempt's span, ERROR when it failed;
the queue's handling of a conflict did not fail)."""

Handled = tuple[Sequence[tuple[str, bytes]] | None, Outcome]
"""An outcome and the trace headers of its record."""


def schedule_headers(batch: ScheduleBatch, requeued: Mapping[str, float]) -> Headers:
    """The queue's headers hook: a dispatch span per pod of `batch`, its context in headers."""
    return dispatch_headers(batch.requests, requeued=requeued)


def trace_outcomes(handled: Sequence[Handled], effects: Mapping[int, str], started: float) -> None:
    """One `queue.outcome` span per outcome, from `started` (epoch seconds) to now;
    `effects`: id(outcome) -> what the queue did (missing: not applied)."""
    for headers, outcome in handled:
        effect = effects.get(id(outcome), "")
        with pod_span(
            SPAN_OUTCOME, outcome, headers, kind=SpanKind.CONSUMER, start_time=started
        ) as span:
            if not span.is_recording():
                continue
            span.set_attribute(ATTR_OUTCOME, outcome.result)
            plugins = sorted({*outcome.unschedulable_plugins, *outcome.pending_plugins})
            if plugins:
                span.set_attribute(ATTR_PLUGINS, plugins)
            if effect:
                span.set_attribute(ATTR_EFFECT, effect)
            else:
                span.set_status(Status(StatusCode.ERROR, "not applied: sent to the dead letters"))
