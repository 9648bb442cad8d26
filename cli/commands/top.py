"""`berth top`: live scheduling figures from the services' /metrics (cli/top.py does the
work)."""

from __future__ import annotations

from typing import Any

import click

from cli.commands import CONTEXT, Args


@click.command(
    "top",
    context_settings=CONTEXT,
    short_help="Live throughput, latency and queue depth from /metrics.",
    help="Live scheduling figures from the services' /metrics.",
)
@click.option(
    "--url",
    multiple=True,
    help="a service's metrics endpoint (repeatable; default: $BERTH_TOP_URLS, comma-separated)",
)
@click.option(
    "--interval", type=float, default=2.0, show_default=True, help="seconds between scrapes"
)
@click.option("--once", is_flag=True, help="print one frame and exit")
def top(**params: Any) -> int:
    from cli.top import top_run

    return top_run(Args.of(params))
