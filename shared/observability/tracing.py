"""OpenTelemetry tracing for the berth services: one trace per pod, every attempt in it.

    tracing = setup_tracing(TracingConfig.from_env("berth-queue", os.environ))  # tracing_setup
    ...                                  # the span helpers below
    await tracing.ashutdown()            # flush (bounded by the export timeout)

With no OTLP endpoint configured (tests, `berth up`, `berth run`) `setup_tracing` installs
nothing: every helper returns a shared no-op context manager and `inject_*` return the headers
unchanged, so the hot paths pay one global lookup.

A pod attempt's trace (W3C trace context travels in Kafka headers)::

    queue.dispatch            queue: starts when the pod was (re)queued, ends at publish
     └─ scheduling_cycle      worker: parent from the berth.schedule headers (per pod)
         ├─ PreFilter, Filter, PostFilter, PreScore, Score, NormalizeScore, Reserve, Permit
         └─ binding_cycle     binder: parent from the berth.proposals headers
             ├─ WaitOnPermit, PreBind, Bind, PostBind
             └─ queue.outcome    queue: handling the attempt's outcome (services/queue/spans.py)

Every attempt of a pod is in one trace: the trace id is derived from the pod's uid
(`pod_trace_id`), so the queue's dispatch spans of attempts 1, 2, 3... are roots of the same
trace, and the ratio sampler (which looks at the trace id only) decides once per pod: a pod's
failed and successful attempts are kept or dropped together.

A berth.schedule message carries many pods, so each pod's context travels in headers of its
own, named `traceparent.<pod uid>` (and `tracestate.<pod uid>`); one-pod messages
(proposals, outcomes) use the plain `traceparent` header.

Sampling is decided once, by the queue (BERTH_TRACE_SAMPLE_RATIO), and travels in the
headers: the worker and binder skip the SDK for an unsampled attempt (about 15 us a pod over
the helpers, against 0.1-0.4 ms for a traced one), and extension point spans exist only under
a recorded cycle.

Queue (as QueueService's `headers_hook`)::

    QueueService(..., headers_hook=services.queue.spans.schedule_headers)

Worker, per request of a batch record::

    with scheduling_cycle_span(request, record.headers) as span:
        with extension_point_span("Filter"):
            ...
        set_result(span, "scheduled", node_name=node)
        headers = inject_headers()       # the proposal's headers: the binder's parent

Binder, per proposal record::

    with binding_cycle_span(proposal, record.headers) as span:
        with binding_step_span("PreBind"):
            ...
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from shared.observability.tracing_config import ENV_ENDPOINT as ENV_ENDPOINT
from shared.observability.tracing_config import ENV_SAMPLE_RATIO as ENV_SAMPLE_RATIO
from shared.observability.tracing_config import TracingConfig as TracingConfig
from shared.observability.tracing_config import TracingConfigError as TracingConfigError

Headers = list[tuple[str, bytes]]
"""aiokafka record headers."""

INSTRUMENTATION_NAME = "berth"

SPAN_DISPATCH = "queue.dispatch"
SPAN_SCHEDULING_CYCLE = "scheduling_cycle"
SPAN_BINDING_CYCLE = "binding_cycle"

ATTR_POD_UID = "berth.pod.uid"
ATTR_POD_KEY = "berth.pod.key"
ATTR_ATTEMPT = "berth.pod.attempt"
ATTR_TENANT = "berth.tenant"
ATTR_SCHEDULING_CYCLE = "berth.scheduling_cycle"
ATTR_EXTENSION_POINT = "berth.extension_point"
ATTR_RESULT = "berth.result"
ATTR_NODE = "berth.node"
ATTR_PLUGINS = "berth.unschedulable_plugins"
ATTR_MESSAGE = "berth.message"
ATTR_STATUS_CODE = "berth.status_code"
ATTR_PLUGIN = "berth.plugin"
EVENT_VICTIM = "preemption.victim"

_POD_HEADER_SEPARATOR = "."
_PROPAGATOR = TraceContextTextMapPropagator()


class PodAttempt(Protocol):
    """What the span helpers read from a message: ScheduleRequest, Proposal and Outcome all
    have these attributes."""

    @property
    def uid(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def pod_key(self) -> str: ...

    @property
    def tenant(self) -> str: ...


_tracer: Tracer | None = None
_provider_of_tracer: TracerProvider | None = None


def install(tracer: Tracer | None, provider: TracerProvider | None) -> None:
    """Make `tracer` (of `provider`) the one the helpers record with; None: no-ops
    (shared/observability/tracing_setup.py calls it)."""
    global _tracer, _provider_of_tracer
    _tracer, _provider_of_tracer = tracer, provider


def installed_provider() -> TracerProvider | None:
    return _provider_of_tracer


POD_TRACE: contextvars.ContextVar[int] = contextvars.ContextVar("berth_pod_trace", default=0)


def pod_trace_id(pod_uid: str) -> int:
    """The trace id of every attempt of the pod with this uid (128 bits of its SHA-256)."""
    digest = hashlib.sha256(b"berth-pod-trace:" + pod_uid.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1


def tracing_enabled() -> bool:
    """Whether spans are recorded: callers may skip building attributes when not."""
    return _tracer is not None


# ------------------------------------------------------------------------- propagation
class _HeadersSetter(Setter[Headers]):
    def __init__(self, suffix: str) -> None:
        self._suffix = suffix

    def set(self, carrier: Headers, key: str, value: str) -> None:
        carrier.append((key + self._suffix, value.encode("ascii")))


class _HeadersGetter(Getter[Sequence[tuple[str, bytes]]]):
    def __init__(self, suffix: str) -> None:
        self._suffix = suffix

    def get(self, carrier: Sequence[tuple[str, bytes]], key: str) -> list[str] | None:
        wanted = key + self._suffix
        values = [value.decode("ascii", "replace") for name, value in carrier if name == wanted]
        return values or None

    def keys(self, carrier: Sequence[tuple[str, bytes]]) -> list[str]:
        return [name for name, _ in carrier]


_MESSAGE_SETTER = _HeadersSetter("")
_MESSAGE_GETTER = _HeadersGetter("")


def pod_header_suffix(pod_uid: str) -> str:
    """`traceparent` + this names one pod's header in a many-pod message."""
    return _POD_HEADER_SEPARATOR + pod_uid


