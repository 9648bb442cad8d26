"""A berth stack: Redis, the broker and the services as separate processes, and its clients.

    berth up [--workers N] [--binders M] [--queues K]      # foreground; Ctrl-C stops it all
    berth apply -f FILE [-f FILE ...]                       # objects into the running stack
    berth delete -f FILE | KIND NAME [-n NAMESPACE]
    berth get pods|nodes|queues [-o wide|json]
    berth run -f FILE [...] [--config C] [--workers N] [--binders M] [--seed S] [--timeout T]

Processes: `start_dev_servers` (cli.servers) gives Redis and the broker (or names external
ones: BERTH_REDIS_URL / BERTH_KAFKA_BOOTSTRAP); then each service runs as
`python -m services.scheduler` or `python -m services.stack serve queue|binder`, each
in its own session with its output in a log file, configured by the environment variables of
`StackSettings.env()`. A service that exits is restarted (like a Deployment's pod); Ctrl-C or
SIGTERM stops every child (SIGTERM, then SIGKILL) and the servers; if this process is killed
with SIGKILL, the kernel stops the children (PR_SET_PDEATHSIG).

Clients (`apply`, `get`, `delete`) find a running stack through its state file
(`~/.berth/stack.json`, or $BERTH_STATE), written by `berth up`: they write objects to the
store (shared.store) and publish pod and node events for the queue; `get` reads the store and
the queue's pending view.

`berth run` is an ephemeral stack: start, apply, wait until every pending pod is bound or parked
with nothing left to try, print the `berth schedule` JSON document, stop. It keeps the order
pods were applied in end to end (one tenant queue, as kube-scheduler has one queue; one
dispatch loop; single-partition pod-event and proposal topics, one `berth.schedule` partition
per worker; one proposal at a time in the binder), so with one worker and one binder it places
every pod where `berth schedule` does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from cli.servers import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_URL,
    DevServers,
    _set_parent_death_signal,
    start_dev_servers,
)
from services.scheduler.config import (
    ENV_CLUSTER,
    ENV_CONFIG,
    ENV_KEY_PREFIX,
    ENV_SEED,
    ENV_SESSION_MS,
    ENV_TOPIC_SUFFIX,
    group_options,
)
from services.scheduler.main import profiled
from shared.health import HealthServer
from shared.kafka import DEFAULT_PARTITIONS, Topics, assign_all, ensure_topics, make_producer
from shared.messages import NodeEvent, PodEvent, PodGroupEvent, PodOp
from shared.metrics import BerthMetrics, default_metrics
from shared.models import (
    DEFAULT_SCHEDULER_NAME,
    KubeObject,
    ManifestError,
    Manifests,
    Node,
    Pod,
    PodGroup,
    PriorityClass,
    load_manifests,
    resolve_priorities,
)
from shared.store import ClusterStore, StoreError, object_key
from shared.tracing import dispatch_headers

log = logging.getLogger(__name__)

ENV_QUEUE_PREFIX = "BERTH_QUEUE_PREFIX"
ENV_SINGLE_TENANT = "BERTH_SINGLE_TENANT"
ENV_ORDERED = "BERTH_ORDERED"
ENV_STATE = "BERTH_STATE"

RUN_TENANT = "run"
REDIS_CONNECTIONS = 1024
"""Per service process: redis-py's asyncio pool refuses (not waits) past its limit (100 by
default), and the binder runs hundreds of proposals at once."""
STOP_SECONDS = 10.0
RESTART_BACKOFF_SECONDS = 1.0


class StackError(RuntimeError):
    """The stack could not start, or a client found no running stack."""


# ============================================================================== settings
@dataclass(frozen=True, slots=True)
class StackSettings:
    """Where the services meet: servers, key prefixes, topic names, the scheduler config."""

    redis_url: str
    kafka_bootstrap: str
    cluster: str = "default"
    store_prefix: str = "berth:"
    queue_prefix: str = "berth:q:"
    topic_suffix: str = ""
    config_path: str | None = None
    seed: int | None = None
    single_tenant: str | None = None
    ordered: bool = False
    """Keep the order pods were applied in, end to end (berth run): see `create_topics`; the
    queue dispatches from one loop."""
    session_ms: int = 0
    """Consumer group session timeout (0: the services' defaults). The embedded broker takes
    about half of it to form a group, and a dead member is noticed after about 1.5 x."""

    @property
    def topics(self) -> Topics:
        return Topics().suffixed(self.topic_suffix) if self.topic_suffix else Topics()

    def group_id(self, service: str) -> str:
        """Consumer group of a service; stacks sharing a broker get groups of their own."""
        base = f"berth-{service}"
        return f"{base}.{self.topic_suffix}" if self.topic_suffix else base

    def consumer_options(self) -> dict[str, Any]:
        return group_options(self.session_ms)

    def env(self) -> dict[str, str]:
        """The environment of a service process (every service reads the same names)."""
        out = {
            ENV_REDIS_URL: self.redis_url,
            ENV_KAFKA_BOOTSTRAP: self.kafka_bootstrap,
            ENV_CLUSTER: self.cluster,
            ENV_KEY_PREFIX: self.store_prefix,
            ENV_QUEUE_PREFIX: self.queue_prefix,
            ENV_TOPIC_SUFFIX: self.topic_suffix,
        }
        if self.config_path:
            out[ENV_CONFIG] = str(Path(self.config_path).resolve())
        if self.seed is not None:
            out[ENV_SEED] = str(self.seed)
        if self.single_tenant:
            out[ENV_SINGLE_TENANT] = self.single_tenant
        if self.session_ms:
            out[ENV_SESSION_MS] = str(self.session_ms)
        if self.ordered:
            out[ENV_ORDERED] = "1"
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StackSettings:
        redis_url = env.get(ENV_REDIS_URL)
        bootstrap = env.get(ENV_KAFKA_BOOTSTRAP)
        if not redis_url or not bootstrap:
            raise StackError(f"{ENV_REDIS_URL} and {ENV_KAFKA_BOOTSTRAP} must be set")
        seed = env.get(ENV_SEED)
        return cls(
            redis_url=redis_url,
            kafka_bootstrap=bootstrap,
            cluster=env.get(ENV_CLUSTER) or "default",
            store_prefix=env.get(ENV_KEY_PREFIX) or "berth:",
            queue_prefix=env.get(ENV_QUEUE_PREFIX) or "berth:q:",
            topic_suffix=env.get(ENV_TOPIC_SUFFIX) or "",
            config_path=env.get(ENV_CONFIG) or None,
            seed=int(seed) if seed else None,
            single_tenant=env.get(ENV_SINGLE_TENANT) or None,
            session_ms=int(env.get(ENV_SESSION_MS) or 0),
            ordered=env.get(ENV_ORDERED) == "1",
        )

    @classmethod
    def isolated(cls, redis_url: str, kafka_bootstrap: str, **overrides: Any) -> StackSettings:
        """Settings with prefixes and topics of their own (several stacks share servers)."""
        run_id = uuid.uuid4().hex[:10]
        base = cls(
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            store_prefix=f"berth:{run_id}:",
            queue_prefix=f"berth:{run_id}:q:",
            topic_suffix=run_id,
        )
        return replace(base, **overrides)

    def scheduler_names(self) -> frozenset[str]:
        from shared.config import default_config, load_config

        config = load_config(self.config_path) if self.config_path else default_config()
        return frozenset(p.scheduler_name for p in config.profiles) or frozenset(
            {DEFAULT_SCHEDULER_NAME}
        )


def state_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(ENV_STATE) or Path.home() / ".berth" / "stack.json")


def write_state(settings: StackSettings, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"env": settings.env(), "pid": os.getpid()}, indent=2))


def read_settings(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> StackSettings:
    """A client's settings: --redis-url/--kafka-bootstrap, else the environment, else the
    state file of a running `berth up`."""
    env = os.environ if env is None else env
    merged: dict[str, str] = {}
    path = state_path(env)
    if path.exists():
        with contextlib.suppress(OSError, ValueError):
            merged.update(json.loads(path.read_text())["env"])
    merged.update({k: v for k, v in env.items() if k.startswith("BERTH_") and v})
    if getattr(args, "redis_url", None):
        merged[ENV_REDIS_URL] = args.redis_url
    if getattr(args, "kafka_bootstrap", None):
        merged[ENV_KAFKA_BOOTSTRAP] = args.kafka_bootstrap
    try:
        return StackSettings.from_env(merged)
    except StackError:
        raise StackError(
            f"no running stack: start one with `berth up` (state file {path}), or set "
            f"{ENV_REDIS_URL} and {ENV_KAFKA_BOOTSTRAP}"
        ) from None


# ============================================================================= processes
@dataclass(slots=True)
class ServiceProcess:
    """One service process: started in its own session, output to `log_path`."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exited_at: float | None = None

    def start(self) -> None:
        preexec = None
        if (
            sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()
        ):
            preexec = _set_parent_death_signal(os.getpid())
        with self.log_path.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=preexec,
            )
        self.exited_at = None

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM, then SIGKILL after `timeout`; always reaps."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.send(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.send(signal.SIGKILL)
                self.popen.wait(timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


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
    return [sys.executable, "-m", "services.stack", "serve", kind, "--name", name]


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
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.workdir = workdir
        env = {**os.environ, **settings.env(), **(extra_env or {})}
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.processes: dict[str, ServiceProcess] = {}
        for kind, count in (("queue", queues), ("binder", binders), ("worker", workers)):
            for i in range(count):
                name = f"{kind}-{i}"
                self.processes[name] = ServiceProcess(
                    name, service_argv(kind, name, settings), env, workdir / f"{name}.log"
                )
        self.stopping = False

    def start(self) -> None:
        for process in self.processes.values():
            process.start()

    def poll(self) -> list[str]:
        """Restart services that exited (after a short backoff); names restarted."""
        restarted = []
        now = time.monotonic()
        for process in self.processes.values():
            if self.stopping or process.alive():
                continue
            if process.exited_at is None:
                process.exited_at = now
                log.warning(
                    "%s exited (%s)", process.name, process.popen and process.popen.returncode
                )
            if now - process.exited_at >= RESTART_BACKOFF_SECONDS:
                process.restarts += 1
                process.start()
                restarted.append(process.name)
        return restarted

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        self.processes[name].send(sig)

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
    workdir: Path
    _supervisor: asyncio.Task[None] | None = None
    _owns_workdir: bool = True

    async def supervise(self, interval: float = 0.2) -> None:
        while not self.stack.stopping:
            for name in self.stack.poll():
                log.warning("restarted %s", name)
            await asyncio.sleep(interval)

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


async def create_topics(
    settings: StackSettings, *, ordered: bool = False, workers: int = 1
) -> None:
    """Every topic. `ordered` (berth run): pod events on one partition, so the queue sees pods
    in the order they were applied; `berth.schedule` with one partition per worker, so a
    worker schedules them in the order the queue dispatched them; proposals on one partition,
    so the binder handles them in the order they were decided."""
    topics = settings.topics
    wanted = dict.fromkeys(topics.all(), max(workers, DEFAULT_PARTITIONS))
    if ordered:
        wanted[topics.pod_events] = 1
        wanted[topics.schedule] = max(1, workers)
        wanted[topics.proposals] = 1
    await ensure_topics(settings.kafka_bootstrap, wanted)


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
    ready_seconds: float = 60.0,
) -> RunningStack:
    """Start servers (unless given) and the services; returns once every worker's view is
    loaded (heartbeat) — the queue and binders consume from the start of their topics."""
    owns_servers = servers is None and settings is None
    if owns_servers:
        servers = await asyncio.to_thread(start_dev_servers)
    try:
        if settings is None:
            assert servers is not None
            settings = StackSettings.isolated(servers.redis_url, servers.kafka_bootstrap)
        settings = replace(
            settings,
            config_path=config_path or settings.config_path,
            seed=seed if seed is not None else settings.seed,
            single_tenant=single_tenant or settings.single_tenant,
            session_ms=session_ms,
            ordered=ordered,
        )
        await create_topics(settings, ordered=ordered, workers=workers)
        owns_workdir = workdir is None
        workdir = workdir or Path(tempfile.mkdtemp(prefix="berth-stack-"))
        stack = Stack(
            settings,
            workdir,
            workers=workers,
            binders=binders,
            queues=queues,
            extra_env=extra_env,
        )
        running = RunningStack(
            settings,
            stack,
            servers if owns_servers else None,
            workdir,
            _owns_workdir=owns_workdir,
        )
        stack.start()
        running.start_supervisor()
    except BaseException:
        if owns_servers and servers is not None:
            servers.stop()
        raise
    try:
        await wait_for_workers(settings, workers, ready_seconds, stack)
    except BaseException:
        await running.close()
        raise
    return running


