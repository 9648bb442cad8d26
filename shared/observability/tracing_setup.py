"""Installing tracing in a service process: berth's own TracerProvider (ratio sampler, pod
trace ids, batched OTLP/HTTP export counted in berth_trace_export_failures_total), or none,
and the handle that flushes and uninstalls it (the helpers that record spans:
shared.observability.tracing).

    tracing = setup_tracing(TracingConfig.from_env("berth-queue", os.environ))
    ...
    await tracing.ashutdown()
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from prometheus_client import Counter

from shared.observability import tracing
from shared.observability.metrics import default_metrics
from shared.observability.tracing import INSTRUMENTATION_NAME
from shared.observability.tracing_config import TracingConfig


class Tracing:
    """The installed tracer provider (or none); `shutdown()` flushes and uninstalls it."""

    def __init__(self, config: TracingConfig, provider: TracerProvider | None) -> None:
        self.config = config
        self.provider = provider

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def force_flush(self) -> bool:
        """Export every ended span now (bounded by the export timeout)."""
        if self.provider is None:
            return True
        return self.provider.force_flush(int(self.config.export_timeout_seconds * 1000) + 100)

    def shutdown(self) -> None:
        """Flush, stop the export thread, and make the helpers no-ops again. Blocking."""
        if self.provider is None:
            return
        provider, self.provider = self.provider, None
        if tracing.installed_provider() is provider:
            tracing.install(None, None)
        provider.shutdown()

    async def ashutdown(self) -> None:
        """`shutdown()` off the event loop (it may wait for one export)."""
        await asyncio.to_thread(self.shutdown)


def setup_tracing(config: TracingConfig) -> Tracing:
    """Install a tracer exporting to `config.endpoint` (batched, OTLP/HTTP protobuf), or
    the no-op helpers when no endpoint is set. The provider is berth's own: the OpenTelemetry
    global provider is left alone, so a second setup (tests) replaces the first (shut the
    first down yourself to flush it)."""
    if not config.enabled:
        tracing.install(None, None)
        return Tracing(config, None)
    # Imported here: the exporter pulls in `requests`, which disabled runs never need.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    attributes: dict[str, str] = {
        "service.name": config.service_name,
        "service.namespace": "berth",
        "service.instance.id": os.environ.get("HOSTNAME") or f"pid-{os.getpid()}",
    }
    attributes.update(config.resource_attributes)
    provider = TracerProvider(
        resource=Resource.create(attributes),
        sampler=ParentBased(TraceIdRatioBased(config.sample_ratio)),
        shutdown_on_exit=False,
        id_generator=PodTraceIds(),
    )
    timeout_ms = config.export_timeout_seconds * 1000
    exporter = CountingExporter(
        OTLPSpanExporter(endpoint=config.traces_url, timeout=config.export_timeout_seconds)
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            max_queue_size=config.max_queue_size,
            schedule_delay_millis=config.schedule_delay_seconds * 1000,
            max_export_batch_size=config.max_export_batch_size,
            export_timeout_millis=timeout_ms,
        )
    )
    tracing.install(provider.get_tracer(INSTRUMENTATION_NAME), provider)
    return Tracing(config, provider)


class CountingExporter(SpanExporter):
    """An exporter that counts its failed exports in berth_trace_export_failures_total (the
    alert on trace export failing reads it)."""

    def __init__(self, inner: SpanExporter, failures: Counter | None = None) -> None:
        self.inner = inner
        self.failures = (
            failures if failures is not None else default_metrics().trace_export_failures
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            self.failures.inc()
            raise
        if result != SpanExportResult.SUCCESS:
            self.failures.inc()
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class PodTraceIds(IdGenerator):
    """Root spans started for a pod (`dispatch_headers`) get the pod's trace id; every other
    id is random."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return tracing.POD_TRACE.get() or self._random.generate_trace_id()
