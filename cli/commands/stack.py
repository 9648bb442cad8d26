"""`berth apply|delete|get|describe|node`: the commands that talk to a running stack
(cli/stack_commands.py and cli/node_commands.py do the work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli.commands import CONTEXT, Args, files_option, output_option

# The names of shared/runtime/env.py's ENV_REDIS_URL, ENV_KAFKA_BOOTSTRAP and ENV_TOKEN, spelled out
# so that help does not import shared.runtime.env (tests/cli/test_tree.py checks they agree).
REDIS_URL_HELP = "default $BERTH_REDIS_URL or the `berth up` state"
KAFKA_BOOTSTRAP_HELP = "default $BERTH_KAFKA_BOOTSTRAP"
TOKEN_HELP = "a token of the stack's API front door (default $BERTH_TOKEN; berth up --tokens)"


def _stack_options(token: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--redis-url, --kafka-bootstrap (and --token): where the stack is."""

    def add(command: Callable[..., Any]) -> Callable[..., Any]:
        if token:
            command = click.option("--token", help=TOKEN_HELP)(command)
        command = click.option("--kafka-bootstrap", help=KAFKA_BOOTSTRAP_HELP)(command)
        return click.option("--redis-url", help=REDIS_URL_HELP)(command)

    return add


def _run(function: str, params: dict[str, Any]) -> int:
    from cli import stack_commands

    work: Callable[[Args], int] = getattr(stack_commands, function)
    return work(Args.of(params))


@click.command(
    "apply", context_settings=CONTEXT, help="Create or update objects in a running stack."
)
@files_option()
@_stack_options()
def apply(**params: Any) -> int:
    return _run("apply_run", params)


@click.command("delete", context_settings=CONTEXT, help="Delete objects from a running stack.")
@files_option(required=False)
@click.argument("kind", required=False)
@click.argument("name", required=False)
@click.option("-n", "--namespace", default="default", show_default=True)
@_stack_options()
def delete(**params: Any) -> int:
    """KIND is pod, node, podgroup, namespace, ... (or give -f FILE instead)."""
    return _run("delete_run", params)


GET_KINDS = (
    *("pods", "pod", "nodes", "node", "queues", "queue"),
    *("clusterqueues", "cq", "localqueues", "lq"),
)


@click.command(
    "get",
    context_settings=CONTEXT,
    short_help="Show pods, nodes, queues or ClusterQueues of a running stack.",
    help="Show pods, nodes, queues or ClusterQueues of a running stack. KIND: "
    + ", ".join(GET_KINDS)
    + "; NAME: one pod (with -n its namespace).",
)
@click.argument("what", metavar="KIND", type=click.Choice(GET_KINDS))
@click.argument("name", required=False)
@output_option("table", "wide", "json", default="table")
@click.option("-n", "--namespace", help="pods of this namespace only")
@click.option("-A", "--all-namespaces", is_flag=True, help="(the default)")
@click.option("-l", "--selector", default="", help="label selector, as kubectl's")
@_stack_options()
def get(**params: Any) -> int:
    return _run("get_run", params)


@click.command(
    "describe", context_settings=CONTEXT, help="Why a pod is where it is (or still pending)."
)
@click.argument("what", type=click.Choice(["pod", "pods"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@_stack_options()
def describe(**params: Any) -> int:
    return _run("describe_run", params)


NODE_ACTIONS = ("fail", "recover", "drain", "cordon", "uncordon")


@click.command(
    "node",
    context_settings=CONTEXT,
    help="Fail, recover, drain, cordon or uncordon a node of a running stack.",
)
@click.argument("action", type=click.Choice(NODE_ACTIONS))
@click.argument("node")
@click.option(
    "--not-ready",
    is_flag=True,
    help="fail: the kubelet reports Ready=False (not-ready taints at once) instead of going "
    "silent (unreachable taints after the node monitor grace period)",
)
@_stack_options(token=False)
def node(**params: Any) -> int:
    from cli.node_commands import node_run

    return node_run(Args.of(params))