def inject_headers(
    headers: Headers | None = None, *, context: Context | None = None, pod_uid: str | None = None
) -> Headers:
    """Append the W3C trace context of `context` (default: the current span) to `headers`
    (a new list if None) and return it. `pod_uid` names the headers after one pod (a batch
    message). Returns the headers unchanged when tracing is off or there is no span."""
    out: Headers = [] if headers is None else headers
    if _tracer is None:
        return out
    setter = _MESSAGE_SETTER if pod_uid is None else _HeadersSetter(pod_header_suffix(pod_uid))
    _PROPAGATOR.inject(out, context=context, setter=setter)
    return out


def extract_context(
    headers: Sequence[tuple[str, bytes]] | None, *, pod_uid: str | None = None
) -> Context | None:
    """The remote parent carried by `headers`: the pod's own headers first (when `pod_uid` is
    given), then the message's. None when there is none (or tracing is off)."""
    if _tracer is None or not headers:
        return None
    getters = [_MESSAGE_GETTER]
    if pod_uid is not None:
        getters.insert(0, _HeadersGetter(pod_header_suffix(pod_uid)))
    for getter in getters:
        context = _PROPAGATOR.extract(headers, context=Context(), getter=getter)
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    return None


# ------------------------------------------------------------------------- span helpers
_NOOP: AbstractContextManager[Span] = contextlib.nullcontext(INVALID_SPAN)


def attempt_attributes(attempt: PodAttempt) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        ATTR_POD_UID: attempt.uid,
        ATTR_ATTEMPT: attempt.attempt,
    }
    if attempt.pod_key:
        attributes[ATTR_POD_KEY] = attempt.pod_key
    if attempt.tenant:
        attributes[ATTR_TENANT] = attempt.tenant
    return attributes


