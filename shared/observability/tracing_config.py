"""Tracing's settings: the OTLP endpoint, the sample ratio and the export timeout, read from
the environment (BERTH_*, else OpenTelemetry's OTEL_* variables); shared/observability/tracing.py
uses them (and re-exports them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from msgspec import Meta

from shared.runtime.env import ENV_OTLP_ENDPOINT, ENV_OTLP_TIMEOUT_SECONDS, ENV_TRACE_SAMPLE_RATIO
from shared.runtime.settings import SettingsError, read, setting

ENV_ENDPOINT = ENV_OTLP_ENDPOINT
"""OTLP/HTTP endpoint: a base URL (`http://jaeger-collector:4318`, `/v1/traces` is appended)
or the full traces URL. Unset or empty: tracing is off."""
ENV_SAMPLE_RATIO = ENV_TRACE_SAMPLE_RATIO
"""Fraction of pod attempts traced (0..1, default 1); downstream services follow the
queue's decision (parent-based sampling)."""
ENV_EXPORT_TIMEOUT = ENV_OTLP_TIMEOUT_SECONDS
"""Per export request, retries included (default 2 s): a down collector never stalls a stop."""
OTEL_ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_ENV_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_ENV_SDK_DISABLED = "OTEL_SDK_DISABLED"

TRACES_PATH = "/v1/traces"


class TracingConfigError(ValueError):
    """A tracing setting from the environment is not valid."""


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """Tracing's BERTH_* settings as given (shared.runtime.settings reads them); `TracingConfig`
    adds OpenTelemetry's OTEL_* fallbacks."""

    endpoint: Annotated[
        str,
        setting(
            ENV_ENDPOINT,
            "OTLP/HTTP traces endpoint, a base URL or the traces URL (unset: "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else off)",
        ),
    ] = ""
    sample_ratio: Annotated[
        float,
        Meta(ge=0.0, le=1.0),
        setting(ENV_SAMPLE_RATIO, "share of pods whose attempts are traced (decided by the queue)"),
    ] = 1.0
    export_timeout_seconds: Annotated[
        float,
        Meta(ge=0.001, le=600.0),
        setting(ENV_EXPORT_TIMEOUT, "per export request, retries included"),
    ] = 2.0


@dataclass(frozen=True, slots=True)
class TracingConfig:
    service_name: str
    """`service.name` of the spans (Jaeger's service list): berth-queue, berth-scheduler..."""
    endpoint: str = ""
    """OTLP/HTTP base URL or traces URL; empty: tracing off."""
    sample_ratio: float = 1.0
    export_timeout_seconds: float = 2.0
    schedule_delay_seconds: float = 1.0
    """How long ended spans wait to be exported in a batch."""
    max_queue_size: int = 16_384
    """Ended spans buffered at most; beyond it new spans are dropped (never a stall)."""
    max_export_batch_size: int = 512
    resource_attributes: Mapping[str, str] = field(default_factory=dict)
    """Extra resource attributes (OTEL_RESOURCE_ATTRIBUTES is read as well)."""

    @property
    def enabled(self) -> bool:
        return bool(self.endpoint)

    @property
    def traces_url(self) -> str:
        url = self.endpoint.rstrip("/")
        return url if url.endswith(TRACES_PATH) else url + TRACES_PATH

    @classmethod
    def from_env(cls, service_name: str, env: Mapping[str, str]) -> TracingConfig:
        """BERTH_OTLP_ENDPOINT, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full URL), else
        OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); OTEL_SDK_DISABLED=true turns it all off."""
        try:
            given = read(TracingSettings, env)
        except SettingsError as exc:
            raise TracingConfigError(str(exc)) from None
        endpoint = given.endpoint or env.get(OTEL_ENV_TRACES_ENDPOINT) or ""
        if not endpoint and env.get(OTEL_ENV_ENDPOINT):
            endpoint = env[OTEL_ENV_ENDPOINT].rstrip("/") + TRACES_PATH
        if env.get(OTEL_ENV_SDK_DISABLED, "").strip().lower() == "true":
            endpoint = ""
        return cls(
            service_name=env.get(OTEL_ENV_SERVICE_NAME) or service_name,
            endpoint=endpoint,
            sample_ratio=given.sample_ratio,
            export_timeout_seconds=given.export_timeout_seconds,
        )
