"""`berth`: the command line.

    berth schedule -f FILE [-f FILE ...] [--config CFG] [--seed N] [--explain] [-o json|table]
    berth bench --mode in-process --workload scheduling-basic --nodes N --pods P [-o json]
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
    berth bench --mode distributed --workers N --binders M [--nodes N] [--pods P] [-o json]
    berth bench --mode distributed --model [--nodes N] [--pods P] [-o json]
    berth bench --mode kueue --generator FILE [--rangespec FILE] [--time-scale K] [-o json]

Each command imports what it needs when it runs, so `berth --help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence

# Commands with parsers of their own (cli/stack_commands.py, cli/up_command.py, cli/run.py,
# cli/demo.py):
# `berth CMD ...`
# hands the rest of the command line to CMD's main.
DELEGATED: dict[str, tuple[str, str, str]] = {
    "up": (
        "cli.up_command",
        "up_main",
        "the distributed stack in the foreground (Ctrl-C stops)",
    ),
    "apply": ("cli.stack_commands", "apply_main", "create or update objects in a running stack"),
    "delete": ("cli.stack_commands", "delete_main", "delete objects from a running stack"),
    "get": (
        "cli.stack_commands",
        "get_main",
        "show pods, nodes, queues or ClusterQueues of a running stack",
    ),
    "describe": ("cli.stack_commands", "describe_main", "why a pod is where it is, or pending"),
    "node": ("cli.node_commands", "node_main", "fail, recover, drain, cordon or uncordon a node"),
    "simulate": ("cli.simulate", "simulate_main", "replay a trace of arrivals and node events"),
    "run": ("cli.run", "run_main", "schedule manifests through an ephemeral stack"),
    "demo": ("cli.demo", "demo_main", "the bundled multi-tenant workload, end to end"),
    "top": ("cli.top", "top_main", "live throughput, latency and queue depth from /metrics"),
}


def _delegated(name: str) -> Callable[[Sequence[str]], int]:
    module, function, _ = DELEGATED[name]
    main: Callable[[Sequence[str]], int] = getattr(importlib.import_module(module), function)
    return main


def _cmd_schedule(args: argparse.Namespace) -> int:
    from scheduling.dryrun import run_dry, to_json, to_table
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
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(to_json(report), indent=2))
    else:
        print(to_table(report))
    return 0


def _print_figures(result: Mapping[str, object], output: str) -> None:
    """A benchmark's figures: JSON, or one aligned `name: value` line each."""
    if output == "json":
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:>24}: {value}")


def _cmd_bench(args: argparse.Namespace) -> int:
    from cli.bench.floor import floor_pods_per_s, with_floor

    if args.mode == "kueue":
        from cli.bench.kueue_cli import bench_kueue

        return bench_kueue(args)

    # The reference, measured here, in this process, before the figure it is compared with.
    floor = floor_pods_per_s()
    if args.mode == "distributed":
        return _cmd_bench_distributed(args, floor)
    if args.mode == "queue":
        return _cmd_bench_queue(args, floor)
    from cli.bench.inprocess import run_bench

    try:
        result = run_bench(
            mode=args.mode,
            workload=args.workload,
            nodes=args.nodes,
            pods=args.pods,
            running=args.running,
            percentage=args.percentage,
            seed=args.seed,
            reuse=not args.no_reuse,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    with_floor(result, "throughput_avg", floor)
    _print_figures(result, args.output)
    return 0


def _cmd_bench_distributed(args: argparse.Namespace, floor: float) -> int:
    from cli.bench.capacity import MODEL_RUNS, model_report, model_table
    from cli.bench.distributed import bench_distributed
    from cli.bench.floor import with_floor

    shapes = MODEL_RUNS if args.model else ((args.workers, args.binders),)
    results = []
    try:
        for workers, binders in shapes:
            results.append(
                bench_distributed(
                    workload=args.workload,
                    nodes=args.nodes,
                    pods=args.pods,
                    running=args.running,
                    workers=workers,
                    binders=binders,
                    percentage=args.percentage,
                    seed=args.seed,
                    profile_dir=args.profile,
                    rate=args.rate,
                    duration=args.duration,
                )
            )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.model:
        report = model_report(results, floor)
        if args.output == "json":
            print(json.dumps(report, indent=2))
        else:
            print(model_table(report))
        return 0
    (result,) = results
    with_floor(result, "pods_per_second", floor)
    _print_figures(result, args.output)
    return 0


def _cmd_bench_queue(args: argparse.Namespace, floor: float) -> int:
    from cli.bench.floor import with_floor
    from cli.bench.queue import run_queue_bench

    result = run_queue_bench(args.pods, tenants=args.tenants, output=False)
    service = result.get("service")
    with_floor(result, "", floor)
    if isinstance(service, dict):
        # The queue service's throughput beside the floor: how many pods per second of
        # decisions it can feed.
        result["ratio_to_floor"] = round(service["add_to_dispatch_pods_per_s"] / floor, 2)
    _print_figures(result, args.output)
    return 0


def _cmd_dev_servers(args: argparse.Namespace) -> int:
    from cli.servers import main as launcher_main

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
    bench.add_argument(
        "--mode", choices=["in-process", "distributed", "queue", "kueue"], default="in-process"
    )
    bench.add_argument("--workload", default="scheduling-basic")
    bench.add_argument("--nodes", type=int, default=5000)
    bench.add_argument("--pods", type=int, default=10000, help="pods to schedule")
    bench.add_argument("--running", type=int, default=0, help="pods already running")
    bench.add_argument(
        "--percentage", type=int, default=100, help="percentageOfNodesToScore (default 100)"
    )
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--workers", type=int, default=1, help="distributed: scheduler workers")
    bench.add_argument("--binders", type=int, default=1, help="distributed: binders")
    bench.add_argument(
        "--model",
        action="store_true",
        help="distributed: run 1w/1b, 2w/1b and 2w/2b and print the capacity model",
    )
    bench.add_argument("--tenants", type=int, default=1, help="queue: tenants")
    bench.add_argument("--profile", metavar="DIR", help="distributed: cProfile dumps per process")
    bench.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="distributed: offer pods open loop at this many per second (0: all at once)",
    )
    bench.add_argument(
        "--duration", type=float, default=0.0, help="distributed, with --rate: seconds of load"
    )
    bench.add_argument(
        "--no-reuse",
        action="store_true",
        help="in-process: evaluate every node for every pod (no scheduling signatures)",
    )
    bench.add_argument("--generator", metavar="FILE", help="kueue: Kueue's generator.yaml")
    bench.add_argument("--rangespec", metavar="FILE", help="kueue: Kueue's rangespec.yaml")
    bench.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="kueue: run the config this many times faster (figures in the config's time)",
    )
    bench.add_argument(
        "--timeout", type=float, default=3600.0, help="kueue: give up after this many seconds"
    )
    bench.add_argument("-o", "--output", choices=["json", "table"], default="table")
    bench.set_defaults(run=_cmd_bench)

    dev = sub.add_parser("dev-servers", help="start a local Redis and Kafka-API broker")
    dev.set_defaults(run=_cmd_dev_servers)
    for name, (_, _, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in DELEGATED:
        return _delegated(words[0])(words[1:])
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
