"""Structured logs for the berth services: JSON lines for a log pipeline, text for a person.

    configure_logging("scheduler", "worker-1")          # once, at process start
    log_start(log, version="0.1", config={...}, endpoints={"metrics": ":9090"})
    decisions = DecisionLog(log)                         # notable decisions, rate limited
    decisions.info("preemption", "preempting %d pods on %s for %s", 2, "node-1", "ns/p")

- Format: BERTH_LOG_FORMAT=json or text; unset: JSON when the output is not a terminal (a
  container's log), text on a terminal. Any other value is a LogConfigError (one line, exit 2).
- Every JSON line carries ts (RFC 3339, UTC), level, service, replica, logger, msg, and the
  current span's trace_id and span_id when a span is recording (so a log line finds its trace
  in Jaeger), plus the `extra={...}` fields of the call and `exc` for an exception.
- DecisionLog: at most `burst` lines per kind of decision in `interval` seconds; the next line
  after a quiet spell says how many were left out (`suppressed`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TextIO

from opentelemetry import trace

from shared.runtime.settings import SettingsError, read, setting

ENV_LOG_FORMAT = "BERTH_LOG_FORMAT"
ENV_LOG_LEVEL = "BERTH_LOG_LEVEL"
FORMATS = ("json", "text")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_RESERVED = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys() | {"message", "asctime"}
)


class LogConfigError(ValueError):
    """A bad logging setting (the service exits 2 with this one line)."""


def _lower(raw: str) -> str:
    return raw.lower()


def _upper(raw: str) -> str:
    return raw.upper()


@dataclass(frozen=True, slots=True)
class LogSettings:
    """How a service process logs (shared.runtime.settings reads them)."""

    format: Annotated[
        Literal["json", "text"] | None,
        setting(
            ENV_LOG_FORMAT,
            "json or text (unset: JSON when the output is not a terminal, text on one)",
            parse=_lower,
        ),
    ] = None
    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR"],
        setting(ENV_LOG_LEVEL, "the lowest level logged (any case)", parse=_upper),
    ] = "INFO"


def _settings(env: Mapping[str, str]) -> LogSettings:
    try:
        return read(LogSettings, env)
    except SettingsError as exc:
        raise LogConfigError(str(exc)) from None


def log_format(env: Mapping[str, str], stream: TextIO) -> str:
    chosen = _settings(env).format
    if chosen is None:
        isatty = getattr(stream, "isatty", None)
        return "text" if isatty is not None and isatty() else "json"
    return chosen


def log_level(env: Mapping[str, str]) -> int:
    level: int = getattr(logging, _settings(env).level)
    return level


def _trace_ids() -> tuple[str, str]:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return "", ""
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class ContextFilter(logging.Filter):
    """Adds service, replica, trace_id and span_id to every record."""

    def __init__(self, service: str, replica: str) -> None:
        super().__init__()
        self.service = service
        self.replica = replica

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self.service
        record.replica = self.replica
        record.trace_id, record.span_id = _trace_ids()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, Any] = {
            "ts": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "service": getattr(record, "service", ""),
            "replica": getattr(record, "replica", ""),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        trace_id = getattr(record, "trace_id", "")
        if trace_id:
            line["trace_id"] = trace_id
            line["span_id"] = getattr(record, "span_id", "")
        for key, value in record.__dict__.items():
            if key in _RESERVED or key in line or key in ("trace_id", "span_id"):
                continue
            if key in ("service", "replica"):
                continue
            line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(replica)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        trace_id = getattr(record, "trace_id", "")
        return f"{text} trace_id={trace_id}" if trace_id else text


def configure_logging(
    service: str,
    replica: str = "",
    *,
    env: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> str:
    """Set the root logger up (replacing its handlers); returns the format chosen.
    LogConfigError on a bad setting."""
    env = os.environ if env is None else env
    stream = sys.stderr if stream is None else stream
    chosen = log_format(env, stream)
    level = log_level(env)
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter(service, replica or service))
    handler.setFormatter(JsonFormatter() if chosen == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return chosen


def config_digest(settings: Mapping[str, Any]) -> str:
    """A short digest of the effective settings (secrets are the caller's to leave out)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def berth_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("berth")
    except PackageNotFoundError:
        return "dev"


def log_start(
    log: logging.Logger,
    *,
    config: Mapping[str, Any],
    endpoints: Mapping[str, str],
) -> None:
    """The start line: version, config digest, endpoints."""
    digest = config_digest(config)
    shown = " ".join(f"{k}={v}" for k, v in sorted(endpoints.items()))
    log.info(
        "starting berth %s (config %s) %s",
        berth_version(),
        digest,
        shown,
        extra={"version": berth_version(), "config_digest": digest, "endpoints": dict(endpoints)},
    )


class DecisionLog:
    """INFO lines for notable decisions, at most `burst` per kind every `interval` seconds."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        burst: int = 10,
        interval: float = 10.0,
        clock: Any = time.monotonic,
    ) -> None:
        self.log = log
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self._window: dict[str, tuple[float, int, int]] = {}
        """kind -> (window start, lines written, lines left out)."""

    def info(self, kind: str, message: str, *args: object, **fields: Any) -> bool:
        """Log one decision (True) or count it as left out (False)."""
        now = self.clock()
        start, written, dropped = self._window.get(kind, (now, 0, 0))
        if now - start >= self.interval:
            start, written = now, 0
        if written >= self.burst:
            self._window[kind] = (start, written, dropped + 1)
            return False
        extra: dict[str, Any] = {"decision": kind, **fields}
        if dropped:
            extra["suppressed"] = dropped
            message = f"{message} ({dropped} more {kind} lines left out)"
        self.log.info(message, *args, extra=extra)
        self._window[kind] = (start, written + 1, 0)
        return True
