"""shared.observability.logs: the format chosen, the JSON line's fields (trace ids inside a span),
the rate limit of decisions, and a service that exits 2 with one line on any bad setting."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from cli.servers import DevServers
from shared.observability.logs import (
    DecisionLog,
    LogConfigError,
    config_digest,
    configure_logging,
    log_format,
    log_start,
)

ROOT = Path(__file__).resolve().parents[2]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("value", "tty", "expected"),
    [
        pytest.param("", False, "json", id="unset-not-a-terminal"),
        pytest.param("", True, "text", id="unset-terminal"),
        pytest.param("json", True, "json", id="json-on-a-terminal"),
        pytest.param("TEXT", False, "text", id="text-case-insensitive"),
        pytest.param(" json ", False, "json", id="spaces"),
        pytest.param("yaml", False, None, id="unknown"),
    ],
)
def test_log_format(value: str, tty: bool, expected: str | None) -> None:
    stream = _Tty() if tty else io.StringIO()
    env = {"BERTH_LOG_FORMAT": value} if value else {}
    if expected is None:
        with pytest.raises(LogConfigError, match=r"BERTH_LOG_FORMAT='yaml': expected one of"):
            log_format(env, stream)
    else:
        assert log_format(env, stream) == expected


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_json_lines_carry_service_replica_and_the_current_trace() -> None:
    stream = io.StringIO()
    assert configure_logging("scheduler", "worker-1", env={}, stream=stream) == "json"
    log = logging.getLogger("services.scheduler.test")
    log.info("outside %s", "spans", extra={"pod": "ns/p"})
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("cycle") as span:
        log.warning("inside")
        context = span.get_span_context()
    outside, inside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert outside["msg"] == "outside spans"
    assert outside["service"] == "scheduler"
    assert outside["replica"] == "worker-1"
    assert outside["level"] == "INFO"
    assert outside["pod"] == "ns/p"
    assert outside["ts"].endswith("Z")
    assert "trace_id" not in outside
    assert inside["trace_id"] == format(context.trace_id, "032x")
    assert inside["span_id"] == format(context.span_id, "016x")


@pytest.mark.usefixtures("restore_root")
def test_text_lines_name_the_replica_and_trace() -> None:
    stream = _Tty()
    configure_logging("scheduler", "worker-2", env={}, stream=stream)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("cycle") as span:
        logging.getLogger("x").info("hello")
        trace_id = format(span.get_span_context().trace_id, "032x")
    line = stream.getvalue().strip()
    assert " worker-2 INFO x: hello" in line
    assert line.endswith(f"trace_id={trace_id}")


@pytest.mark.usefixtures("restore_root")
def test_the_start_line_has_version_digest_and_endpoints() -> None:
    stream = io.StringIO()
    configure_logging("binder", "binder-0", env={}, stream=stream)
    config = {"BERTH_CLUSTER": "c"}
    log_start(logging.getLogger("s"), config=config, endpoints={"metrics": ":9090"})
    line = json.loads(stream.getvalue())
    assert line["config_digest"] == config_digest(config)
    assert line["endpoints"] == {"metrics": ":9090"}
    assert line["version"]
    assert "metrics=:9090" in line["msg"]
    assert config_digest({"BERTH_CLUSTER": "d"}) != line["config_digest"]


def test_decisions_are_rate_limited_per_kind_and_say_how_many_were_left_out() -> None:
    now = [0.0]
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("berth.test.decisions")
    log.propagate = False
    log.setLevel(logging.INFO)
    log.addHandler(Keep())
    decisions = DecisionLog(log, burst=2, interval=10.0, clock=lambda: now[0])
    written = [decisions.info("preemption", "preempt %d", i) for i in range(5)]
    assert written == [True, True, False, False, False]
    assert decisions.info("conflict", "other kind") is True
    now[0] = 10.0
    assert decisions.info("preemption", "again") is True
    last = records[-1]
    assert last.getMessage() == "again (3 more preemption lines left out)"
    assert last.__dict__["suppressed"] == 3
    assert last.__dict__["decision"] == "preemption"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("BERTH_METRICS_PORT", "90000", "BERTH_METRICS_PORT='90000'", id="port"),
        pytest.param(
            "BERTH_METRICS_PORT",
            "http",
            "BERTH_METRICS_PORT='http': expected `int`, got `str`",
            id="port-word",
        ),
        pytest.param(
            "BERTH_TRACE_SAMPLE_RATIO", "2", "BERTH_TRACE_SAMPLE_RATIO='2'", id="sample-ratio"
        ),
        pytest.param("BERTH_LOG_FORMAT", "yaml", "BERTH_LOG_FORMAT='yaml'", id="log-format"),
        pytest.param("BERTH_LOG_LEVEL", "loud", "BERTH_LOG_LEVEL='loud'", id="log-level"),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    dev_servers: DevServers, tmp_path: Path, name: str, value: str, expected: str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BERTH_")},
        "BERTH_REDIS_URL": dev_servers.redis_url,
        "BERTH_KAFKA_BOOTSTRAP": dev_servers.kafka_bootstrap,
        "BERTH_KEY_PREFIX": f"berth-test:{tmp_path.name}:",
        "BERTH_TOPIC_SUFFIX": tmp_path.name,
        "BERTH_OTLP_ENDPOINT": "http://127.0.0.1:9",
        name: value,
    }
    done = subprocess.run(
        [sys.executable, "-m", "services.binder", "--name", "b"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or expected in line]
    assert len(errors) == 1, done.stderr[-3000:]
    assert expected in errors[0]
