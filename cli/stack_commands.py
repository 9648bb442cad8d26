"""`berth apply`, `berth delete`, `berth get`, `berth up`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar
from urllib.parse import urlsplit

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cli.api_client import ApiClient, ApiTarget, read_api
from cli.client import StackClient, read_settings, state_path, write_state
from cli.pod_events import describe_finished, pod_history
from cli.server_watch import ServerWatch
from cli.servers import DevServers, LauncherError, start_dev_servers
from cli.supervisor import Stack, create_topics, supervise, wait_for_dashboard, wait_for_workers
from cli.tables import (
    describe_pod,
    format_cluster_queues,
    format_local_queues,
    format_nodes,
    format_pods,
    format_queues,
)
from services.queue.client import PodRow
from shared.config import ConfigError
from shared.env import (
    ENV_API_URL,
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_FSYNC,
    ENV_REDIS_URL,
    ENV_TOKEN,
    IN_CLUSTER,
    REDIS_FSYNC_POLICIES,
    StackError,
    StackSettings,
    profile_refusal,
    redact_url,
)
from shared.models import (
    ManifestError,
    Manifests,
    load_manifests,
)
from shared.models.selector_text import SelectorSyntaxError, parse_selector
from shared.retry import describe
from shared.security import SecurityError
from shared.store import StoreError


def _client_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--redis-url", help=f"default ${ENV_REDIS_URL} or the `berth up` state")
    parser.add_argument("--kafka-bootstrap", help=f"default ${ENV_KAFKA_BOOTSTRAP}")
    parser.add_argument(
        "--token",
        help=f"a token of the stack's API front door (default ${ENV_TOKEN}; berth up --tokens)",
    )
    return parser


class Client(Protocol):
    """What the commands need of a stack: StackClient (Redis) or ApiClient (front door)."""

    async def delete(self, kind: str, namespace: str, name: str) -> bool: ...
    async def pod_rows(self) -> list[PodRow]: ...
    async def node_rows(self) -> list[dict[str, Any]]: ...
    async def queue_rows(self) -> dict[str, Any]: ...
    async def cluster_queue_rows(self) -> list[dict[str, Any]]: ...


@contextlib.asynccontextmanager
async def _client(
    target: ApiTarget | None, settings: StackSettings | None
) -> AsyncIterator[Client]:
    if target is not None:
        yield ApiClient(target)
        return
    assert settings is not None
    async with StackClient(settings) as client:
        yield client


def _connect(args: argparse.Namespace) -> tuple[ApiTarget | None, StackSettings | None]:
    """The front door when the stack has one (read_api), else the store's settings."""
    target = read_api(args)
    return target, None if target is not None else read_settings(args)


def _load(files: Sequence[str]) -> Manifests:
    return load_manifests(*files)


def _follows_kubernetes(settings: StackSettings, instead: str) -> bool:
    """In Kubernetes mode the API server owns the objects: writing the store directly
    would be overwritten (or deleted) by the adapter's next relist."""
    if settings.kube:
        print(
            "error: this stack follows a Kubernetes API server (Kubernetes mode), which owns "
            f"the objects; use `{instead}` instead",
            file=sys.stderr,
        )
    return bool(settings.kube)


_T = TypeVar("_T")


def _unreachable(settings: StackSettings, exc: BaseException) -> str:
    """One line for a client that could not talk to Redis: the URL (password hidden) and
    why."""
    reason = describe(exc)
    password = urlsplit(settings.redis_url).password
    if password:
        reason = reason.replace(password, "***")
    return (
        f"error: cannot talk to Redis at {redact_url(settings.redis_url)} ({reason}); "
        "is the stack up? (`berth up` restarts a Redis that died: retry in a moment)"
    )


def _talk(settings: StackSettings | None, go: Callable[[], Coroutine[Any, Any, _T]]) -> _T | None:
    """Run a client command; None (after the one-line error) while Redis is away."""
    try:
        return asyncio.run(go())
    except (RedisConnectionError, RedisTimeoutError) as exc:
        if settings is None:
            raise
        print(_unreachable(settings, exc), file=sys.stderr)
        return None


