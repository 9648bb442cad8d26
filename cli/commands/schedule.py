"""`berth schedule`: the dry run (the scheduling framework in one process on manifests)."""

from __future__ import annotations

import json
import sys

import click

from cli.commands import CONTEXT, files_option, output_option


@click.command(
    "schedule",
    context_settings=CONTEXT,
    short_help="Dry run: where would these pods go, and why?",
    help="Run the scheduling framework in one process on manifests; no servers.",
)
@files_option()
@click.option("--config", metavar="KUBE_SCHEDULER_CONFIG")
@click.option("--seed", type=int, default=0, show_default=True, help="tie-break seed")
@click.option("--explain", is_flag=True, help="per-node scores")
@output_option("json", "table", default="table")
def schedule(
    file: tuple[str, ...], config: str | None, seed: int, explain: bool, output: str
) -> int:
    from scheduling.dryrun import run_dry, to_json, to_table
    from shared.config import ConfigError, default_config, load_config
    from shared.models import ManifestError, load_manifests

    try:
        manifests = load_manifests(*file)
        loaded = load_config(config) if config else default_config()
        report = run_dry(manifests, loaded, seed=seed, explain=explain)
    except (ManifestError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if output == "json":
        print(json.dumps(to_json(report), indent=2))
    else:
        print(to_table(report))
    return 0
