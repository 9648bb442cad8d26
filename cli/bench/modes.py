"""`berth bench MODE`'s work, one function per mode: run the benchmark, print its figures
beside the floor (the reference measured in this process first; cli/bench/floor.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from cli.bench.floor import floor_pods_per_s, with_floor
from cli.commands import Args


def print_figures(result: Mapping[str, object], output: str) -> None:
    """A benchmark's figures: JSON, or one aligned `name: value` line each."""
    if output == "json":
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:>24}: {value}")


def in_process(args: Args) -> int:
    from cli.bench.inprocess import run_bench

    floor = floor_pods_per_s()
    try:
        result = run_bench(
            mode="in-process",
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
    print_figures(result, args.output)
    return 0


def distributed(args: Args) -> int:
    from cli.bench.capacity import MODEL_RUNS, median_run, model_report, model_table
    from cli.bench.distributed import bench_distributed

    floor = floor_pods_per_s()
    shapes = MODEL_RUNS if args.model else ((args.workers, args.binders),)
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {shape: [] for shape in shapes}
    try:
        # Shapes in turn, `repeat` times: a slow spell of the shared cores falls on every
        # shape alike, and each figure's median leaves one bad run out.
        for workers, binders in [shape for _ in range(args.repeat) for shape in shapes]:
            runs[(workers, binders)].append(
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
    results = [median_run(each) if len(each) > 1 else each[0] for each in runs.values()]
    if args.model:
        report = model_report(results, floor)
        if args.output == "json":
            print(json.dumps(report, indent=2))
        else:
            print(model_table(report))
        return 0
    (result,) = results
    with_floor(result, "pods_per_second", floor)
    print_figures(result, args.output)
    return 0


def queue(args: Args) -> int:
    from cli.bench.queue import run_queue_bench

    floor = floor_pods_per_s()
    result = run_queue_bench(
        args.pods, tenants=args.tenants, partitions=args.partitions, output=False
    )
    service = result.get("service")
    with_floor(result, "", floor)
    if isinstance(service, dict):
        # The queue service's throughput beside the floor: how many pods per second of
        # decisions it can feed.
        result["ratio_to_floor"] = round(service["add_to_dispatch_pods_per_s"] / floor, 2)
    print_figures(result, args.output)
    return 0


def kueue(args: Args) -> int:
    from cli.bench.kueue_cli import bench_kueue

    return bench_kueue(args)