def apply_main(argv: Sequence[str] | None = None) -> int:
    parser = _client_parser("berth apply", "Create or update objects in a running stack.")
    parser.add_argument("-f", "--file", action="append", required=True, metavar="FILE")
    args = parser.parse_args(argv)
    try:
        target, settings = _connect(args)
        manifests = _load(args.file)  # checked here first: errors name the file
        texts = [Path(f).read_text() for f in args.file] if target is not None else []
    except (StackError, ManifestError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if settings is not None and _follows_kubernetes(settings, "kubectl apply -f"):
        return 1

    async def go() -> list[str]:
        if target is not None:
            api = ApiClient(target)
            lines, warnings = await api.apply(texts), api.warnings
        else:
            assert settings is not None
            async with StackClient(settings) as client:
                lines = await client.apply(manifests, admission=True)
                warnings = client.warnings
        for warning in warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        return lines

    try:
        lines = _talk(settings, go)
    except (ManifestError, StoreError, SecurityError, StackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if lines is None:
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
        api, settings = _connect(args)
        targets = _delete_targets(args)
    except (StackError, ManifestError, ValueError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if settings is not None and _follows_kubernetes(settings, "kubectl delete"):
        return 1

    async def go() -> list[str]:
        lines = []
        async with _client(api, settings) as client:
            for kind, namespace, name in targets:
                key = f"{namespace}/{name}" if namespace else name
                found = await client.delete(kind, namespace, name)
                lines.append(f"{kind.lower()}/{key} {'deleted' if found else 'not found'}")
        return lines

    try:
        lines = _talk(settings, go)
    except (SecurityError, StackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if lines is None:
        return 1
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
    "resourceflavor": "ResourceFlavor",
    "clusterqueue": "ClusterQueue",
    "localqueue": "LocalQueue",
    "cohort": "Cohort",
}
_CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass", "ResourceFlavor", "ClusterQueue", "Cohort"}


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
    parser = _client_parser(
        "berth get", "Show pods, nodes, queues or ClusterQueues of a running stack."
    )
    parser.add_argument(
        "what",
        choices=[
            *("pods", "pod", "nodes", "node", "queues", "queue"),
            *("clusterqueues", "cq", "localqueues", "lq"),
        ],
    )
    parser.add_argument("name", nargs="?", help="one pod (with -n its namespace)")
    parser.add_argument("-o", "--output", choices=["table", "wide", "json"], default="table")
    parser.add_argument("-n", "--namespace", help="pods of this namespace only")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="(the default)")
    parser.add_argument("-l", "--selector", default="", help="label selector, as kubectl's")
    args = parser.parse_args(argv)
    try:
        api, settings = _connect(args)
        selector = parse_selector(args.selector)
    except (StackError, SecurityError, SelectorSyntaxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def go() -> str:
        async with _client(api, settings) as client:
            if args.what.startswith("pod"):
                rows = [
                    r
                    for r in await client.pod_rows()
                    if (args.namespace is None or r.namespace == args.namespace)
                    and (args.name is None or r.name == args.name)
                    and selector.matches(r.labels)
                ]
                if args.name is not None and not rows:
                    raise LookupError(f'pod "{args.name}" not found')
                return format_pods(rows, args.output)
            if args.what.startswith("node"):
                return format_nodes(await client.node_rows(), args.output)
            if args.what in ("clusterqueues", "cq"):
                return format_cluster_queues(await client.cluster_queue_rows(), args.output)
            if args.what in ("localqueues", "lq"):
                queues, pods = await client.cluster_queue_rows(), await client.pod_rows()
                return format_local_queues(queues, pods, args.output)
            return format_queues(await client.queue_rows(), args.output)

    return _show(settings, go)


def describe_main(argv: Sequence[str] | None = None) -> int:
    parser = _client_parser("berth describe", "Why a pod is where it is (or still pending).")
    parser.add_argument("what", choices=["pod", "pods"])
    parser.add_argument("name")
    parser.add_argument("-n", "--namespace", default="default")
    args = parser.parse_args(argv)
    try:
        api, settings = _connect(args)
    except (StackError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def go() -> str:
        async with _client(api, settings) as client:
            key = f"{args.namespace}/{args.name}"
            rows = {r.key: r for r in await client.pod_rows()}
            events, finished = await pod_history(client, key)
            if key in rows:
                return describe_pod(rows[key], events)
            if finished is not None:
                return describe_finished(args.namespace, args.name, finished, events)
            raise LookupError(f'pod "{args.name}" not found in namespace {args.namespace}')

    return _show(settings, go)


def _show(settings: StackSettings | None, go: Callable[[], Coroutine[Any, Any, str]]) -> int:
    try:
        shown = _talk(settings, go)
    except (SecurityError, LookupError, StackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if shown is None:
        return 1
    print(shown)
    return 0


def kube_server(kube: str) -> str:
    """The API server Kubernetes mode would use, or "error: ..." saying why it cannot."""
    from shared.kube.client import load_config

    try:
        current = load_config(None if kube == IN_CLUSTER else kube).get()
        if current is None:
            return f"error: {kube}: no current context"
        return str(current.cluster.server)
    except (ValueError, OSError, KeyError, TypeError) as exc:
        return f"error: {kube}: {exc}"


def _names(settings: StackSettings) -> str:
    return ", ".join(sorted(settings.scheduler_names()))


def data_dir_of(state: Path) -> Path:
    """`berth up`'s Redis data directory by default: beside its state file."""
    return state.parent / f"{state.stem}-data"


def _lock_data_dir(data_dir: Path) -> TextIO:
    """Hold an exclusive lock on `data_dir` for this process's life: two Redis servers must
    never append to one AOF."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = (data_dir / "berth-up.lock").open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise StackError(
            f"another `berth up` uses {data_dir} (give this one --data-dir, or BERTH_STATE)"
        ) from None
    return lock


def _up_parser() -> argparse.ArgumentParser:
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
    parser.add_argument(
        "--redis-fsync",
        choices=REDIS_FSYNC_POLICIES,
        help=f"the local Redis's AOF fsync policy (default ${ENV_REDIS_FSYNC}, else everysec)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="the local Redis's data directory (default: beside the state file, "
        "<state>-data); kept when berth up stops, so the next one resumes the cluster",
    )
    parser.add_argument(
        "--fresh", action="store_true", help="start with an empty local Redis (clears its data)"
    )
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help="tokens of the API front door (YAML: token -> {tenant, namespaces} or {admin: "
        "true}); clients then need --token and may only touch what it allows",
    )
    kube = parser.add_mutually_exclusive_group()
    kube.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="Kubernetes mode: schedule the pods of this cluster (its current context)",
    )
    kube.add_argument(
        "--in-cluster",
        action="store_true",
        help="Kubernetes mode with the pod's service account (when berth runs in the cluster)",
    )
    parser.add_argument(
        "--take-default-scheduler",
        action="store_true",
        help="Kubernetes mode: let a profile named default-scheduler take the pods that name "
        "no scheduler (only where kube-scheduler does not run)",
    )
    return parser


def _describe_redis(servers: DevServers, resumed: bool) -> str:
    where = f"{redact_url(servers.redis_url)} ({servers.redis_source}"
    if servers.redis_source == "local":
        where += (
            f", AOF appendfsync {servers.redis_fsync} in {servers.redis_data_dir}"
            f"{', resumed' if resumed else ''}"
        )
    return where + ")"


def _profile_refusal(args: argparse.Namespace) -> str:
    """The adapter's refusal of a default-scheduler profile, before anything starts."""
    try:
        settings = StackSettings("redis://unused", "unused:0", config_path=args.config)
        names = settings.scheduler_names()
    except ConfigError as exc:
        return str(exc)
    return profile_refusal(names, args.take_default_scheduler).replace(
        "set BERTH_KUBE_TAKE_DEFAULT_SCHEDULER=1", "pass --take-default-scheduler"
    )


def up_main(argv: Sequence[str] | None = None) -> int:
    args = _up_parser().parse_args(argv)
    if args.tokens:
        from services.dashboard.auth import TokensError, load_tokens

        try:
            load_tokens(args.tokens)  # refuse a bad file before starting anything
        except TokensError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    kube_mode = IN_CLUSTER if args.in_cluster else (args.kubeconfig or "")
    if kube_mode:
        server = kube_server(kube_mode)
        if server.startswith("error: "):
            print(server, file=sys.stderr)
            return 2
        refusal = _profile_refusal(args)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 2
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
    path = state_path()
    data_dir = (args.data_dir or data_dir_of(path)).absolute()
    lock: TextIO | None = None
    try:
        if not env.get(ENV_REDIS_URL):
            lock = _lock_data_dir(data_dir)
            if args.fresh:
                for entry in data_dir.iterdir():
                    if entry.is_dir():
                        shutil.rmtree(entry)
                    elif entry.name != "berth-up.lock":
                        entry.unlink()
        resumed = any(data_dir.glob("appendonly*")) if lock is not None else False
        # Once: each server berth starts is the one the stack uses.
        servers = start_dev_servers(env, redis_data_dir=data_dir, redis_fsync=args.redis_fsync)
    except (StackError, LauncherError, SecurityError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if lock is not None:
            lock.close()
        return 1
    stack: Stack | None = None
    try:
        endpoints = servers.endpoints
        settings = StackSettings(
            servers.redis_url,
            servers.kafka_bootstrap,
            config_path=args.config,
            session_ms=3000,
            kube=kube_mode,
            take_default_scheduler=args.take_default_scheduler,
            redis_security=endpoints.redis_security,
            kafka_security=endpoints.kafka_security,
        )
        asyncio.run(create_topics(settings, workers=args.workers))
        workdir = Path(tempfile.mkdtemp(prefix="berth-up-"))
        stack = Stack(
            settings,
            workdir,
            workers=args.workers,
            binders=args.binders,
            queues=args.queues,
            dashboard=True,
            tokens_file=args.tokens or "",
        )
        stack.start()
        asyncio.run(wait_for_workers(settings, args.workers, 60.0, stack))
        asyncio.run(wait_for_dashboard(stack, 30.0))
        api = {ENV_API_URL: stack.dashboard_url} if args.tokens else {}
        write_state(settings, path, api)
        print(f"redis:   {_describe_redis(servers, resumed)}")
        print(f"kafka:   {settings.kafka_bootstrap} ({servers.kafka_source})")
        if kube_mode:
            print(f"kubernetes: {server} (pods with schedulerName {_names(settings)})")
        for process in stack.processes.values():
            print(f"{process.name:<10} pid {process.pid}  log {process.log_path}")
        print(f"dashboard: {stack.dashboard_url}")
        if args.tokens:
            print(f"api:     {stack.dashboard_url} (tokens {args.tokens}: clients need --token)")
        print(f"state:   {path}")
        ready = "`kubectl apply -f FILE`" if kube_mode else "`berth apply -f FILE`"
        print(f"ready: {ready}, `berth get pods`; Ctrl-C stops everything", flush=True)
        _supervise(stack, ServerWatch(servers), settings, stop)
    except (StackError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if stack is not None:
            stack.stop()
        servers.stop()
        with contextlib.suppress(OSError):
            if path.exists() and json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        if lock is not None:
            lock.close()
    print("stopped", file=sys.stderr)
    return 0


def _supervise(
    stack: Stack, watch: ServerWatch, settings: StackSettings, stop: threading.Event
) -> None:
    """Until `stop`: restart dead servers and services (cli.supervisor.supervise)."""

    def report(line: str) -> None:
        print(line, flush=True)

    asyncio.run(supervise(stack, watch, settings, stopping=stop.is_set, report=report))
