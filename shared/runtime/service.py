"""One service process's life, the same for the queue, the scheduler workers and the binder.

`ServiceRunner(service, name).main(serve)` sets up logging, an optional cProfile dump
($BERTH_PROFILE_DIR), tracing ($BERTH_OTLP_ENDPOINT) and the /metrics, /healthz, /readyz
server ($BERTH_METRICS_PORT), turns SIGTERM/SIGINT into a stop event, and runs
`serve(stop, health)` until it returns. A `serve` waits for Redis and the broker to answer
(`wait_for_servers`), starts its service, reports ready, waits for `stop`, then drains
(`health.set_ready(False, "draining")` first, so a load balancer stops sending work before
the service stops taking it). A service that cannot use its servers as configured
(shared.runtime.security: a bad setting, a certificate or password refused) exits with status 2 and
one line saying why, not a traceback.

Once started, a service outlives Redis and broker outages: its loops pause with growing,
logged pauses (shared.runtime.retry) and carry on where they were when the server answers again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Protocol, TypeVar

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaConnectionError
from redis.asyncio import Redis

from shared.messaging.kafka import explain_kafka_failure
from shared.observability.health import HealthConfigError, HealthServer, MetricsSettings
from shared.observability.logs import LogConfigError, LogSettings, configure_logging, log_start
from shared.observability.tracing_config import TracingConfig, TracingConfigError, TracingSettings
from shared.observability.tracing_setup import setup_tracing
from shared.runtime.env import ENV_OTLP_ENDPOINT, ENV_PROFILE_DIR, StackError, StackSettings
from shared.runtime.redisconn import ping_or_refuse
from shared.runtime.retry import until_answered
from shared.runtime.security import ConnectError, KafkaSecurity, RedisSecurity, SecurityError
from shared.runtime.settings import fields as settings_fields
from shared.runtime.settings import with_settings_file

log = logging.getLogger(__name__)
T = TypeVar("T")
EXIT_MISCONFIGURED = 2

GC_THRESHOLD_YOUNG = 50_000
"""Allocations between young-generation collections in a service process (CPython: 700)."""

Serve = Callable[[asyncio.Event, HealthServer], Awaitable[None]]


@contextlib.contextmanager
def profiled(name: str) -> Iterator[None]:
    """cProfile the block when $BERTH_PROFILE_DIR is set (dump `<dir>/<name>-<pid>.prof`)."""
    directory = os.environ.get(ENV_PROFILE_DIR)
    if not directory:
        yield
        return
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(directory) / f"{name}-{os.getpid()}.prof"))


@contextlib.asynccontextmanager
async def observed(service: str) -> AsyncIterator[HealthServer]:
    """Tracing and the health/metrics server around a service (each off when its variable
    is unset); readiness is withdrawn before either stops."""
    tracing = setup_tracing(TracingConfig.from_env(f"berth-{service}", os.environ))
    health = HealthServer.from_env(os.environ)
    await health.start()
    try:
        yield health
    finally:
        health.set_ready(False, "stopping")
        await health.stop()
        await tracing.ashutdown()


async def ready_until_stopped(
    health: HealthServer,
    stop: asyncio.Event,
    start: Callable[[], Awaitable[None]],
    drain: Callable[[], Awaitable[None]],
) -> None:
    """The middle of a `serve`: start, report ready, wait for `stop`, withdraw readiness,
    then drain (whatever happens while waiting)."""
    await start()
    # What start() loaded (the cluster, the caches) lives as long as the process: out of
    # the collector's generations, full collections no longer walk it.
    gc.collect()
    gc.freeze()
    health.set_ready(True)
    try:
        await stop.wait()
    finally:
        health.set_ready(False, "draining")
        await drain()


class Servers(Protocol):
    """Where a service's servers are and how it talks to them (StackSettings, WorkerConfig)."""

    @property
    def redis_url(self) -> str: ...
    @property
    def redis_security(self) -> RedisSecurity: ...
    @property
    def kafka_bootstrap(self) -> str: ...
    @property
    def kafka_security(self) -> KafkaSecurity: ...