async def wait_for_workers(
    settings: StackSettings, count: int, seconds: float, stack: Stack | None = None
) -> None:
    from services.scheduler import read_heartbeats

    redis = aioredis.Redis.from_url(settings.redis_url)
    try:
        deadline = time.monotonic() + seconds
        while True:
            beats = await read_heartbeats(redis, settings.store_prefix, settings.cluster)
            fresh = [b for b in beats.values() if time.time() - float(b.get("ts", 0)) < 10]
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


# ========================================================================= serve (children)
def serve_main(argv: Sequence[str] | None = None) -> int:
    """`python -m services.stack serve queue|binder`: one service, configured from the
    environment (StackSettings.from_env), until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m services.stack serve")
    parser.add_argument("service", choices=["queue", "binder"])
    parser.add_argument("--name", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s {args.service} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    settings = StackSettings.from_env(os.environ)
    runner = _serve_queue if args.service == "queue" else _serve_binder
    with profiled(args.name or args.service):
        asyncio.run(runner(settings, args.name))
    return 0


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


@contextlib.asynccontextmanager
async def _observed(service: str) -> AsyncIterator[HealthServer]:
    """Tracing (BERTH_OTLP_ENDPOINT) and /metrics, /healthz, /readyz (BERTH_METRICS_PORT)
    around a service process; both are off when their variable is unset."""
    from shared.tracing import TracingConfig, setup_tracing

    tracing = setup_tracing(TracingConfig.from_env(f"berth-{service}", os.environ))
    health = HealthServer.from_env(os.environ)
    await health.start()
    try:
        yield health
    finally:
        health.set_ready(False, "stopping")
        await health.stop()
        await tracing.ashutdown()


async def _report_pending(store: Any, metrics: BerthMetrics, interval: float = 5.0) -> None:
    """scheduler_pending_pods from the queue's counts (the same on every replica)."""
    from services.queue.store import QueueCounts

    while True:
        try:
            total = sum((await store.counts()).values(), QueueCounts())
            metrics.set_pending(
                {
                    "active": total.active,
                    "backoff": total.backoff,
                    "unschedulable": total.unschedulable,
                    "gated": total.gated,
                }
            )
        except Exception:  # metrics must never stop the service
            log.exception("scheduler_pending_pods: refresh failed")
        await asyncio.sleep(interval)


