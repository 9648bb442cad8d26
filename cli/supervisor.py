"""The dev stack's supervisor: service processes (cli.processes.ManagedProcess: own session,
log file, stopped with SIGTERM then SIGKILL, and by the kernel if this process dies),
restarted when they exit; and the local Redis and broker (cli/server_watch.py), restarted on
the same port when they die (the broker's topics created again: it keeps them in memory).

A service that exits is restarted after `RESTART_BACKOFF_SECONDS`; one that keeps exiting
before it has run `STABLE_SECONDS` waits twice as long each time, up to
`MAX_RESTART_PAUSE_SECONDS`, and each exit is logged with its status and last log line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from cli.processes import ManagedProcess
from cli.server_watch import ServerWatch
from cli.servers import DevServers, start_dev_servers
from shared.messaging.kafka import ensure_topics
from shared.runtime.env import (
    ENV_DASHBOARD_HOST,
    ENV_DASHBOARD_PORT,
    ENV_TOKENS_FILE,
    StackError,
    StackSettings,
)
from shared.runtime.redisconn import connect
from shared.runtime.retry import Backoff, Retry

log = logging.getLogger(__name__)


RESTART_BACKOFF_SECONDS = 1.0
MAX_RESTART_PAUSE_SECONDS = 30.0
STABLE_SECONDS = 30.0
"""A service that ran this long before it exited is restarted after the first pause again."""


DASHBOARD_HOST = "127.0.0.1"


def free_port(host: str = DASHBOARD_HOST) -> int:
    """A port nothing listens on now (the dashboard keeps it across restarts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def service_argv(kind: str, name: str, settings: StackSettings) -> list[str]:
    if kind == "worker":
        return [
            sys.executable,
            "-m",
            "services.scheduler",
            "--worker-id",
            name,
            "--group-id",
            settings.group_id("scheduler"),
        ]
    return [sys.executable, "-m", f"services.{kind}", "--name", name]


class Stack:
    """The service processes of one stack; `poll()` restarts the ones that exited."""

    def __init__(
        self,
        settings: StackSettings,
        workdir: Path,
        *,
        workers: int = 1,
        binders: int = 1,
        queues: int = 1,
        adapters: int | None = None,
        agents: int | None = None,
        dashboard: bool = False,
        dashboard_port: int | None = None,
        tokens_file: str = "",
        extra_env: Mapping[str, str] | None = None,
        component_env: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """`adapters`: Kubernetes API adapters (leader-elected; default one in Kubernetes
        mode, none standalone). `dashboard`: one dashboard (services/dashboard) on
        `dashboard_port` of the loopback (default: a free port), at `dashboard_url`; with
        `tokens_file`, it is the API front door and needs those tokens. `component_env`:
        kind ("queue", "worker", ...) -> variables for that kind's processes only (e.g. each
        its own Redis user)."""
        self.settings = settings
        if adapters is None:
            adapters = 1 if settings.kube else 0
        if agents is None:
            # The simulated cluster's node agent (services/agent): standalone only, where
            # berth is the whole control plane; a real cluster has kubelets.
            agents = 0 if settings.kube else 1
        self.workdir = workdir
        env = {**os.environ, **settings.env(), **(extra_env or {})}
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.dashboard_url = ""
        if dashboard:
            port = dashboard_port or free_port()
            env = {**env, ENV_DASHBOARD_HOST: DASHBOARD_HOST, ENV_DASHBOARD_PORT: str(port)}
            if tokens_file:
                env[ENV_TOKENS_FILE] = str(Path(tokens_file).resolve())
            self.dashboard_url = f"http://{DASHBOARD_HOST}:{port}/"
        self.processes: dict[str, ManagedProcess] = {}
        kinds = (
            ("queue", queues),
            ("binder", binders),
            ("worker", workers),
            ("adapter", adapters),
            ("agent", agents),
            ("dashboard", int(dashboard)),
        )
        for kind, count in kinds:
            for i in range(count):
                name = f"{kind}-{i}"
                # One log across restarts: the crash that caused a restart stays readable.
                self.processes[name] = ManagedProcess(
                    name,
                    service_argv(kind, name, settings),
                    workdir / f"{name}.log",
                    env={**env, **(component_env or {}).get(kind, {})},
                    append_log=True,
                )
        self.stopping = False
        self._backoff = {
            name: Backoff(initial=RESTART_BACKOFF_SECONDS, maximum=MAX_RESTART_PAUSE_SECONDS)
            for name in self.processes
        }
        self._pause: dict[str, float] = {}

    def start(self) -> None:
        for process in self.processes.values():
            process.start()

    def poll(self) -> list[str]:
        """Restart services that exited, after their backoff; names restarted."""
        restarted = []
        now = time.monotonic()
        for process in self.processes.values():
            if self.stopping or process.alive():
                continue
            name = process.name
            if process.exited_at is None:
                process.exited_at = now
                backoff = self._backoff[name]
                if process.started_at is None or now - process.started_at >= STABLE_SECONDS:
                    backoff.reset()
                self._pause[name] = backoff.next()
                lines = process.log_tail(500).strip().splitlines()
                log.warning(
                    "%s exited (%s: %s); restarting it in %.1fs",
                    name,
                    process.returncode,
                    lines[-1] if lines else "no output",
                    self._pause[name],
                )
            if now - process.exited_at >= self._pause[name]:
                process.restarts += 1
                process.start()
                restarted.append(name)
        return restarted

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        self.processes[name].send(sig)

    def kill_services(self) -> None:
        """SIGKILL every service (`poll()` starts them again)."""
        for process in self.processes.values():
            process.send(signal.SIGKILL)

    def stop(self) -> None:
        self.stopping = True
        for process in self.processes.values():
            process.send(signal.SIGTERM)
        for process in self.processes.values():
            process.stop()

    def names(self, kind: str) -> list[str]:
        return [name for name in self.processes if name.startswith(kind + "-")]


@dataclass(slots=True)
class RunningStack:
    """Servers + services + settings; `close()` stops everything it started."""

    settings: StackSettings
    stack: Stack
    servers: DevServers | None
    """The servers this stack started (stopped by close()), or None."""
    workdir: Path
    _supervisor: asyncio.Task[None] | None = None
    _owns_workdir: bool = True
    watch: ServerWatch | None = None
    """Restarts the local Redis and broker when they die (None: not watched)."""

    async def supervise(self, interval: float = 0.2) -> None:
        await supervise(
            self.stack,
            self.watch,
            self.settings,
            stopping=lambda: self.stack.stopping,
            report=lambda line: log.warning("%s", line),
            interval=interval,
        )

    def start_supervisor(self) -> None:
        self._supervisor = asyncio.create_task(self.supervise(), name="stack-supervisor")

    async def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        await asyncio.to_thread(self.stack.stop)
        if self.servers is not None:
            self.servers.stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


async def recreate_topics(settings: StackSettings, stack: Stack) -> None:
    """Every topic again, on a broker that came back empty (its storage is memory)."""
    await create_topics(
        settings,
        ordered=settings.ordered,
        workers=len(stack.names("worker")),
        binders=len(stack.names("binder")),
        queues=len(stack.names("queue")),
    )


async def supervise(
    stack: Stack,
    watch: ServerWatch | None,
    settings: StackSettings,
    *,
    stopping: Callable[[], bool],
    report: Callable[[str], None],
    interval: float = 0.2,
) -> None:
    """Until `stopping()`: restart dead servers (`watch`) and services (`stack`); `report`
    gets one line per restart.

    Redis comes back with its data (its AOF), and the services carry on through the outage
    on their own. The embedded broker comes back empty: its topics, their offsets and the
    consumer groups are gone, and a service that kept its position (or committed it again)
    would wait at an offset the new log reaches only much later. So when the broker dies,
    the services are killed with it (every service survives kill -9: what they had in
    flight comes back through the queue's leases) and started again once the broker answers
    and the topics exist again."""
    topics = Retry("supervisor: recreating the topics", log)
    failing = Retry("supervisor: restarting", log)
    held = False
    """Services are not restarted (the broker is down, or its topics are not there yet)."""
    while not stopping():
        try:
            for event in watch.poll() if watch is not None else ():
                server = event.server
                if event.what == "died" and server.kind == "kafka":
                    report(
                        f"{server.name} died: it kept the topics in memory, so the services "
                        "are stopped (kill -9) and started again once it is back with them"
                    )
                    stack.kill_services()
                    held = True
                elif event.what == "back":
                    report(f"restarted {server.name} (log {server.process.log_path})")
                    while server.kind == "kafka" and not stopping():
                        try:
                            await recreate_topics(settings, stack)
                            topics.succeeded()
                            held = False
                            break
                        except Exception as exc:  # noqa: BLE001 (Retry logs it)
                            await topics.pause(exc)
            if not held:
                for name in stack.poll():
                    report(f"restarted {name} (log {stack.processes[name].log_path})")
            failing.succeeded()
        except Exception as exc:  # noqa: BLE001 (Retry logs it: a fork that failed, say)
            await failing.pause(exc)
        await asyncio.sleep(interval)


async def create_topics(
    settings: StackSettings,
    *,
    ordered: bool = False,
    workers: int = 1,
    binders: int = 1,
    queues: int = 1,
) -> None:
    """Every topic, with a partition per replica of the role that has the most (a stack's
    replicas are fixed when it starts): every consumer of a group gets one, and no fetch
    names partitions nobody needs. The embedded broker reads every partition a fetch names,
    and answers a fetch only when its wait runs out (shared.messaging.kafka
    FETCH_MAX_WAIT_MS): each consumer fetches ~50 times a second, busy or idle. Eight
    partitions a topic for one worker and one binder cost the broker ~105 ms of CPU a second
    idle, two ~70. `ordered` (berth run; the queue hears of pods in the order they were applied
    from the store's change stream): `berth.schedule` with one partition per worker, so a
    worker schedules them in the order the queue dispatched them; proposals on one
    partition, so the binder handles them in the order they were decided."""
    topics = settings.topics
    wanted = dict.fromkeys(topics.all(), max(workers, binders, queues, 1))
    if ordered:
        wanted[topics.schedule] = max(1, workers)
        wanted[topics.proposals] = 1
    await ensure_topics(settings.kafka_bootstrap, wanted, security=settings.kafka_security)


async def start_stack(
    *,
    workers: int = 1,
    binders: int = 1,
    queues: int = 1,
    config_path: str | None = None,
    seed: int | None = None,
    single_tenant: str | None = None,
    servers: DevServers | None = None,
    settings: StackSettings | None = None,
    ordered: bool = False,
    session_ms: int = 3000,
    workdir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    component_env: Mapping[str, Mapping[str, str]] | None = None,
    ready_seconds: float = 60.0,
    kube: str = "",
    adapters: int | None = None,
    watch_servers: bool = False,
    dashboard: bool = False,
    agents: int | None = None,
) -> RunningStack:
    """Start servers (unless given) and the services; returns once every worker's view is
    loaded (heartbeat) — the queue and binders consume from the start of their topics.
    Servers it starts are restarted when they die; given `servers` too with `watch_servers`
    (the caller still stops them)."""
    owns_servers = servers is None and settings is None
    if owns_servers:
        servers = await asyncio.to_thread(start_dev_servers)
    try:
        if settings is None:
            assert servers is not None
            settings = servers.isolated_settings()
        settings = replace(
            settings,
            config_path=config_path or settings.config_path,
            seed=seed if seed is not None else settings.seed,
            single_tenant=single_tenant or settings.single_tenant,
            session_ms=session_ms,
            ordered=ordered,
            kube=kube or settings.kube,
        )
        await create_topics(
            settings, ordered=ordered, workers=workers, binders=binders, queues=queues
        )
        owns_workdir = workdir is None
        workdir = workdir or Path(tempfile.mkdtemp(prefix="berth-stack-"))
        stack = Stack(
            settings,
            workdir,
            workers=workers,
            binders=binders,
            queues=queues,
            adapters=adapters,
            dashboard=dashboard,
            agents=agents,
            extra_env=extra_env,
            component_env=component_env,
        )
        running = RunningStack(
            settings,
            stack,
            servers if owns_servers else None,
            workdir,
            _owns_workdir=owns_workdir,
            watch=(
                ServerWatch(servers)
                if servers is not None and (owns_servers or watch_servers)
                else None
            ),
        )
        stack.start()
        running.start_supervisor()
    except BaseException:
        if owns_servers and servers is not None:
            servers.stop()
        raise
    try:
        await wait_for_workers(settings, workers, ready_seconds, stack)
        if stack.dashboard_url:
            await wait_for_dashboard(stack, ready_seconds)
    except BaseException:
        await running.close()
        raise
    return running


async def wait_for_dashboard(stack: Stack, seconds: float) -> None:
    """Until the dashboard accepts connections (StackError with its log's tail if not)."""
    url = urlsplit(stack.dashboard_url)
    deadline = time.monotonic() + seconds
    while True:
        try:
            _, writer = await asyncio.open_connection(url.hostname, url.port)
        except OSError:
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {p.name}\n{p.log_tail(1500)}"
                    for p in stack.processes.values()
                    if p.name.startswith("dashboard-")
                )
                raise StackError(
                    f"the dashboard does not answer at {stack.dashboard_url} after {seconds}s"
                    f"\n{tails}"
                ) from None
            await asyncio.sleep(0.1)
        else:
            writer.close()
            await writer.wait_closed()
            return


async def wait_for_workers(
    settings: StackSettings, count: int, seconds: float, stack: Stack | None = None
) -> None:
    from shared.store.objects import read_heartbeats

    redis = connect(settings.redis_url, settings.redis_security)
    try:
        deadline = time.monotonic() + seconds
        while True:
            beats = await read_heartbeats(redis, settings.store_prefix, settings.cluster)
            fresh = [b for b in beats.values() if time.time() - b.at < 10]
            if len(fresh) >= count:
                return
            if time.monotonic() > deadline:
                tails = ""
                if stack is not None:
                    tails = "\n".join(
                        f"--- {p.name}\n{p.log_tail(1500)}" for p in stack.processes.values()
                    )
                raise StackError(f"{len(fresh)}/{count} workers ready after {seconds}s\n{tails}")
            await asyncio.sleep(0.1)
    finally:
        await redis.aclose()