async def wait_for_servers(
    redis: Redis, servers: Servers, stop: asyncio.Event, service: str
) -> bool:
    """Before a service starts: Redis answers a PING and the broker a bootstrap, each
    retried with growing pauses (and logged) while it is away, so that a service started
    during an outage waits for it instead of exiting. A server that answers but refuses us
    (a certificate that does not verify, a wrong password) is not an outage: ConnectError,
    one line naming why (the service exits 2). False when `stop` came first."""
    log = logging.getLogger(f"services.{service}")

    async def redis_answers() -> bool:
        return await ping_or_refuse(redis, servers.redis_url, servers.redis_security)

    if await until_answered(f"{service}: waiting for Redis", log, redis_answers, stop) is None:
        return False
    security, bootstrap = servers.kafka_security, servers.kafka_bootstrap

    async def broker() -> bool:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, **security.client_options())
        try:
            await client.bootstrap()
        except KafkaConnectionError:
            if security.tls:
                reason = await explain_kafka_failure(bootstrap, security)
                if any(word in reason for word in ("CERTIFICATE", "SSL", "closed the")):
                    raise ConnectError(reason) from None
            raise
        finally:
            await client.close()
        return True

    return await until_answered(f"{service}: waiting for the broker", log, broker, stop) is True


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (on the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


class ServiceRunner:
    """Runs one service process; see the module docstring."""

    def __init__(self, service: str, name: str = "") -> None:
        self.service = service
        """"queue", "scheduler" or "binder" (log prefix, tracing service name)."""
        self.name = name or service
        """This replica's name (profile file name)."""
        self._file_read = False

    @classmethod
    def from_argv(cls, service: str, argv: Sequence[str] | None) -> ServiceRunner:
        """The runner of `python -m services.<service> [--name NAME]` (services whose only
        argument is the replica's name)."""
        parser = argparse.ArgumentParser(prog=f"python -m services.{service}")
        parser.add_argument("--name", default="", help="this replica's name")
        return cls(service, parser.parse_args(argv).name)

    def main(self, serve: Serve) -> int:
        try:
            configure_logging(self.service, self.name)
        except LogConfigError as exc:
            print(f"{self.service} {self.name}: {exc}", file=sys.stderr)
            return EXIT_MISCONFIGURED
        try:
            with profiled(self.name):
                asyncio.run(self.run(serve))
        except (SecurityError, StackError, HealthConfigError, TracingConfigError) as exc:
            log.error("%s", exc)  # noqa: TRY400 (a setting or a server, not a bug: one line)
            return EXIT_MISCONFIGURED
        return 0

    def environment(self, *models: type[Any]) -> MutableMapping[str, str]:
        """The process's environment with $BERTH_SETTINGS_FILE's settings under it (loaded
        once; a name no reader knows is refused, naming it: `models` are the service's own
        settings classes beside the process-wide names in `known_settings`)."""
        if not self._file_read:
            with_settings_file(os.environ, known_settings(*models))
            self._file_read = True
        return os.environ

    def configured(self, read: Callable[[], T]) -> T:
        """`read()` (settings from the environment, before `main`); a bad setting exits the
        process with one line on stderr."""
        try:
            return read()
        except (SecurityError, StackError) as exc:
            print(f"{self.service} {self.name}: {exc}", file=sys.stderr)
            raise SystemExit(EXIT_MISCONFIGURED) from None

    async def run(self, serve: Serve) -> None:
        # Every message decodes into many small objects that die young; CPython's default
        # first threshold (700 allocations) ran a collection every few messages.
        gc.set_threshold(GC_THRESHOLD_YOUNG, 20, 20)
        stop = stop_on_signals()
        async with observed(self.service) as health:
            log_start(log, config=berth_settings(os.environ), endpoints=_endpoints(health))
            await serve(stop, health)


PROCESS_SETTINGS = (
    ("BERTH_PROFILE_DIR", "shared/runtime/service.py", "write a cProfile dump there on stop"),
    ("BERTH_SETTINGS_FILE", "shared/runtime/settings.py", "a YAML map of BERTH_* settings"),
)
"""Read by every service process, each by the module named (with its own one-line errors;
docs/settings.md lists them)."""


def known_settings(*models: type[Any]) -> set[str]:
    """Every variable a service process reads: PROCESS_SETTINGS, StackSettings',
    MetricsSettings', LogSettings', TracingSettings', the security settings' and `models`'
    (the service's own settings classes)."""
    names = {name for name, _, _ in PROCESS_SETTINGS}
    every: tuple[type[Any], ...] = (
        StackSettings,
        MetricsSettings,
        LogSettings,
        TracingSettings,
        RedisSecurity,
        KafkaSecurity,
        *models,
    )
    for model in every:
        names |= {item.spec.env for item in settings_fields(model)}
    return names


def berth_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The BERTH_* settings for the start line's digest (secrets left out)."""
    secret = ("KEY", "PASSWORD", "TOKEN", "SECRET")
    return {
        name: value
        for name, value in env.items()
        if name.startswith("BERTH_") and not any(word in name for word in secret)
    }


def _endpoints(health: HealthServer) -> dict[str, str]:
    endpoints = {"otlp": os.environ.get(ENV_OTLP_ENDPOINT, "") or "off"}
    endpoints["metrics"] = f":{health.port}" if health.enabled else "off"
    return endpoints