def _scheduler_config(settings: StackSettings) -> Any:
    from shared.config import default_config, load_config

    return load_config(settings.config_path) if settings.config_path else default_config()


async def _serve_queue(settings: StackSettings, name: str) -> None:
    from services.queue.config import QueueConfig
    from services.queue.service import QueueService
    from shared.redisconn import connect

    config = QueueConfig.from_scheduler_config(
        _scheduler_config(settings),
        key_prefix=settings.queue_prefix,
        topics=settings.topics,
        single_tenant=settings.single_tenant,
        group_id=settings.group_id("queue"),
    )
    if settings.ordered:
        # Concurrent dispatch loops would interleave their batches on berth.schedule.
        config = replace(config, dispatch_concurrency=1)
    redis = connect(settings.redis_url, max_connections=REDIS_CONNECTIONS)
    store = ClusterStore(redis, cluster=settings.cluster, prefix=settings.store_prefix)
    labels = _NamespaceLabels(store)
    service = QueueService(
        redis,
        settings.kafka_bootstrap,
        config,
        namespace_labels=labels,
        replica_id=name or None,
        consumer_options=settings.consumer_options(),
        headers_hook=lambda batch: dispatch_headers(batch.requests),
    )
    async with _observed("queue") as health:
        await service.start()
        health.set_ready(True)
        pending = asyncio.create_task(_report_pending(service.store, default_metrics()))
        try:
            await _until_signalled()
        finally:
            health.set_ready(False, "draining")
            pending.cancel()
            await service.stop()
            await redis.aclose()


class _NamespaceLabels:
    """The queue's namespace-label lookup (namespaceSelector terms), cached for a moment."""

    def __init__(self, store: ClusterStore, ttl: float = 5.0) -> None:
        self._store = store
        self._ttl = ttl
        self._cache: dict[str, tuple[float, dict[str, str]]] = {}

    async def __call__(self, namespace: str) -> Mapping[str, str]:
        now = time.monotonic()
        hit = self._cache.get(namespace)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        obj = await self._store.get("Namespace", "", namespace)
        labels = dict(obj.metadata.labels) if obj is not None else {}
        self._cache[namespace] = (now, labels)
        return labels


