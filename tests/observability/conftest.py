"""Tracing fixtures shared by the observability tests: a real OTLP receiver, and berth's
tracing installed to export to it (shut down after the test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.observability.tracing_config import TracingConfig
from shared.observability.tracing_setup import Tracing, setup_tracing
from tests.observability.otlp_receiver import OtlpReceiver


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
def tracing(receiver: OtlpReceiver) -> Iterator[Tracing]:
    installed = setup_tracing(
        TracingConfig(
            service_name="berth-test",
            endpoint=receiver.endpoint,
            export_timeout_seconds=2.0,
            schedule_delay_seconds=0.05,
        )
    )
    try:
        yield installed
    finally:
        installed.shutdown()
