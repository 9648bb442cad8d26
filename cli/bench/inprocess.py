"""`berth bench --mode in-process`: the scheduling framework on a synthetic cluster, timed.

Every pending pod of the workload gets one scheduling cycle and, when a node is chosen, its
binding cycle (so the next pod sees it), exactly as `berth schedule` runs them; all nodes
are scored (percentageOfNodesToScore 100) unless `--percentage` says otherwise. Cycle times
are per pod, from the start of its scheduling cycle to the end of its binding cycle.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import replace
from typing import Any

import numpy as np

from cli.bench.workloads import WORKLOADS
from scheduling.cache.local import LocalCluster
from scheduling.framework.cycle import binding_cycle, scheduling_cycle
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.runtime import build_frameworks
from scheduling.framework.status import Code
from scheduling.plugins.registry import in_tree_registry
from shared.config import default_config


def run_bench(
    *,
    mode: str = "in-process",
    workload: str = "scheduling-basic",
    nodes: int = 5000,
    pods: int = 10000,
    running: int = 0,
    percentage: int = 100,
    seed: int = 0,
    reuse: bool = True,
) -> dict[str, Any]:
    """`reuse` False evaluates every node for every pod (no scheduling signatures)."""
    if mode != "in-process":
        raise ValueError(f"unknown bench mode {mode!r}")
    if workload not in WORKLOADS:
        known = ", ".join(sorted(WORKLOADS))
        raise ValueError(f"unknown workload {workload!r} (known: {known})")
    if workload == "preemption":
        # Each preemptor is placed on its nominated node before the next arrives, so every
        # decision sees the cluster the previous one left (scheduler_perf PreemptionBasic).
        from cli.bench.preemption import run_preemption_bench

        return run_preemption_bench(nodes, running or 4 * nodes, pods, seed)
    return asyncio.run(_run_in_process(workload, nodes, pods, running, percentage, seed, reuse))


async def _run_in_process(
    workload_name: str,
    nodes: int,
    pods: int,
    running: int,
    percentage: int,
    seed: int,
    reuse: bool,
) -> dict[str, Any]:
    setup_started = time.perf_counter()
    workload = WORKLOADS[workload_name](nodes, pods, running)
    cluster = LocalCluster(workload.nodes, workload.running)
    config = default_config()
    config.percentage_of_nodes_to_score = percentage
    framework = build_frameworks(config, in_tree_registry(), cluster, seed=seed, reuse=reuse)[
        "default-scheduler"
    ]
    setup_seconds = time.perf_counter() - setup_started

    cycles: list[float] = []
    preemption_cycles: list[float] = []
    scheduled = unschedulable = preempting = 0
    gc.collect()
    gc.disable()  # a collection inside one cycle would measure the collector, not the cycle
    started = time.perf_counter()
    try:
        for pod in workload.pending:
            t0 = time.perf_counter()
            state = CycleState()
            outcome = scheduling_cycle(framework, state, pod, cluster.nodes, cluster.for_attempt())
            if outcome.status.code == Code.SUCCESS and outcome.result is not None:
                host = outcome.result.suggested_host
                status = await binding_cycle(
                    framework, state, outcome.pod, host, cluster.for_attempt(), cluster.nodes
                )
                scheduled += status.is_success()
            else:
                unschedulable += 1
                # As the dry run does: victims go at once, the preemptor holds its node.
                for victim in outcome.victims:
                    cluster.delete_pod(victim)
                if outcome.nominating:
                    node_name = outcome.nominated_node or ""
                    pod_status = replace(pod.status, nominated_node_name=node_name)
                    cluster.nominate(replace(pod, status=pod_status), node_name)
                if outcome.victims:
                    preempting += 1
                    preemption_cycles.append(time.perf_counter() - t0)
            cycles.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    elapsed = time.perf_counter() - started
    cycle_ms = np.array(cycles) * 1000.0
    preemption_ms = np.array(preemption_cycles) * 1000.0
    report: dict[str, Any] = {
        "mode": "in-process",
        "workload": workload_name,
        "nodes": nodes,
        "running_pods": len(workload.running),
        "pods": len(workload.pending),
        "percentage_of_nodes_to_score": percentage,
        "pods_scheduled": scheduled,
        "pods_unschedulable": unschedulable,
        "pods_preempting": preempting,
        "throughput_avg": round(len(cycles) / elapsed, 1) if elapsed > 0 else 0.0,
        "cycle_p50_ms": round(float(np.percentile(cycle_ms, 50)), 3) if cycles else 0.0,
        "cycle_p99_ms": round(float(np.percentile(cycle_ms, 99)), 3) if cycles else 0.0,
        "elapsed_s": round(elapsed, 3),
        "setup_s": round(setup_seconds, 3),
    }
    signatures = framework.signatures
    if signatures is not None:
        report["signature_reuse"] = {
            "hits": signatures.stats.hits,
            "builds": signatures.stats.builds,
            "rows_evaluated": signatures.stats.rows_evaluated,
            "rows_promoted": signatures.stats.rows_promoted,
            "mixed": signatures.stats.mixed,
            "fallbacks": dict(signatures.stats.fallbacks),
        }
    if preemption_cycles:
        # A cycle that preempted: Filter over all nodes, then DefaultPreemption's decision.
        report["preemption_p50_ms"] = round(float(np.percentile(preemption_ms, 50)), 3)
        report["preemption_p99_ms"] = round(float(np.percentile(preemption_ms, 99)), 3)
    return report