async def _serve_binder(settings: StackSettings, name: str) -> None:
    from services.binder.config import BinderConfig
    from services.binder.service import BinderService
    from shared.redisconn import connect

    config = BinderConfig(
        cluster=settings.cluster,
        key_prefix=settings.store_prefix,
        topics=settings.topics,
        scheduler_config=_scheduler_config(settings),
        service_name=name or "binder",
        queue_key_prefix=settings.queue_prefix,
        group_id=settings.group_id("binder"),
        consumer_options=settings.consumer_options(),
    )
    if settings.ordered:
        # Proposals checked concurrently may be checked out of the order they were decided
        # in (the cross-node checks then see a different cluster than the worker did).
        config = replace(config, max_in_flight=1)
    redis = connect(settings.redis_url, max_connections=REDIS_CONNECTIONS)
    service = BinderService(redis, settings.kafka_bootstrap, config)
    async with _observed("binder") as health:
        await service.start()
        health.set_ready(True)
        try:
            await _until_signalled()
        finally:
            health.set_ready(False, "draining")
            await service.stop()
            await redis.aclose()


# ================================================================================ client
@dataclass(slots=True)
class PodRow:
    """One pod as `berth get pods` shows it."""

    namespace: str
    name: str
    status: str
    """Bound, Pending, Gated or Skipped."""
    node: str = ""
    queue: str = ""
    attempts: int = 0
    nominated_node: str = ""
    message: str = ""
    priority: int = 0
    tenant: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "status": self.status,
            "node": self.node or None,
            "queue": self.queue or None,
            "attempts": self.attempts,
            "nominatedNode": self.nominated_node or None,
            "message": self.message,
            "priority": self.priority,
            "tenant": self.tenant or None,
        }


class StackClient:
    """Objects in, views out, for a running stack (see the module docstring)."""

    def __init__(self, settings: StackSettings) -> None:
        from services.queue.config import QueueConfig
        from services.queue.store import QueueStore

        self.settings = settings
        self.warnings: list[str] = []
        """What the last apply warned about (pods whose own priority disagrees with their
        class), one line each."""
        self.redis = aioredis.Redis.from_url(settings.redis_url)
        self.store = ClusterStore(
            self.redis, cluster=settings.cluster, prefix=settings.store_prefix
        )
        self.queue = QueueStore(
            self.redis,
            QueueConfig(
                key_prefix=settings.queue_prefix,
                topics=settings.topics,
                single_tenant=settings.single_tenant,
            ),
        )
        self._producer: AIOKafkaProducer | None = None
        self.published: dict[str, float] = {}
        """pod uid -> when its add event was published (epoch seconds)."""

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        await self.redis.aclose()

    async def __aenter__(self) -> StackClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            self._producer = make_producer(self.settings.kafka_bootstrap)
            await self._producer.start()
        return self._producer

    # ---------------------------------------------------------------------- writes
    async def apply(self, manifests: Manifests, *, batch: int = 2000) -> list[str]:
        """Store every object (dependencies first) and publish its event; returns
        "kind/name created|configured" lines. Pod priorities are resolved against the stored
        PriorityClasses and the manifests' own (as admission would)."""
        stored_classes = cast(list[PriorityClass], await self.store.list("PriorityClass"))
        new_names = {pc.metadata.name for pc in manifests.priority_classes}
        self.warnings = resolve_priorities(
            manifests,
            [
                *manifests.priority_classes,
                *(c for c in stored_classes if c.metadata.name not in new_names),
            ],
        )
        lines: list[str] = []
        objects = list(manifests.objects())
        if len(objects) > batch:
            await self.store.check_apply(objects)  # all or nothing across the batches
        for start in range(0, len(objects), batch):
            lines += await self._apply_batch(objects[start : start + batch])
        return lines

    async def _apply_batch(self, objects: list[KubeObject]) -> list[str]:
        old = await self._existing(objects)
        applied = await self.store.apply(objects)
        producer = await self.producer()
        topics = self.settings.topics
        lines = []
        now = time.time()
        for obj, done in zip(objects, applied, strict=True):
            previous = old.get((done.kind, done.key))
            obj.metadata.resource_version = done.resource_version
            obj.metadata.uid = done.uid
            lines.append(
                f"{done.kind.lower()}/{done.key} {'configured' if previous else 'created'}"
            )
            op: PodOp = "update" if previous is not None else "add"
            if isinstance(obj, Pod):
                event = PodEvent.of(op, obj, cast(Pod | None, previous))
                self.published.setdefault(done.uid, now)
                await producer.send(topics.pod_events, event.encode(), key=done.uid.encode())
            elif isinstance(obj, Node):
                node_event = NodeEvent.of(op, obj, cast(Node | None, previous))
                await producer.send(topics.node_events, node_event.encode(), key=done.key.encode())
            elif isinstance(obj, PodGroup):
                group_event = PodGroupEvent.of(op, obj)
                await producer.send(topics.node_events, group_event.encode(), key=done.key.encode())
        await producer.flush()
        return lines

    async def _existing(self, objects: Sequence[KubeObject]) -> dict[tuple[str, str], KubeObject]:
        """The stored versions of objects about to be applied (for update events)."""
        out: dict[tuple[str, str], KubeObject] = {}
        kinds = {type(obj).__name__ for obj in objects}
        for kind in kinds:
            if kind not in ("Pod", "Node", "PodGroup"):
                continue
            wanted = {
                object_key(kind, o.metadata.namespace, o.metadata.name)
                for o in objects
                if type(o).__name__ == kind
            }
            present = await self.redis.hmget(self.store.keys.meta(kind), list(wanted))
            if not any(present):
                continue
            for key, meta in zip(list(wanted), present, strict=True):
                if meta is None:
                    continue
                namespace, _, name = key.rpartition("/")
                found = await self.store.get(kind, namespace, name)
                if found is not None:
                    out[(kind, key)] = found
        return out

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        """Delete an object from the store and publish its delete event."""
        found = await self.store.get(kind, namespace, name)
        if found is None:
            return False
        await self.store.delete(kind, namespace, name, uid=found.metadata.uid)
        producer = await self.producer()
        topics = self.settings.topics
        if isinstance(found, Pod):
            event = PodEvent.of("delete", found)
            await producer.send(topics.pod_events, event.encode(), key=found.metadata.uid.encode())
        elif isinstance(found, Node):
            node_event = NodeEvent.of("delete", found)
            await producer.send(topics.node_events, node_event.encode(), key=name.encode())
        elif isinstance(found, PodGroup):
            group_event = PodGroupEvent.of("delete", found)
            await producer.send(topics.node_events, group_event.encode(), key=found.key.encode())
        await producer.flush()
        return True

    # ----------------------------------------------------------------------- reads
    async def pod_rows(self) -> list[PodRow]:
        pods = cast(list[Pod], await self.store.list("Pod"))
        pending = {p.key: p for p in (await self.queue.pending()).pods}
        names = self.settings.scheduler_names()
        rows = []
        for pod in pods:
            meta = pod.metadata
            row = PodRow(meta.namespace, meta.name, "Pending", priority=pod.spec.priority or 0)
            queued = pending.get(pod.key)
            if pod.spec.node_name:
                row.status, row.node = "Bound", pod.spec.node_name
            elif pod.spec.scheduler_name not in names:
                row.status = "Skipped"
                row.message = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
            if queued is not None and not pod.spec.node_name:
                row.queue, row.attempts, row.tenant = queued.queue, queued.attempts, queued.tenant
                row.message = queued.message
                if queued.queue == "gated":
                    row.status = "Gated"
            row.nominated_node = pod.status.nominated_node_name
            rows.append(row)
        rows.sort(key=lambda r: (r.namespace, r.name))
        return rows

    async def node_rows(self) -> list[dict[str, Any]]:
        snapshot = await self.store.load_snapshot()
        rows = []
        for node in sorted(snapshot.nodes, key=lambda n: n.metadata.name):
            name = node.metadata.name
            usage = snapshot.usage.get(name)
            alloc = node.status.allocatable
            requested = dict(usage.requested) if usage is not None else {}
            rows.append(
                {
                    "name": name,
                    "status": "SchedulingDisabled" if node.spec.unschedulable else "Ready",
                    "zone": node.metadata.labels.get("topology.kubernetes.io/zone", ""),
                    "pods": usage.pods if usage is not None else 0,
                    "allocatable": dict(alloc),
                    "requested": requested,
                    "taints": [f"{t.key}={t.value}:{t.effect}" for t in node.spec.taints],
                }
            )
        return rows

    async def queue_rows(self) -> dict[str, Any]:
        from services.scheduler import read_heartbeats

        counts = await self.queue.counts()
        beats = await read_heartbeats(self.redis, self.settings.store_prefix, self.settings.cluster)
        return {
            "tenants": {
                tenant: {
                    "active": c.active,
                    "backoff": c.backoff,
                    "unschedulable": c.unschedulable,
                    "gated": c.gated,
                    "inflight": c.inflight,
                }
                for tenant, c in sorted(counts.items())
            },
            "workers": beats,
        }


