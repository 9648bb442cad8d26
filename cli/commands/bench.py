"""`berth bench MODE ...`: the benchmarks, each mode with its own flags (cli/bench/modes.py
does the work). `berth bench --mode MODE ...` is the same command, and `berth bench ...`
without a mode is `berth bench in-process ...`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli.commands import CONTEXT, Args, output_option
from cli.commands.groups import ModeGroup

MODES = ("in-process", "distributed", "queue", "kueue")


@click.group(
    "bench",
    cls=ModeGroup,
    default="in-process",
    alias="--mode",
    modes=MODES,
    context_settings=CONTEXT,
    short_help="Benchmarks that print figures.",
    help="Benchmarks that print figures beside the floor (a reference measured first, in "
    "this process). `berth bench --mode MODE ...` is `berth bench MODE ...`; without a mode, "
    "in-process.",
)
def bench() -> None:
    """The group; each mode is a subcommand."""


def _cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The flags in-process and distributed share: the workload and the cluster's size."""
    for option in reversed(
        [
            click.option("--workload", default="scheduling-basic", show_default=True),
            click.option("--nodes", type=int, default=5000, show_default=True),
            click.option(
                "--pods", type=int, default=10000, show_default=True, help="pods to schedule"
            ),
            click.option(
                "--running", type=int, default=0, show_default=True, help="pods already running"
            ),
            click.option(
                "--percentage",
                type=int,
                default=100,
                show_default=True,
                help="percentageOfNodesToScore",
            ),
            click.option("--seed", type=int, default=0, show_default=True),
        ]
    ):
        command = option(command)
    return command


def _run(mode: str, params: dict[str, Any]) -> int:
    from cli.bench import modes

    work: Callable[[Args], int] = getattr(modes, mode.replace("-", "_"))
    return work(Args.of(params))


@bench.command(
    "in-process",
    context_settings=CONTEXT,
    short_help="The scheduling framework in this process.",
    help="The scheduling framework in this process on a generated cluster.",
)
@_cluster_options
@click.option(
    "--no-reuse", is_flag=True, help="evaluate every node for every pod (no scheduling signatures)"
)
@output_option("json", "table", default="table")
def in_process(**params: Any) -> int:
    return _run("in-process", params)


@bench.command(
    "distributed",
    context_settings=CONTEXT,
    short_help="The distributed pipeline on local servers.",
    help="The distributed pipeline (queue, scheduler workers, binders) on local servers.",
)
@_cluster_options
@click.option("--workers", type=int, default=1, show_default=True, help="scheduler workers")
@click.option("--binders", type=int, default=1, show_default=True, help="binders")
@click.option(
    "--model", is_flag=True, help="run 1w/1b, 2w/1b and 2w/2b and print the capacity model"
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="run each shape this many times, interleaved, and report each figure's median",
)
@click.option("--profile", metavar="DIR", help="cProfile dumps per process")
@click.option(
    "--rate",
    type=float,
    default=0.0,
    show_default=True,
    help="offer pods open loop at this many per second (0: all at once)",
)
@click.option(
    "--duration", type=float, default=0.0, show_default=True, help="with --rate: seconds of load"
)
@output_option("json", "table", default="table")
def distributed(**params: Any) -> int:
    return _run("distributed", params)


@bench.command(
    "queue", context_settings=CONTEXT, help="The queue service alone: add, lease, dispatch."
)
@click.option("--pods", type=int, default=10000, show_default=True, help="pods to queue")
@click.option("--tenants", type=int, default=1, show_default=True)
@click.option(
    "--partitions", type=int, default=8, show_default=True, help="partitions of the topics"
)
@output_option("json", "table", default="table")
def queue(**params: Any) -> int:
    return _run("queue", params)


@bench.command(
    "kueue",
    context_settings=CONTEXT,
    short_help="Kueue's scheduler performance harness.",
    help="Kueue's scheduler performance harness: its generator config through berth.",
)
@click.option("--generator", metavar="FILE", required=True, help="Kueue's generator.yaml")
@click.option("--rangespec", metavar="FILE", help="Kueue's rangespec.yaml")
@click.option(
    "--time-scale",
    type=float,
    default=1.0,
    show_default=True,
    help="run the config this many times faster (figures in the config's time)",
)
@click.option(
    "--runtime-from",
    type=click.Choice(["admission", "start"]),
    default="admission",
    show_default=True,
    help="a workload runs from its admission (Kueue's runner) or from its pod's start",
)
@click.option(
    "--timeout", type=float, default=3600.0, show_default=True, help="give up after (seconds)"
)
@click.option("--workers", type=int, default=1, show_default=True, help="scheduler workers")
@click.option("--binders", type=int, default=1, show_default=True, help="binders")
@click.option("--profile", metavar="DIR", help="cProfile dumps per process")
@output_option("json", "table", default="table")
def kueue(**params: Any) -> int:
    return _run("kueue", params)