def dispatch_headers(
    requests: Sequence[PodAttempt],
    headers: Headers | None = None,
    *,
    now: float | None = None,
    requeued: Mapping[str, float] | None = None,
) -> Headers:
    """Start and end one `queue.dispatch` root span per request (in the pod's trace: every
    attempt of a pod shares it, and its sampling decision) and return headers carrying each
    pod's context (`traceparent.<uid>`).

    A span starts when its pod was last queued: the request's `timestamp`, or later when
    `requeued` (pod key -> epoch seconds) says so (a conflict puts a pod back at its old
    place in the queue: its timestamp stays that of the first attempt)."""
    out: Headers = [] if headers is None else headers
    tracer = _tracer
    if tracer is None:
        return out
    end_ns = time.time_ns() if now is None else int(now * 1e9)
    for request in requests:
        attributes = attempt_attributes(request)
        cycle = getattr(request, "scheduling_cycle", None)
        if isinstance(cycle, int):
            attributes[ATTR_SCHEDULING_CYCLE] = cycle
        queued = getattr(request, "timestamp", None)
        queued = max(queued or 0.0, (requeued or {}).get(request.pod_key, 0.0))
        start_ns = int(queued * 1e9) if queued > 0 else end_ns
        span = _start(
            tracer,
            SPAN_DISPATCH,
            request.uid,
            None,
            SpanKind.PRODUCER,
            attributes,
            min(start_ns, end_ns),
        )
        span.end(end_time=end_ns)
        inject_headers(out, context=trace.set_span_in_context(span), pod_uid=request.uid)
    return out


def _start(
    tracer: Tracer,
    name: str,
    uid: str,
    parent: Context | None,
    kind: SpanKind,
    attributes: Mapping[str, AttributeValue],
    start_ns: int | None = None,
) -> Span:
    """Start a span (ended by the caller); without a parent, a root in the pod's trace."""
    token = POD_TRACE.set(pod_trace_id(uid)) if parent is None else None
    try:
        context = parent or Context()
        return tracer.start_span(name, context, kind, attributes, start_time=start_ns)
    finally:
        if token is not None:
            POD_TRACE.reset(token)


def _span(
    tracer: Tracer,
    name: str,
    parent: Context | None,
    kind: SpanKind,
    attributes: Mapping[str, AttributeValue],
) -> AbstractContextManager[Span]:
    # start_as_current_span records an escaping exception and marks the span failed.
    return tracer.start_as_current_span(name, context=parent, kind=kind, attributes=attributes)


def _unsampled(parent: Context | None) -> AbstractContextManager[Span] | None:
    """For a parent the queue chose not to sample: every descendant is unsampled as well (the
    sampler is parent-based), so skip the SDK and only make the parent current, which keeps
    the decision travelling in `inject_headers()`. None for a sampled parent or none."""
    if parent is None:
        return None
    span = trace.get_current_span(parent)
    if span.get_span_context().trace_flags.sampled:
        return None
    return trace.use_span(span, end_on_exit=False)