# ============================================================================ formatting
def _table(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("   ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def format_pods(rows: Sequence[PodRow], output: str) -> str:
    if output == "json":
        return json.dumps({"pods": [r.to_json() for r in rows]}, indent=2)
    wide = output == "wide"
    header = ["NAMESPACE", "NAME", "STATUS", "NODE"]
    header += ["QUEUE", "ATTEMPTS", "NOMINATED", "REASON"] if wide else ["REASON"]
    table = [header]
    for r in rows:
        line = [r.namespace, r.name, r.status, r.node or "<none>"]
        if wide:
            line += [r.queue or "-", str(r.attempts), r.nominated_node or "-"]
        reason = r.message if r.status != "Bound" else ""
        if not wide and r.queue and r.status == "Pending":
            reason = f"[{r.queue}, {r.attempts} attempts] {reason}".rstrip()
        table.append([*line, reason])
    return _table(table)


def _fraction(requested: Mapping[str, int], allocatable: Mapping[str, int], name: str) -> str:
    total = allocatable.get(name, 0)
    used = requested.get(name, 0)
    return f"{100 * used // total}%" if total else "-"


def format_nodes(rows: Sequence[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps({"nodes": list(rows)}, indent=2)
    wide = output == "wide"
    header = ["NAME", "STATUS", "ZONE", "PODS", "CPU", "MEMORY"]
    if wide:
        header.append("TAINTS")
    table = [header]
    for r in rows:
        line = [
            r["name"],
            r["status"],
            r["zone"] or "-",
            f"{r['pods']}/{r['allocatable'].get('pods', 0)}",
            _fraction(r["requested"], r["allocatable"], "cpu"),
            _fraction(r["requested"], r["allocatable"], "memory"),
        ]
        if wide:
            line.append(",".join(r["taints"]) or "-")
        table.append(line)
    return _table(table)


def format_queues(view: Mapping[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(view, indent=2, default=str)
    table = [["TENANT", "ACTIVE", "BACKOFF", "UNSCHEDULABLE", "GATED", "INFLIGHT"]]
    for tenant, c in view["tenants"].items():
        table.append(
            [
                tenant,
                *(str(c[k]) for k in ("active", "backoff", "unschedulable", "gated", "inflight")),
            ]
        )
    out = _table(table)
    workers = view["workers"]
    if workers:
        rows = [["WORKER", "RV", "PODS", "PROPOSALS", "ASSUMED", "AGE"]]
        for name, beat in sorted(workers.items()):
            age = time.time() - float(beat.get("ts", 0))
            rows.append(
                [
                    name,
                    str(beat.get("rv", 0)),
                    str(beat.get("pods", 0)),
                    str(beat.get("proposals", 0)),
                    str(beat.get("assumed", 0)),
                    f"{age:.0f}s",
                ]
            )
        out += "\n\n" + _table(rows)
    return out


# ========================================================================== commands
def _client_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--redis-url", help=f"default ${ENV_REDIS_URL} or the `berth up` state")
    parser.add_argument("--kafka-bootstrap", help=f"default ${ENV_KAFKA_BOOTSTRAP}")
    return parser


def _load(files: Sequence[str]) -> Manifests:
    return load_manifests(*files)


def apply_main(argv: Sequence[str] | None = None) -> int:
    parser = _client_parser("berth apply", "Create or update objects in a running stack.")
    parser.add_argument("-f", "--file", action="append", required=True, metavar="FILE")
    args = parser.parse_args(argv)
    try:
        settings = read_settings(args)
        manifests = _load(args.file)
    except (StackError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    async def go() -> list[str]:
        async with StackClient(settings) as client:
            lines = await client.apply(manifests)
            for warning in client.warnings:
                print(f"Warning: {warning}", file=sys.stderr)
            return lines

    try:
        lines = asyncio.run(go())
    except (ManifestError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def delete_main(argv: Sequence[str] | None = None) -> int:
    parser = _client_parser("berth delete", "Delete objects from a running stack.")
    parser.add_argument("-f", "--file", action="append", metavar="FILE")
    parser.add_argument("kind", nargs="?", help="pod, node, podgroup, namespace, ...")
    parser.add_argument("name", nargs="?")
    parser.add_argument("-n", "--namespace", default="default")
    args = parser.parse_args(argv)
    try:
        settings = read_settings(args)
        targets = _delete_targets(args)
    except (StackError, ManifestError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1

    async def go() -> list[str]:
        lines = []
        async with StackClient(settings) as client:
            for kind, namespace, name in targets:
                key = f"{namespace}/{name}" if namespace else name
                found = await client.delete(kind, namespace, name)
                lines.append(f"{kind.lower()}/{key} {'deleted' if found else 'not found'}")
        return lines

    lines = asyncio.run(go())
    print("\n".join(lines))
    return 0 if all(not line.endswith("not found") for line in lines) else 1


_KINDS = {
    "pod": "Pod",
    "pods": "Pod",
    "node": "Node",
    "nodes": "Node",
    "namespace": "Namespace",
    "ns": "Namespace",
    "priorityclass": "PriorityClass",
    "pdb": "PodDisruptionBudget",
    "poddisruptionbudget": "PodDisruptionBudget",
    "podgroup": "PodGroup",
}
_CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass"}


def _delete_targets(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    if args.file:
        manifests = _load(args.file)
        return [
            (type(obj).__name__, obj.metadata.namespace, obj.metadata.name)
            for obj in reversed(list(manifests.objects()))
        ]
    if not args.kind or not args.name:
        raise ValueError("give -f FILE, or KIND NAME")
    kind = _KINDS.get(args.kind.lower())
    if kind is None:
        raise ValueError(f"unknown kind {args.kind!r} (one of {', '.join(sorted(set(_KINDS)))})")
    return [(kind, "" if kind in _CLUSTER_SCOPED else args.namespace, args.name)]


def get_main(argv: Sequence[str] | None = None) -> int:
    parser = _client_parser("berth get", "Show pods, nodes or queues of a running stack.")
    parser.add_argument("what", choices=["pods", "pod", "nodes", "node", "queues", "queue"])
    parser.add_argument("-o", "--output", choices=["table", "wide", "json"], default="table")
    args = parser.parse_args(argv)
    try:
        settings = read_settings(args)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def go() -> str:
        async with StackClient(settings) as client:
            if args.what.startswith("pod"):
                return format_pods(await client.pod_rows(), args.output)
            if args.what.startswith("node"):
                return format_nodes(await client.node_rows(), args.output)
            return format_queues(await client.queue_rows(), args.output)

    print(asyncio.run(go()))
    return 0


def up_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="berth up",
        description="Redis, the broker and the berth services, in the foreground (Ctrl-C stops).",
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument("--queues", type=int, default=1)
    parser.add_argument("--config", metavar="KUBE_SCHEDULER_CONFIG")
    parser.add_argument(
        "--redis-url", help=f"external Redis (default ${ENV_REDIS_URL}, else local)"
    )
    parser.add_argument("--kafka-bootstrap", help=f"external broker (${ENV_KAFKA_BOOTSTRAP})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")

    stop = threading.Event()

    def request_stop(_signum: int, _frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, request_stop)
    env = dict(os.environ)
    if args.redis_url:
        env[ENV_REDIS_URL] = args.redis_url
    if args.kafka_bootstrap:
        env[ENV_KAFKA_BOOTSTRAP] = args.kafka_bootstrap
    servers = start_dev_servers(env)
    path = state_path()
    stack: Stack | None = None
    try:
        settings = StackSettings(
            servers.redis_url, servers.kafka_bootstrap, config_path=args.config, session_ms=3000
        )
        asyncio.run(create_topics(settings, workers=args.workers))
        workdir = Path(tempfile.mkdtemp(prefix="berth-up-"))
        stack = Stack(
            settings, workdir, workers=args.workers, binders=args.binders, queues=args.queues
        )
        stack.start()
        asyncio.run(wait_for_workers(settings, args.workers, 60.0, stack))
        write_state(settings, path)
        print(f"redis:   {settings.redis_url} ({servers.redis_source})")
        print(f"kafka:   {settings.kafka_bootstrap} ({servers.kafka_source})")
        for process in stack.processes.values():
            print(f"{process.name:<10} pid {process.pid}  log {process.log_path}")
        print(f"state:   {path}")
        print("ready: `berth apply -f FILE`, `berth get pods`; Ctrl-C stops everything", flush=True)
        while not stop.wait(0.2):
            for name in stack.poll():
                print(f"restarted {name} (log {stack.processes[name].log_path})", flush=True)
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if stack is not None:
            stack.stop()
        servers.stop()
        with contextlib.suppress(OSError):
            if path.exists() and json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
    print("stopped", file=sys.stderr)
    return 0


# ============================================================================ berth run
@dataclass(slots=True)
class RunObserver:
    """Reads `berth.schedule`, `berth.proposals` and `berth.outcomes` from the start (no
    group): preemptions (victims, nominated node), conflicts, and when each pod was first
    dispatched, proposed and bound (broker timestamps), for latency figures."""

    bootstrap: str
    topics: Topics
    victims: dict[str, list[str]] = field(default_factory=dict)
    nominated: dict[str, str] = field(default_factory=dict)
    bound_at: dict[str, float] = field(default_factory=dict)
    """pod uid -> broker timestamp of its "scheduled" outcome (epoch seconds)."""
    results: Counter[str] = field(default_factory=Counter)
    conflicts: Counter[str] = field(default_factory=Counter)
    """Conflict messages (the binder's reasons)."""
    dispatched_at: dict[str, float] = field(default_factory=dict)
    proposed_at: dict[str, float] = field(default_factory=dict)
    _consumer: AIOKafkaConsumer | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            max_partition_fetch_bytes=16 * 1024 * 1024,
        )
        await consumer.start()
        topics = self.topics
        assigned = await assign_all(consumer, [topics.schedule, topics.proposals, topics.outcomes])
        await consumer.seek_to_beginning(*assigned)
        self._consumer = consumer
        self._task = asyncio.create_task(self._read(), name="run-observer")

    async def _read(self) -> None:
        from services.binder.messages import Proposal
        from shared.messages import MessageError, Outcome, ScheduleBatch

        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=200, max_records=20_000)
            for tp, records in batches.items():
                for record in records:
                    at = record.timestamp / 1000
                    try:
                        if tp.topic == self.topics.schedule:
                            for request in ScheduleBatch.decode(record.value).requests:
                                self.dispatched_at.setdefault(request.uid, at)
                        elif tp.topic == self.topics.proposals:
                            proposal = Proposal.decode(record.value)
                            self.proposed_at.setdefault(proposal.uid, at)
                            if proposal.kind == "preempt":
                                victims = [v.pod_key for v in proposal.victims]
                                self.victims.setdefault(proposal.pod_key, []).extend(victims)
                                self.nominated[proposal.pod_key] = proposal.node_name
                        else:
                            outcome = Outcome.decode(record.value)
                            self.results[outcome.result] += 1
                            if outcome.result == "conflict":
                                self.conflicts[outcome.message] += 1
                            if outcome.result == "scheduled":
                                self.bound_at.setdefault(outcome.uid, at)
                    except MessageError:
                        continue

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


@dataclass(slots=True)
class Progress:
    bound: int
    parked: int
    waiting: int
    """Pending pods the queue still holds in active, backoff or in flight (or not yet seen)."""
    total: int


async def pending_progress(
    client: StackClient, pending: Mapping[str, Pod], names: frozenset[str]
) -> tuple[Progress, int]:
    """How many of `pending` (key -> pod as applied) are bound (or deleted after binding:
    preempted), parked (the queue's unschedulable and gated pods), or still moving; and the
    store's resourceVersion (a change means something is still happening). Reads raw hashes
    and the queue's counts only: it runs every few hundred milliseconds beside the services."""
    from services.queue.store import QueueCounts

    keys = client.store.keys
    async with client.redis.pipeline(transaction=True) as pipe:
        pipe.get(keys.rv)
        pipe.hgetall(keys.pod_node)
        pipe.hgetall(keys.meta("Pod"))
        rv, nodes, metas = await pipe.execute()
    counts = sum((await client.queue.counts()).values(), QueueCounts())
    considered = bound = 0
    for key, pod in pending.items():
        if pod.spec.scheduler_name not in names or pod.metadata.deletion_timestamp is not None:
            continue
        considered += 1
        field = key.encode()
        meta = metas.get(field)
        uid = meta.partition(b" ")[2].decode() if meta is not None else ""
        if uid != pod.metadata.uid or field in nodes:
            bound += 1
    parked = min(considered - bound, counts.unschedulable + counts.gated)
    return Progress(bound, parked, considered - bound - parked, considered), int(rv or 0)


async def wait_until_settled(
    client: StackClient,
    pending: Mapping[str, Pod],
    *,
    seconds: float,
    quiet_seconds: float = 1.5,
    on_progress: Callable[[Progress], None] | None = None,
) -> bool:
    """Until no pending pod is active, backing off or in flight and nothing changed in the
    store for `quiet_seconds`; False on timeout."""
    names = client.settings.scheduler_names()
    deadline = time.monotonic() + seconds
    last: tuple[int, int, int, int] | None = None
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        progress, rv = await pending_progress(client, pending, names)
        if on_progress is not None:
            on_progress(progress)
        state = (rv, progress.bound, progress.parked, progress.waiting)
        if state != last:
            last, quiet_since = state, time.monotonic()
        elif progress.waiting == 0 and time.monotonic() - quiet_since >= quiet_seconds:
            return True
        await asyncio.sleep(0.2)
    return False


async def collect_report(
    client: StackClient, manifests_pods: Sequence[Pod], observer: RunObserver
) -> dict[str, Any]:
    """The `berth schedule -o json` document for the pods that had no nodeName."""
    names = client.settings.scheduler_names()
    stored = {p.key: p for p in cast(list[Pod], await client.store.list("Pod"))}
    queued = {p.key: p for p in (await client.queue.pending()).pods}
    preempted_by = {v: preemptor for preemptor, vs in observer.victims.items() for v in vs}
    out = []
    for pod in manifests_pods:
        if pod.spec.node_name:
            continue
        key = pod.key
        entry: dict[str, Any] = {
            "pod": key,
            "status": "Unschedulable",
            "node": None,
            "nominatedNode": observer.nominated.get(key) or None,
            "victims": list(observer.victims.get(key, [])),
            "message": "",
        }
        now = stored.get(key)
        waiting = queued.get(key)
        if pod.spec.scheduler_name not in names:
            entry["status"] = "Skipped"
            entry["message"] = f'profile not found for scheduler name "{pod.spec.scheduler_name}"'
        elif pod.metadata.deletion_timestamp is not None:
            entry["status"] = "Skipped"
            entry["message"] = f"skip schedule deleting pod: {key}"
        elif now is None or now.metadata.uid != pod.metadata.uid:
            entry["message"] = f"preempted by {preempted_by.get(key, 'another pod')}"
        elif now.spec.node_name:
            entry["status"] = "Scheduled"
            entry["node"] = now.spec.node_name
            entry["message"] = f"Successfully assigned {key} to {now.spec.node_name}"
        elif waiting is not None:
            entry["status"] = "Gated" if waiting.queue == "gated" else "Unschedulable"
            entry["message"] = waiting.message
        out.append(entry)
    return {"pods": out}


@dataclass(slots=True)
class Pipeline:
    """An ephemeral stack with a client and an observer (see `pipeline`)."""

    running: RunningStack
    client: StackClient
    observer: RunObserver
    pods: list[Pod] = field(default_factory=list)
    """Every pod applied, as applied."""

    @property
    def stack(self) -> Stack:
        return self.running.stack

    async def apply(self, manifests: Manifests) -> None:
        self.pods += manifests.pods
        await self.client.apply(manifests)

    def pending(self) -> dict[str, Pod]:
        return {p.key: p for p in self.pods if not p.spec.node_name}

    async def settle(self, seconds: float, **options: Any) -> bool:
        return await wait_until_settled(self.client, self.pending(), seconds=seconds, **options)

    async def report(self) -> dict[str, Any]:
        return await collect_report(self.client, self.pods, self.observer)


@contextlib.asynccontextmanager
async def pipeline(
    *,
    config_path: str | None = None,
    workers: int = 1,
    binders: int = 1,
    queues: int = 1,
    seed: int | None = None,
    servers: DevServers | None = None,
    ordered: bool = True,
    single_tenant: str | None = RUN_TENANT,
    session_ms: int = 1500,
    workdir: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Pipeline]:
    """Start an ephemeral stack (on `servers`, with keys and topics of its own, or on servers
    of its own), yield a Pipeline, stop everything."""
    settings = None
    if servers is not None:
        settings = StackSettings.isolated(servers.redis_url, servers.kafka_bootstrap)
    running = await start_stack(
        workers=workers,
        binders=binders,
        queues=queues,
        config_path=config_path,
        seed=seed,
        single_tenant=single_tenant,
        settings=settings,
        ordered=ordered,
        session_ms=session_ms,
        workdir=workdir,
        extra_env=extra_env,
    )
    try:
        observer = RunObserver(running.settings.kafka_bootstrap, running.settings.topics)
        await observer.start()
        try:
            async with StackClient(running.settings) as client:
                yield Pipeline(running, client, observer)
        finally:
            await observer.stop()
    finally:
        await running.close()


async def run_pipeline(
    manifests: Manifests,
    *,
    config_path: str | None = None,
    workers: int = 1,
    binders: int = 1,
    seed: int | None = None,
    seconds: float = 300.0,
    servers: DevServers | None = None,
) -> tuple[dict[str, Any], bool]:
    """`berth run` as a library: (the report, whether everything settled within `seconds`)."""
    async with pipeline(
        config_path=config_path, workers=workers, binders=binders, seed=seed, servers=servers
    ) as run:
        await run.apply(manifests)
        settled = await run.settle(seconds)
        return await run.report(), settled


def run_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="berth run",
        description="Schedule manifests through an ephemeral distributed stack; print the "
        "`berth schedule` JSON document.",
    )
    parser.add_argument("-f", "--file", action="append", required=True, metavar="FILE")
    parser.add_argument("--config", metavar="KUBE_SCHEDULER_CONFIG")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="tie-break seed (default 0)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SEC")
    parser.add_argument("-o", "--output", choices=["json"], default="json")
    args = parser.parse_args(argv)
    try:
        manifests = _load(args.file)
        if args.config:
            from shared.config import load_config

            load_config(args.config)  # fail before starting anything
    except (ManifestError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        report, settled = asyncio.run(
            run_pipeline(
                manifests,
                config_path=args.config,
                workers=args.workers,
                binders=args.binders,
                seed=args.seed,
                seconds=args.timeout,
            )
        )
    except (StackError, ManifestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    if not settled:
        print(f"warning: not settled after {args.timeout}s", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m services.stack serve ...` (service processes)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        return serve_main(args[1:])
    print("usage: python -m services.stack serve queue|binder", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "PodRow",
    "RunningStack",
    "Stack",
    "StackClient",
    "StackError",
    "StackSettings",
    "apply_main",
    "delete_main",
    "get_main",
    "run_main",
    "run_pipeline",
    "start_stack",
    "up_main",
]
