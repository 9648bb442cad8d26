"""shared.observability.tracing: configuration, the no-op default, and one trace per pod attempt
exported over OTLP/HTTP to a local receiver, its context carried through Kafka headers."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer
from opentelemetry.trace import INVALID_SPAN
from prometheus_client import REGISTRY

from shared.messaging.kafka import Topics, ensure_topics, make_producer
from shared.messaging.messages import ScheduleRequest
from shared.observability.tracing import (
    ATTR_ATTEMPT,
    ATTR_EXTENSION_POINT,
    ATTR_MESSAGE,
    ATTR_NODE,
    ATTR_PLUGINS,
    ATTR_POD_KEY,
    ATTR_POD_UID,
    ATTR_RESULT,
    ATTR_SCHEDULING_CYCLE,
    ATTR_TENANT,
    EVENT_VICTIM,
    SPAN_BINDING_CYCLE,
    SPAN_DISPATCH,
    SPAN_SCHEDULING_CYCLE,
    PodAttempt,
    TracingConfig,
    TracingConfigError,
    add_victim_events,
    binding_cycle_span,
    binding_step_span,
    dispatch_headers,
    extension_point_span,
    extract_context,
    inject_headers,
    pod_span,
    pod_trace_id,
    scheduling_cycle_span,
    set_result,
    tracing_enabled,
)
from shared.observability.tracing_setup import Tracing, setup_tracing
from tests.observability.otlp_receiver import OtlpReceiver, ReceivedSpan

# opentelemetry.proto.trace.v1.Span.SpanKind / Status.StatusCode
KIND_INTERNAL, KIND_CONSUMER, KIND_PRODUCER = 1, 5, 4
STATUS_UNSET, STATUS_ERROR = 0, 2


@dataclass(frozen=True, slots=True)
class FakeProposal:
    """What the binder reads from a proposal (shape of shared.messaging.proposals.Proposal)."""

    tenant: str
    pod_key: str
    uid: str
    attempt: int
    node_name: str


def make_request(uid: str, *, attempt: int = 1, queued_at: float = 0.0) -> ScheduleRequest:
    return ScheduleRequest(
        tenant="team-a",
        pod_key=f"default/{uid}",
        uid=uid,
        attempt=attempt,
        scheduling_cycle=7,
        priority=0,
        timestamp=queued_at,
        initial_attempt_timestamp=queued_at,
        lease_expires_at=queued_at + 30,
    )


def proposal_for(request: ScheduleRequest, node: str) -> FakeProposal:
    return FakeProposal(request.tenant, request.pod_key, request.uid, request.attempt, node)


def _request_is_a_pod_attempt(request: ScheduleRequest) -> PodAttempt:
    return request  # mypy checks that the message types fit the helpers' Protocol


def only(spans: list[ReceivedSpan], **attributes: object) -> ReceivedSpan:
    matching = [s for s in spans if all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(matching) == 1, (attributes, spans)
    return matching[0]


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("env", "enabled", "url", "service"),
    [
        pytest.param({}, False, "/v1/traces", "berth-queue", id="unset-is-off"),
        pytest.param(
            {"BERTH_OTLP_ENDPOINT": "http://jaeger:4318"},
            True,
            "http://jaeger:4318/v1/traces",
            "berth-queue",
            id="base-url-gets-the-traces-path",
        ),
        pytest.param(
            {"BERTH_OTLP_ENDPOINT": "http://jaeger:4318/v1/traces"},
            True,
            "http://jaeger:4318/v1/traces",
            "berth-queue",
            id="full-url-kept",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            True,
            "http://collector:4318/v1/traces",
            "berth-queue",
            id="otel-base-endpoint",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/custom/v1/traces",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318",
            },
            True,
            "http://c:4318/custom/v1/traces",
            "berth-queue",
            id="otel-traces-endpoint-wins-over-base",
        ),
        pytest.param(
            {"BERTH_OTLP_ENDPOINT": "http://jaeger:4318", "OTEL_SDK_DISABLED": "true"},
            False,
            "/v1/traces",
            "berth-queue",
            id="otel-sdk-disabled",
        ),
        pytest.param(
            {"OTEL_SERVICE_NAME": "my-queue"}, False, "/v1/traces", "my-queue", id="service-name"
        ),
    ],
)
def test_config_from_env(env: dict[str, str], enabled: bool, url: str, service: str) -> None:
    config = TracingConfig.from_env("berth-queue", env)
    assert config.enabled is enabled
    assert config.traces_url == url
    assert config.service_name == service


@pytest.mark.parametrize(
    ("env", "ratio", "timeout"),
    [
        pytest.param({}, 1.0, 2.0, id="defaults"),
        pytest.param(
            {"BERTH_TRACE_SAMPLE_RATIO": "0.25", "BERTH_OTLP_TIMEOUT_SECONDS": "0.5"},
            0.25,
            0.5,
            id="set",
        ),
    ],
)
def test_config_numbers(env: dict[str, str], ratio: float, timeout: float) -> None:
    config = TracingConfig.from_env("berth-queue", env)
    assert (config.sample_ratio, config.export_timeout_seconds) == (ratio, timeout)


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"BERTH_TRACE_SAMPLE_RATIO": "1.5"}, id="ratio-above-one"),
        pytest.param({"BERTH_TRACE_SAMPLE_RATIO": "half"}, id="ratio-not-a-number"),
        pytest.param({"BERTH_TRACE_SAMPLE_RATIO": "nan"}, id="ratio-nan"),
        pytest.param({"BERTH_OTLP_TIMEOUT_SECONDS": "0"}, id="zero-timeout"),
    ],
)
def test_config_rejects(env: dict[str, str]) -> None:
    with pytest.raises(TracingConfigError):
        TracingConfig.from_env("berth-queue", env)


# ----------------------------------------------------------------------------- no-op
def test_disabled_tracing_is_a_no_op() -> None:
    installed = setup_tracing(TracingConfig(service_name="berth-test"))
    assert not installed.enabled
    assert not tracing_enabled()
    request = make_request("uid-1", queued_at=time.time())
    assert dispatch_headers([request]) == []
    assert inject_headers([("other", b"x")]) == [("other", b"x")]
    headers = [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]
    assert extract_context(headers) is None
    with scheduling_cycle_span(request, headers) as span:
        assert span is INVALID_SPAN
        with extension_point_span("Filter") as child:
            assert not child.is_recording()
        set_result(span, "scheduled", node_name="node-1")
    assert installed.force_flush()
    installed.shutdown()


# ------------------------------------------------------------------------ one trace
def test_one_trace_per_pod_attempt(receiver: OtlpReceiver, tracing: Tracing) -> None:
    queued_at = time.time() - 2.0
    requests = [make_request("uid-a", queued_at=queued_at), make_request("uid-b", attempt=3)]
    # queue: one dispatch span per pod, each pod's context in headers of its own
    batch_headers = dispatch_headers(requests)
    assert sorted(name for name, _ in batch_headers) == ["traceparent.uid-a", "traceparent.uid-b"]

    # worker: a scheduling cycle per request, extension points under it
    proposal_headers: dict[str, list[tuple[str, bytes]]] = {}
    for request in requests:
        with scheduling_cycle_span(request, batch_headers) as cycle_span:
            for point in ("PreFilter", "Filter", "Score"):
                with extension_point_span(point):
                    pass
            set_result(cycle_span, "scheduled", node_name="node-1")
            proposal_headers[request.uid] = inject_headers()
    assert [name for name, _ in proposal_headers["uid-a"]] == ["traceparent"]

    # binder: the binding cycle under the worker's cycle
    for request in requests:
        with binding_cycle_span(proposal_for(request, "node-1"), proposal_headers[request.uid]):
            for step in ("WaitOnPermit", "PreBind", "Bind"):
                with binding_step_span(step):
                    pass
    tracing.shutdown()

    spans = receiver.wait_for(2 * (1 + 1 + 3 + 1 + 3))
    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    assert {s.resource["service.name"] for s in spans} == {"berth-test"}

    dispatch = only(receiver.by_name(SPAN_DISPATCH), **{ATTR_POD_UID: "uid-a"})
    assert dispatch.parent_span_id == ""
    assert dispatch.kind == KIND_PRODUCER
    assert dispatch.attributes == {
        ATTR_POD_UID: "uid-a",
        ATTR_ATTEMPT: 1,
        ATTR_POD_KEY: "default/uid-a",
        ATTR_TENANT: "team-a",
        ATTR_SCHEDULING_CYCLE: 7,
    }
    # the span starts when the pod was queued: it shows the wait
    assert dispatch.start_ns == pytest.approx(queued_at * 1e9, abs=1e3)
    assert dispatch.end_ns - dispatch.start_ns >= 1.9e9

    cycle = only(receiver.by_name(SPAN_SCHEDULING_CYCLE), **{ATTR_POD_UID: "uid-a"})
    assert (cycle.trace_id, cycle.parent_span_id) == (dispatch.trace_id, dispatch.span_id)
    assert cycle.kind == KIND_CONSUMER
    assert cycle.attributes[ATTR_RESULT] == "scheduled"
    assert cycle.attributes[ATTR_NODE] == "node-1"

    children = [s for s in spans if s.parent_span_id == cycle.span_id]
    assert sorted(s.name for s in children) == ["Filter", "PreFilter", "Score", "binding_cycle"]
    points = [s for s in children if s.name != SPAN_BINDING_CYCLE]
    assert all(s.attributes[ATTR_EXTENSION_POINT] == s.name for s in points)
    assert all(s.trace_id == dispatch.trace_id for s in points)

    binding = only(receiver.by_name(SPAN_BINDING_CYCLE), **{ATTR_POD_UID: "uid-a"})
    assert (binding.trace_id, binding.parent_span_id) == (dispatch.trace_id, cycle.span_id)
    assert binding.attributes[ATTR_NODE] == "node-1"
    steps = [s for s in spans if s.parent_span_id == binding.span_id]
    assert sorted(s.name for s in steps) == ["Bind", "PreBind", "WaitOnPermit"]

    # the other pod is a trace of its own, and its attempt number travels with it
    other = only(receiver.by_name(SPAN_DISPATCH), **{ATTR_POD_UID: "uid-b"})
    assert other.trace_id != dispatch.trace_id
    assert other.attributes[ATTR_ATTEMPT] == 3
    other_cycle = only(receiver.by_name(SPAN_SCHEDULING_CYCLE), **{ATTR_POD_UID: "uid-b"})
    assert other_cycle.parent_span_id == other.span_id


async def test_context_round_trips_through_kafka_headers(
    receiver: OtlpReceiver, tracing: Tracing, kafka_bootstrap: str, topics: Topics
) -> None:
    """The headers survive a real broker: the consumer's span is the producer's child."""
    request = make_request("uid-k", queued_at=time.time())
    await ensure_topics(kafka_bootstrap, [topics.schedule], partitions=1)
    producer = make_producer(kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topics.schedule, b"batch", key=b"uid-k", headers=dispatch_headers([request])
        )
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topics.schedule, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), 20)
    finally:
        await consumer.stop()
    assert [name for name, _ in record.headers] == ["traceparent.uid-k"]
    with scheduling_cycle_span(request, record.headers):
        pass
    tracing.shutdown()

    receiver.wait_for(2)
    dispatch = only(receiver.by_name(SPAN_DISPATCH))
    cycle = only(receiver.by_name(SPAN_SCHEDULING_CYCLE))
    assert (cycle.trace_id, cycle.parent_span_id) == (dispatch.trace_id, dispatch.span_id)


# --------------------------------------------------------------------- propagation
@pytest.mark.parametrize(
    ("headers", "found"),
    [
        pytest.param([], False, id="no-headers"),
        pytest.param([("traceparent", b"garbage")], False, id="malformed"),
        pytest.param(
            [("traceparent", b"00-00000000000000000000000000000000-b7ad6b7169203331-01")],
            False,
            id="invalid-trace-id",
        ),
        pytest.param(
            [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
            True,
            id="message-level",
        ),
        pytest.param(
            [("traceparent.other-pod", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
            False,
            id="another-pods-header-is-ignored",
        ),
    ],
)
def test_extract_context(tracing: Tracing, headers: list[tuple[str, bytes]], found: bool) -> None:
    assert (extract_context(headers, pod_uid="uid-1") is not None) is found


def test_pod_header_wins_over_message_header(receiver: OtlpReceiver, tracing: Tracing) -> None:
    pod_parent = "00-11111111111111111111111111111111-2222222222222222-01"
    message_parent = "00-33333333333333333333333333333333-4444444444444444-01"
    headers = [("traceparent", message_parent.encode()), ("traceparent.p", pod_parent.encode())]
    with pod_span("queue.outcome", make_request("p"), headers):
        pass
    with pod_span("queue.outcome", make_request("q"), headers):
        pass
    tracing.shutdown()
    spans = receiver.wait_for(2)
    parents = {s.attributes[ATTR_POD_UID]: (s.trace_id, s.parent_span_id) for s in spans}
    assert parents == {
        "p": ("11111111111111111111111111111111", "2222222222222222"),
        "q": ("33333333333333333333333333333333", "4444444444444444"),
    }


def test_an_escaping_exception_marks_the_span_failed(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    request = make_request("uid-e")
    with pytest.raises(RuntimeError), scheduling_cycle_span(request):
        raise RuntimeError("plugin crashed")
    with scheduling_cycle_span(make_request("uid-f")) as span:
        set_result(span, "error", message="no profile")
    tracing.shutdown()
    receiver.wait_for(2)
    failed = only(receiver.by_name(SPAN_SCHEDULING_CYCLE), **{ATTR_POD_UID: "uid-e"})
    assert failed.status_code == STATUS_ERROR
    assert failed.parent_span_id == ""  # no headers: a root of its own
    errored = only(receiver.by_name(SPAN_SCHEDULING_CYCLE), **{ATTR_POD_UID: "uid-f"})
    assert errored.status_code == STATUS_ERROR
    assert errored.attributes[ATTR_RESULT] == "error"


def test_unsampled_attempts_stay_unsampled_downstream(receiver: OtlpReceiver) -> None:
    installed = setup_tracing(
        TracingConfig(service_name="berth-test", endpoint=receiver.endpoint, sample_ratio=0.0)
    )
    try:
        request = make_request("uid-s")
        headers = dispatch_headers([request])
        # the decision travels (the sampled flag, bit 0, is clear), so the worker does not
        # start a sampled root of its own
        assert int(headers[0][1].rsplit(b"-", 1)[1], 16) & 1 == 0
        with scheduling_cycle_span(request, headers) as span:
            assert not span.is_recording()
            assert span.get_span_context().is_valid
            with extension_point_span("Filter") as point:
                assert not point.is_recording()
            (proposal_header,) = inject_headers()
        # the binder inherits the same trace, still unsampled
        assert proposal_header[1].split(b"-")[1] == headers[0][1].split(b"-")[1]
        assert int(proposal_header[1].rsplit(b"-", 1)[1], 16) & 1 == 0
        with binding_cycle_span(proposal_for(request, "n"), [proposal_header]) as binding:
            assert not binding.is_recording()
    finally:
        installed.shutdown()
    assert receiver.wait_for(1, timeout=0.3) == []


def test_extension_points_outside_a_cycle_record_nothing(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    with extension_point_span("Filter") as point:
        assert not point.is_recording()
    with scheduling_cycle_span(make_request("uid-o")), extension_point_span("Filter") as inner:
        assert inner.is_recording()
    tracing.shutdown()
    assert sorted(s.name for s in receiver.wait_for(2)) == ["Filter", SPAN_SCHEDULING_CYCLE]


def test_shutdown_is_quick_when_the_collector_is_down() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    installed = setup_tracing(
        TracingConfig(
            service_name="berth-test",
            endpoint=f"http://127.0.0.1:{port}",
            export_timeout_seconds=0.3,
        )
    )
    with scheduling_cycle_span(make_request("uid-d")):
        pass
    started = time.monotonic()
    installed.shutdown()
    assert time.monotonic() - started < 2.0
    assert not tracing_enabled()


# ------------------------------------------------------------------- one trace per pod
def test_every_attempt_of_a_pod_is_in_the_pods_trace(
    receiver: OtlpReceiver, tracing: Tracing
) -> None:
    attempts = [make_request("uid-p", attempt=n) for n in (1, 2, 3)]
    for request in attempts:
        headers = dispatch_headers([request])
        with scheduling_cycle_span(request, headers) as span:
            set_result(span, "unschedulable" if request.attempt < 3 else "scheduled")
    dispatch_headers([make_request("uid-q")])
    tracing.shutdown()
    spans = receiver.wait_for(3 * 2 + 1)
    pod_spans = [s for s in spans if s.attributes.get(ATTR_POD_UID) == "uid-p"]
    assert len(pod_spans) == 6
    assert {s.trace_id for s in pod_spans} == {format(pod_trace_id("uid-p"), "032x")}
    other = only(receiver.by_name(SPAN_DISPATCH), **{ATTR_POD_UID: "uid-q"})
    assert other.trace_id == format(pod_trace_id("uid-q"), "032x") != pod_spans[0].trace_id
    # each attempt's cycle hangs under its own dispatch span
    by_attempt = {(s.name, s.attributes[ATTR_ATTEMPT]): s for s in pod_spans}
    for n in (1, 2, 3):
        cycle, dispatch = by_attempt[(SPAN_SCHEDULING_CYCLE, n)], by_attempt[(SPAN_DISPATCH, n)]
        assert cycle.parent_span_id == dispatch.span_id


def test_sampling_is_decided_once_per_pod(receiver: OtlpReceiver) -> None:
    installed = setup_tracing(
        TracingConfig(service_name="berth-test", endpoint=receiver.endpoint, sample_ratio=0.5)
    )
    try:
        decisions: dict[str, set[bool]] = {}
        for i in range(100):
            uid = f"uid-{i}"
            for attempt in (1, 2, 3):
                (header,) = dispatch_headers([make_request(uid, attempt=attempt)])
                sampled = int(header[1].rsplit(b"-", 1)[1], 16) & 1 == 1
                decisions.setdefault(uid, set()).add(sampled)
    finally:
        installed.shutdown()
    # every pod's attempts are all kept or all dropped, and both happen at ratio 0.5
    assert all(len(seen) == 1 for seen in decisions.values())
    kept = sum(1 for seen in decisions.values() if True in seen)
    assert 25 <= kept <= 75


@pytest.mark.parametrize(
    ("result", "status"),
    [
        pytest.param("scheduled", STATUS_UNSET, id="scheduled"),
        pytest.param("unschedulable", STATUS_UNSET, id="unschedulable-is-not-a-failure"),
        pytest.param("conflict", STATUS_ERROR, id="conflict-failed-the-attempt"),
        pytest.param("error", STATUS_ERROR, id="error"),
    ],
)
def test_the_result_sets_the_status_and_attributes(
    receiver: OtlpReceiver, tracing: Tracing, result: str, status: int
) -> None:
    message = "0/3 nodes are available: 3 Insufficient cpu."
    with scheduling_cycle_span(make_request("uid-r")) as span:
        set_result(span, result, message=message, plugins=("NodeResourcesFit",))
    tracing.shutdown()
    (cycle,) = receiver.wait_for(1)
    assert cycle.status_code == status
    assert cycle.attributes[ATTR_RESULT] == result
    assert cycle.attributes[ATTR_MESSAGE] == message
    assert cycle.attributes[ATTR_PLUGINS] == ["NodeResourcesFit"]
    if status == STATUS_ERROR:
        assert cycle.status_message == f"{result}: {message}"


def test_preemption_victims_are_events(receiver: OtlpReceiver, tracing: Tracing) -> None:
    with scheduling_cycle_span(make_request("uid-v")) as span:
        add_victim_events(span, [("default/low-1", "u1"), ("default/low-2", "u2")], "node-3")
    tracing.shutdown()
    (cycle,) = receiver.wait_for(1)
    assert [name for name, _ in cycle.events] == [EVENT_VICTIM, EVENT_VICTIM]
    assert cycle.events[0][1] == {
        ATTR_POD_KEY: "default/low-1",
        ATTR_POD_UID: "u1",
        ATTR_NODE: "node-3",
    }


def test_failed_exports_are_counted(receiver: OtlpReceiver) -> None:
    """berth_trace_export_failures_total (the chart's trace-export alert) counts the batches
    a down collector did not take, and not the ones a live one did."""
    failures = "berth_trace_export_failures_total"

    def failed() -> float:
        return REGISTRY.get_sample_value(failures) or 0.0

    before = failed()
    live = setup_tracing(TracingConfig(service_name="berth-test", endpoint=receiver.endpoint))
    with scheduling_cycle_span(make_request("uid-ok")):
        pass
    live.shutdown()
    assert receiver.wait_for(1)
    assert failed() == before
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = setup_tracing(
        TracingConfig(
            service_name="berth-test",
            endpoint=f"http://127.0.0.1:{port}",
            export_timeout_seconds=0.3,
        )
    )
    with scheduling_cycle_span(make_request("uid-lost")):
        pass
    down.shutdown()
    assert failed() == before + 1
