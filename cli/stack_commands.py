"""`berth apply`, `berth delete`, `berth get`, `berth up`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from cli.api_client import ApiClient, ApiTarget, read_api
from cli.client import StackClient, read_settings, state_path, write_state
from cli.servers import start_dev_servers
from cli.supervisor import Stack, create_topics, wait_for_dashboard, wait_for_workers
from cli.tables import format_nodes, format_pods, format_queues
from shared.env import (
    ENV_API_URL,
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_URL,
    ENV_TOKEN,
    IN_CLUSTER,
    StackError,
    StackSettings,
    redact_url,
)
from shared.models import (
    ManifestError,
    Manifests,
    load_manifests,
)
from shared.pod_status import PodRow
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
                lines, warnings = await client.apply(manifests), client.warnings
        for warning in warnings:
            print(f"Warning: {warning}", file=sys.stderr)
        return lines

    try:
        lines = asyncio.run(go())
    except (ManifestError, StoreError, SecurityError, StackError) as exc:
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
        lines = asyncio.run(go())
    except (SecurityError, StackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
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
}
_CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass", "ResourceFlavor", "ClusterQueue"}


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
        api, settings = _connect(args)
    except (StackError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def go() -> str:
        async with _client(api, settings) as client:
            if args.what.startswith("pod"):
                return format_pods(await client.pod_rows(), args.output)
            if args.what.startswith("node"):
                return format_nodes(await client.node_rows(), args.output)
            return format_queues(await client.queue_rows(), args.output)

    try:
        print(asyncio.run(go()))
    except (SecurityError, StackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
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
        "--tokens",
        metavar="FILE",
        help="tokens of the API front door (YAML: token -> {tenant, namespaces} or {admin: "
        "true}); clients then need --token and may only touch what it allows",
    )
    parser.add_argument(
        "--redis-url", help=f"external Redis (default ${ENV_REDIS_URL}, else local)"
    )
    parser.add_argument("--kafka-bootstrap", help=f"external broker (${ENV_KAFKA_BOOTSTRAP})")
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
    args = parser.parse_args(argv)
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
    try:
        servers = start_dev_servers(env)
    except SecurityError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    path = state_path()
    stack: Stack | None = None
    try:
        endpoints = servers.endpoints
        settings = StackSettings(
            servers.redis_url,
            servers.kafka_bootstrap,
            config_path=args.config,
            session_ms=3000,
            kube=kube_mode,
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
        print(f"redis:   {redact_url(settings.redis_url)} ({servers.redis_source})")
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
        while not stop.wait(0.2):
            for name in stack.poll():
                print(f"restarted {name} (log {stack.processes[name].log_path})", flush=True)
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
    print("stopped", file=sys.stderr)
    return 0
