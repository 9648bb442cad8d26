"""`berth up` and `berth dev-servers`: a stack (or just its servers) in the foreground
(cli/up_command.py and cli/servers.py do the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.commands import CONTEXT, Args, output_option

REDIS_FSYNC_POLICIES = ("everysec", "always", "no")
"""shared/runtime/env.py's REDIS_FSYNC_POLICIES, spelled out so help does not import it
(tests/cli/test_tree.py checks they agree)."""


@click.command(
    "up",
    context_settings=CONTEXT,
    short_help="The distributed stack in the foreground (Ctrl-C stops).",
    help="Redis, the broker and the berth services, in the foreground (Ctrl-C stops).",
)
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--binders", type=int, default=1, show_default=True)
@click.option("--queues", type=int, default=1, show_default=True)
@click.option("--config", metavar="KUBE_SCHEDULER_CONFIG")
@click.option("--redis-url", help="external Redis (default $BERTH_REDIS_URL, else local)")
@click.option("--kafka-bootstrap", help="external broker ($BERTH_KAFKA_BOOTSTRAP)")
@click.option(
    "--redis-fsync",
    type=click.Choice(REDIS_FSYNC_POLICIES),
    help="the local Redis's AOF fsync policy (default $BERTH_REDIS_FSYNC, else everysec)",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="the local Redis's data directory (default: beside the state file, <state>-data); "
    "kept when berth up stops, so the next one resumes the cluster",
)
@click.option("--fresh", is_flag=True, help="start with an empty local Redis (clears its data)")
@click.option(
    "--tokens",
    metavar="FILE",
    help="tokens of the API front door (YAML: token -> {tenant, namespaces} or {admin: true}); "
    "clients then need --token and may only touch what it allows",
)
@click.option(
    "--kubeconfig",
    metavar="PATH",
    help="Kubernetes mode: schedule the pods of this cluster (its current context)",
)
@click.option(
    "--in-cluster",
    is_flag=True,
    help="Kubernetes mode with the pod's service account (when berth runs in the cluster)",
)
@click.option(
    "--take-default-scheduler",
    is_flag=True,
    help="Kubernetes mode: let a profile named default-scheduler take the pods that name no "
    "scheduler (only where kube-scheduler does not run)",
)
def up(**params: Any) -> int:
    if params["kubeconfig"] and params["in_cluster"]:
        raise click.BadOptionUsage("in_cluster", "--in-cluster: not allowed with --kubeconfig")
    from cli.up_command import up_run

    return up_run(Args.of(params))


@click.command(
    "dev-servers",
    context_settings=CONTEXT,
    short_help="Start a local Redis and Kafka-API broker.",
    help="Start a local Redis and Kafka-API broker (Tansu) on loopback ports, in the "
    "foreground (Ctrl-C stops both).",
)
@click.option("--redis-port", type=int, default=0, show_default=True, help="0 picks a free port")
@click.option("--kafka-port", type=int, default=0, show_default=True, help="0 picks a free port")
@click.option(
    "--check",
    is_flag=True,
    help="start, verify both answer, stop, and print a JSON report (CI smoke test)",
)
@output_option("env", "json", default="env")
def dev_servers(**params: Any) -> int:
    from cli.servers import serve

    return serve(Args.of(params))