def scheduling_cycle_span(
    request: PodAttempt, headers: Sequence[tuple[str, bytes]] | None = None
) -> AbstractContextManager[Span]:
    """The worker's span for one request, child of the queue's dispatch span found in the
    record's `headers` (a new root if none); the current span inside the block."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    attributes = attempt_attributes(request)
    cycle = getattr(request, "scheduling_cycle", None)
    if isinstance(cycle, int):
        attributes[ATTR_SCHEDULING_CYCLE] = cycle
    parent = extract_context(headers, pod_uid=request.uid)
    unsampled = _unsampled(parent)
    if unsampled is not None:
        return unsampled
    return _span(tracer, SPAN_SCHEDULING_CYCLE, parent or Context(), SpanKind.CONSUMER, attributes)


def extension_point_span(
    extension_point: str, attributes: Mapping[str, AttributeValue] | None = None
) -> AbstractContextManager[Span]:
    """A child of the current span named after the extension point ("Filter"); nothing
    when the current span is not recorded (outside a cycle, or an unsampled attempt)."""
    tracer = _tracer
    if tracer is None or not trace.get_current_span().is_recording():
        return _NOOP
    merged: dict[str, AttributeValue] = {ATTR_EXTENSION_POINT: extension_point}
    if attributes:
        merged.update(attributes)
    return _span(tracer, extension_point, None, SpanKind.INTERNAL, merged)


def binding_cycle_span(
    proposal: PodAttempt, headers: Sequence[tuple[str, bytes]] | None = None
) -> AbstractContextManager[Span]:
    """The binder's span for one proposal, child of the worker's scheduling cycle found in
    the record's `headers` (a new root if none); the current span inside the block."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    attributes = attempt_attributes(proposal)
    node = getattr(proposal, "node_name", None)
    if isinstance(node, str) and node:
        attributes[ATTR_NODE] = node
    parent = extract_context(headers, pod_uid=proposal.uid)
    unsampled = _unsampled(parent)
    if unsampled is not None:
        return unsampled
    return _span(tracer, SPAN_BINDING_CYCLE, parent or Context(), SpanKind.CONSUMER, attributes)


def binding_step_span(
    step: str, attributes: Mapping[str, AttributeValue] | None = None
) -> AbstractContextManager[Span]:
    """A child of the current span for one step of the binding cycle ("PreBind")."""
    return extension_point_span(step, attributes)


def pod_span(
    name: str,
    attempt: PodAttempt,
    headers: Sequence[tuple[str, bytes]] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    start_time: float | None = None,
) -> AbstractContextManager[Span]:
    """Any other span of a pod attempt (the queue handling its outcome), child of the context
    in `headers`, else a root in the pod's trace; it starts now or at `start_time` (epoch s)."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    parent = extract_context(headers, pod_uid=attempt.uid)
    unsampled = _unsampled(parent)
    if unsampled is not None:
        return unsampled
    start_ns = None if start_time is None else int(start_time * 1e9)
    attributes = attempt_attributes(attempt)
    span = _start(tracer, name, attempt.uid, parent, kind, attributes, start_ns)
    return trace.use_span(span, end_on_exit=True)


FAILED_RESULTS = ("error", "conflict")
"""Results that mark a span failed (status ERROR): the attempt failed, not the pod."""


def set_result(
    span: Span,
    result: str,
    *,
    node_name: str = "",
    message: str = "",
    plugins: Sequence[str] = (),
) -> None:
    """Record an attempt's result ("scheduled", "unschedulable", "error", "conflict") on a
    span; "error" and "conflict" mark the span failed (status ERROR, the message as its
    description); an unschedulable attempt keeps its FitError message and failed plugins as
    attributes (the pod does not fit: the scheduler did not fail)."""
    if not span.is_recording():
        return
    span.set_attribute(ATTR_RESULT, result)
    if node_name:
        span.set_attribute(ATTR_NODE, node_name)
    if plugins:
        span.set_attribute(ATTR_PLUGINS, list(plugins))
    if message:
        span.set_attribute(ATTR_MESSAGE, message)
    if result in FAILED_RESULTS:
        span.set_status(Status(StatusCode.ERROR, f"{result}: {message}" if message else result))


def span_status(span: Span, code_name: str, message: str = "") -> None:
    """A framework status on a span: anything but Success, Skip and Wait is ERROR for an
    Error, and an attribute otherwise (a plugin rejecting nodes is not a failure)."""
    if not span.is_recording():
        return
    span.set_attribute(ATTR_STATUS_CODE, code_name)
    if code_name == "Error":
        span.set_status(Status(StatusCode.ERROR, message or None))


def add_victim_events(span: Span, victims: Sequence[tuple[str, str]], node_name: str) -> None:
    """One `preemption.victim` event per (pod key, uid) evicted for the span's pod."""
    if not span.is_recording():
        return
    for key, uid in victims:
        span.add_event(EVENT_VICTIM, {ATTR_POD_KEY: key, ATTR_POD_UID: uid, ATTR_NODE: node_name})
