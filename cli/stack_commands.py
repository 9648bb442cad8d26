"""`berth apply`, `berth delete`, `berth get`, `berth describe`: a running stack's objects."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cli.api_client import ApiClient, ApiTarget, read_api
from cli.client import StackClient, read_settings
from cli.commands import Args, invoke
from cli.pod_events import describe_finished, pod_history
from cli.tables import (
    describe_pod,
    format_cluster_queues,
    format_local_queues,
    format_nodes,
    format_pods,
    format_queues,
)
from services.queue.client import PodRow
from shared.models import (
    ManifestError,
    Manifests,
    load_manifests,
)
from shared.models.selector_text import SelectorSyntaxError, parse_selector
from shared.runtime.env import (
    StackError,
    StackSettings,
    redact_url,
)
from shared.runtime.retry import describe
from shared.runtime.security import SecurityError
from shared.store import StoreError


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


def _connect(args: Args) -> tuple[ApiTarget | None, StackSettings | None]:
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
    """`berth apply ARGV...` (the click command in cli/commands/stack.py parses)."""
    from cli.commands.stack import apply

    return invoke(apply, argv, "berth apply")


def apply_run(args: Args) -> int:
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
    """`berth delete ARGV...`."""
    from cli.commands.stack import delete

    return invoke(delete, argv, "berth delete")


def delete_run(args: Args) -> int:
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


def _delete_targets(args: Args) -> list[tuple[str, str, str]]:
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
    """`berth get ARGV...`."""
    from cli.commands.stack import get

    return invoke(get, argv, "berth get")


def get_run(args: Args) -> int:
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
    """`berth describe ARGV...`."""
    from cli.commands.stack import describe

    return invoke(describe, argv, "berth describe")


def describe_run(args: Args) -> int:
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
