"""`berth simulate`, `berth run` and `berth demo`: workloads through an ephemeral stack
(cli/simulate.py, cli/run.py, cli/demo.py and cli/demo_tenants.py do the work).
`berth demo --tenants ...` is `berth demo tenants ...`, and `berth demo ...` is
`berth demo workload ...`."""

from __future__ import annotations

from typing import Any

import click

from cli.commands import CONTEXT, Args, files_option, output_option
from cli.commands.groups import ModeGroup


@click.command(
    "simulate", context_settings=CONTEXT, help="Replay a trace of arrivals and node events."
)
@files_option(help="cluster files and one trace file")
@click.option("--speed", type=float, default=1.0, show_default=True, help="time compression (x S)")
@click.option(
    "--sample", type=float, default=0.25, show_default=True, help="wall seconds per sample"
)
@click.option(
    "--timeout", type=float, default=600.0, show_default=True, help="wall seconds at most"
)
@click.option("--plot", metavar="FILE.png")
@output_option("text", "json", default="text")
def simulate(**params: Any) -> int:
    from cli.simulate import simulate_run

    return simulate_run(Args.of(params))


@click.command(
    "run",
    context_settings=CONTEXT,
    short_help="Schedule manifests through an ephemeral stack.",
    help="Schedule manifests through an ephemeral distributed stack; print the "
    "`berth schedule` JSON document.",
)
@files_option()
@click.option("--config", metavar="KUBE_SCHEDULER_CONFIG")
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--binders", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="tie-break seed")
@click.option("--timeout", type=float, default=300.0, show_default=True, metavar="SEC")
@output_option("json", default="json")
def run(**params: Any) -> int:
    from cli.run import run_run

    return run_run(Args.of(params))


@click.group(
    "demo",
    cls=ModeGroup,
    default="workload",
    alias="--tenants",
    context_settings=CONTEXT,
    short_help="The bundled multi-tenant workload, end to end.",
    help="The bundled multi-tenant workload through the distributed pipeline (`berth demo` "
    "is `berth demo workload`), or the quota act (`berth demo --tenants` is "
    "`berth demo tenants`).",
)
def demo() -> None:
    """The group; each act is a subcommand."""


@demo.command(
    "workload",
    context_settings=CONTEXT,
    short_help="The bundled workload through the distributed pipeline.",
    help="A multi-tenant batch workload through the distributed pipeline.",
)
@click.option("--nodes", type=int, default=1000, show_default=True)
@click.option("--pods", type=int, default=10_000, show_default=True)
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--binders", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", type=float, default=600.0, show_default=True, metavar="SEC")
@click.option("--no-validate", is_flag=True, help="skip the final validation")
@click.option(
    "--dashboard",
    is_flag=True,
    help="also start the dashboard (its URL is printed; it stops with the demo)",
)
@output_option("text", "json", default="text")
def workload(**params: Any) -> int:
    from cli.demo import demo_run

    return demo_run(Args.of(params))


@demo.command(
    "tenants",
    context_settings=CONTEXT,
    short_help="The quota act: ClusterQueues borrowing, reclaiming, sharing a cohort.",
    help="Three ClusterQueues in a cohort on the distributed stack: borrowing, reclaim and "
    "fair sharing over time.",
)
@click.option(
    "--job-seconds",
    type=float,
    default=6.0,
    show_default=True,
    metavar="SEC",
    help="how long each job runs once bound",
)
@click.option(
    "--timeout", type=float, default=120.0, show_default=True, metavar="SEC", help="give up after"
)
@click.option("--plot", metavar="FILE.png", help="draw usage and share over time")
@output_option("text", "json", default="text")
def tenants(**params: Any) -> int:
    from cli.demo_tenants import tenants_run

    return tenants_run(Args.of(params))
