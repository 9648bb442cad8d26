"""`berth`: the command line, one click tree (cli/commands/).

    berth schedule -f FILE [-f FILE ...] [--config CFG] [--seed N] [--explain] [-o json|table]
    berth dev-servers                      # a local Redis and Kafka-API broker, in the foreground
    berth up [--workers N] [--binders M] [--queues K]     # the distributed stack, foreground
    berth apply -f FILE | delete -f FILE | KIND NAME | get pods|nodes|queues [-o wide|json]
    berth get pods [NAME] [-n NS] [-l SELECTOR] | get clusterqueues|localqueues
    berth describe pod NAME [-n NS]         # why a pod is where it is, or still pending
    berth node fail|recover|drain|cordon|uncordon NODE [--not-ready]   # a node's life
    berth simulate -f CLUSTER -f TRACE [--speed S] [--plot FILE.png] [-o json]
    berth run -f FILE [--config C] [--workers N] [--binders M] [--seed S] [--timeout T] -o json
    berth demo                             # the bundled multi-tenant workload, end to end
    berth demo --tenants [--plot FILE.png] # ClusterQueues borrowing, reclaiming, sharing a cohort
    berth bench in-process|distributed|queue|kueue ...   # or: berth bench --mode MODE ...
    berth top [--url URL ...] [--once]      # live figures from the services' /metrics
    berth completion bash|zsh|fish          # the shell completion script

Subcommands are imported when they run (LazyGroup), and each imports its work when it is
called, so `berth --help` and `berth get --help` load click and nothing heavy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from cli.commands import CONTEXT, invoke
from cli.commands.groups import LazyGroup

PROG = "berth"

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "schedule": ("cli.commands.schedule:schedule", "Dry run: where would these pods go, and why?"),
    "bench": ("cli.commands.bench:bench", "Benchmarks that print figures."),
    "dev-servers": (
        "cli.commands.stack_up:dev_servers",
        "Start a local Redis and Kafka-API broker.",
    ),
    "up": (
        "cli.commands.stack_up:up",
        "The distributed stack in the foreground (Ctrl-C stops).",
    ),
    "apply": ("cli.commands.stack:apply", "Create or update objects in a running stack."),
    "delete": ("cli.commands.stack:delete", "Delete objects from a running stack."),
    "get": (
        "cli.commands.stack:get",
        "Show pods, nodes, queues or ClusterQueues of a running stack.",
    ),
    "describe": ("cli.commands.stack:describe", "Why a pod is where it is (or still pending)."),
    "node": (
        "cli.commands.stack:node",
        "Fail, recover, drain, cordon or uncordon a node of a running stack.",
    ),
    "simulate": ("cli.commands.workloads:simulate", "Replay a trace of arrivals and node events."),
    "run": ("cli.commands.workloads:run", "Schedule manifests through an ephemeral stack."),
    "demo": ("cli.commands.workloads:demo", "The bundled multi-tenant workload, end to end."),
    "top": ("cli.commands.top:top", "Live throughput, latency and queue depth from /metrics."),
    "completion": (
        "cli.commands.completion:completion",
        "Print the shell completion script (bash, zsh or fish).",
    ),
}
"""Every subcommand: where its click command lives and its one-line help (what `berth --help`
shows without importing it; tests/cli/test_tree.py checks the two agree)."""


@click.group(
    PROG,
    cls=LazyGroup,
    lazy=SUBCOMMANDS,
    context_settings=CONTEXT,
    help="berth: a distributed, Kubernetes-compatible pod scheduler.",
)
def berth() -> None:
    """The root of the tree; each subcommand does the work."""


def main(argv: Sequence[str] | None = None) -> int:
    """The `berth` console script: run the tree on argv (None: sys.argv[1:]); the exit code."""
    return invoke(berth, argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
