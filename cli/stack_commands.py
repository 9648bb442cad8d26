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
from collections.abc import Sequence
from pathlib import Path

from cli.client import StackClient, read_settings, state_path, write_state
from cli.servers import start_dev_servers
from cli.supervisor import Stack, create_topics, wait_for_dashboard, wait_for_workers
from cli.tables import format_nodes, format_pods, format_queues
from shared.env import (
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_URL,
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
from shared.security import SecurityError
from shared.store import StoreError


def _client_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--redis-url", help=f"default ${ENV_REDIS_URL} or the `berth up` state")
    parser.add_argument("--kafka-bootstrap", help=f"default ${ENV_KAFKA_BOOTSTRAP}")
    return parser


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
        settings = read_settings(args)
        manifests = _load(args.file)
    except (StackError, ManifestError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if _follows_kubernetes(settings, "kubectl apply -f"):
        return 1

    async def go() -> list[str]:
        async with StackClient(settings) as client:
            lines = await client.apply(manifests)
            for warning in client.warnings:
                print(f"Warning: {warning}", file=sys.stderr)
            return lines

    try:
        lines = asyncio.run(go())
    except (ManifestError, StoreError, SecurityError) as exc:
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
    except (StackError, ManifestError, ValueError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if _follows_kubernetes(settings, "kubectl delete"):
        return 1

    async def go() -> list[str]:
        lines = []
        async with StackClient(settings) as client:
            for kind, namespace, name in targets:
                key = f"{namespace}/{name}" if namespace else name
                found = await client.delete(kind, namespace, name)
                lines.append(f"{kind.lower()}/{key} {'deleted' if found else 'not found'}")
        return lines

    try:
        lines = asyncio.run(go())
    except SecurityError as exc:
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
    except (StackError, SecurityError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def go() -> str:
        async with StackClient(settings) as client:
            if args.what.startswith("pod"):
                return format_pods(await client.pod_rows(), args.output)
            if args.what.startswith("node"):
                return format_nodes(await client.node_rows(), args.output)
            return format_queues(await client.queue_rows(), args.output)

    try:
        print(asyncio.run(go()))
    except SecurityError as exc:
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
        )
        stack.start()
        asyncio.run(wait_for_workers(settings, args.workers, 60.0, stack))
        asyncio.run(wait_for_dashboard(stack, 30.0))
        write_state(settings, path)
        print(f"redis:   {redact_url(settings.redis_url)} ({servers.redis_source})")
        print(f"kafka:   {settings.kafka_bootstrap} ({servers.kafka_source})")
        if kube_mode:
            print(f"kubernetes: {server} (pods with schedulerName {_names(settings)})")
        for process in stack.processes.values():
            print(f"{process.name:<10} pid {process.pid}  log {process.log_path}")
        print(f"dashboard: {stack.dashboard_url}")
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
