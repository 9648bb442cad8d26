"""`berth`: the command line.

    berth schedule -f FILE [-f FILE ...] [--config CFG] [--seed N] [--explain] [-o json|table]
    berth bench --mode in-process --workload scheduling-basic --nodes N --pods P [-o json]
    berth dev-servers                      # a local Redis and Kafka-API broker, in the foreground

Each command imports what it needs when it runs, so `berth --help` stays instant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _cmd_schedule(args: argparse.Namespace) -> int:
    from services.scheduler.dryrun import run_dry, to_json, to_table
    from shared.config import ConfigError, default_config, load_config
    from shared.models import ManifestError, load_manifests

    try:
        manifests = load_manifests(*args.file)
        config = load_config(args.config) if args.config else default_config()
        report = run_dry(manifests, config, seed=args.seed, explain=args.explain)
    except (ManifestError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(to_json(report), indent=2))
    else:
        print(to_table(report))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from services.scheduler.bench import run_bench

    try:
        result = run_bench(
            mode=args.mode,
            workload=args.workload,
            nodes=args.nodes,
            pods=args.pods,
            running=args.running,
            percentage=args.percentage,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")
    return 0


def _cmd_dev_servers(args: argparse.Namespace) -> int:
    from shared.launcher import main as launcher_main

    return launcher_main([])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="berth",
        description="berth: a distributed, Kubernetes-compatible pod scheduler.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    schedule = sub.add_parser(
        "schedule",
        help="dry run: where would these pods go, and why?",
        description="Run the scheduling framework in one process on manifests; no servers.",
    )
    schedule.add_argument("-f", "--file", action="append", required=True, metavar="FILE")
    schedule.add_argument("--config", metavar="KUBE_SCHEDULER_CONFIG")
    schedule.add_argument("--seed", type=int, default=0, help="tie-break seed (default 0)")
    schedule.add_argument("--explain", action="store_true", help="per-node scores")
    schedule.add_argument("-o", "--output", choices=["json", "table"], default="table")
    schedule.set_defaults(run=_cmd_schedule)

    bench = sub.add_parser("bench", help="benchmarks that print figures")
    bench.add_argument("--mode", choices=["in-process"], default="in-process")
    bench.add_argument("--workload", default="scheduling-basic")
    bench.add_argument("--nodes", type=int, default=5000)
    bench.add_argument("--pods", type=int, default=10000, help="pods to schedule")
    bench.add_argument("--running", type=int, default=0, help="pods already running")
    bench.add_argument(
        "--percentage", type=int, default=100, help="percentageOfNodesToScore (default 100)"
    )
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("-o", "--output", choices=["json", "table"], default="table")
    bench.set_defaults(run=_cmd_bench)

    dev = sub.add_parser("dev-servers", help="start a local Redis and Kafka-API broker")
    dev.set_defaults(run=_cmd_dev_servers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
