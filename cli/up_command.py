"""`berth up`: Redis, the broker and the berth services in the foreground, supervised (a
service that exits is restarted), with the stack's state file and its Redis data directory."""

from __future__ import annotations

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
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cli.client import state_path, write_state
from cli.commands import Args, invoke
from cli.server_watch import ServerWatch
from cli.servers import DevServers, LauncherError, start_dev_servers
from cli.supervisor import Stack, create_topics, supervise, wait_for_dashboard, wait_for_workers
from shared.config import ConfigError
from shared.runtime.env import (
    ENV_API_URL,
    ENV_KAFKA_BOOTSTRAP,
    ENV_REDIS_URL,
    IN_CLUSTER,
    StackError,
    StackSettings,
    profile_refusal,
    redact_url,
)
from shared.runtime.security import SecurityError


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


def _describe_redis(servers: DevServers, resumed: bool) -> str:
    where = f"{redact_url(servers.redis_url)} ({servers.redis_source}"
    if servers.redis_source == "local":
        where += (
            f", AOF appendfsync {servers.redis_fsync} in {servers.redis_data_dir}"
            f"{', resumed' if resumed else ''}"
        )
    return where + ")"


def _profile_refusal(args: Args) -> str:
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
    """`berth up ARGV...` (the click command in cli/commands/stack_up.py parses)."""
    from cli.commands.stack_up import up

    return invoke(up, argv, "berth up")


def up_run(args: Args) -> int:
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
        asyncio.run(
            create_topics(settings, workers=args.workers, binders=args.binders, queues=args.queues)
        )
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
