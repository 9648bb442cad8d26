"""`berth node fail|recover|drain|cordon|uncordon NODE`: a simulated node's life (standalone
mode; the node agent, services/agent, acts on what these write)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from cli.client import StackClient, read_settings
from cli.commands import Args, invoke
from shared.lifecycle import nodes
from shared.lifecycle.state import FAIL_NOT_READY, FAIL_UNREACHABLE, LifecycleState
from shared.runtime.env import StackError
from shared.runtime.security import SecurityError


async def run(settings_args: Args) -> list[str]:
    args = settings_args
    settings = read_settings(args)
    if settings.kube:
        raise StackError(
            "this stack follows a Kubernetes API server: its nodes are the cluster's "
            "(use kubectl cordon/drain)"
        )
    async with StackClient(settings) as client:
        store = client.store
        state = LifecycleState(client.redis, store.keys)
        name = args.node
        if await store.get_node(name) is None:
            raise LookupError(f'node "{name}" not found')
        if args.action == "cordon":
            changed = await nodes.cordon(store, name, True)
            return [f"node/{name} {'cordoned' if changed else 'already cordoned'}"]
        if args.action == "uncordon":
            changed = await nodes.cordon(store, name, False)
            return [f"node/{name} {'uncordoned' if changed else 'already uncordoned'}"]
        if args.action == "fail":
            mode = FAIL_NOT_READY if args.not_ready else FAIL_UNREACHABLE
            await state.fail(name, mode)
            return [f"node/{name} failed ({mode})"]
        if args.action == "recover":
            await state.recover(name)
            return [f"node/{name} recovered"]
        report = await nodes.drain(store, state, name)
        lines = [f"node/{name} cordoned"]
        lines += [f"evicting pod {key}" for key in report.evicted]
        lines += [f"ignoring DaemonSet-managed pod {key}" for key in report.skipped]
        lines += [f"error when evicting pod {key}: {why}" for key, why in report.refused.items()]
        lines.append(f"node/{name} {'drained' if not report.refused else 'not fully drained'}")
        return lines


def node_main(argv: Sequence[str] | None = None) -> int:
    """`berth node ARGV...` (the click command in cli/commands/stack.py parses)."""
    from cli.commands.stack import node

    return invoke(node, argv, "berth node")


def node_run(args: Args) -> int:
    try:
        lines = asyncio.run(run(args))
    except (StackError, SecurityError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (RedisConnectionError, RedisTimeoutError) as exc:
        print(f"error: cannot talk to Redis ({exc}); is the stack up?", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0 if not lines[-1].endswith("not fully drained") else 1
