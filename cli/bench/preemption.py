"""`berth bench --mode in-process --workload preemption`: the cost of one preemption decision.

Modelled on scheduler_perf PreemptionBasic, at the issue's size: 5,000 nodes filled by 20,000
low-priority pods (4 per node, all the CPU), then high-priority pods arrive. Each arriving pod
runs a full scheduling cycle with the default profile (PreFilter and Filter find no node),
then PostFilter (DefaultPreemption) picks a node and victims. The victims are deleted and the
pod is placed on its nominated node before the next one arrives, so every decision sees the
cluster the previous one left.

Reported per decision: the PostFilter latency (the preemption decision itself) and the whole
cycle (Filter + PostFilter), p50/p99/mean/max in milliseconds, as wall time and as the CPU
time of the scheduling thread (`*_cpu`: what the decision costs, without the time other
processes took the core on a shared machine). Building the preemption pod index once (the
first decision on a new cluster) is reported apart.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from cli.bench.workloads import preemption
from scheduling.cache.local import LocalCluster
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import FitError
from scheduling.framework.runtime import build_frameworks
from scheduling.framework.schedule import schedule_pod
from scheduling.plugins import names
from scheduling.plugins.defaultpreemption.default_preemption import DefaultPreemption
from scheduling.plugins.registry import in_tree_registry
from shared.config import default_config
from shared.models import DEFAULT_SCHEDULER_NAME


def _summary(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "max_ms": 0.0}
    ms = np.array(samples) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def run_preemption_bench(
    nodes: int = 5000, running: int = 20000, incoming: int = 200, seed: int = 0
) -> dict[str, Any]:
    """Schedule `incoming` high-priority pods that must each preempt; latency per decision."""
    workload = preemption(nodes, incoming, running)
    cluster = LocalCluster(workload.nodes, workload.running)
    framework = build_frameworks(default_config(), in_tree_registry(), cluster, seed=seed)[
        DEFAULT_SCHEDULER_NAME
    ]
    plugin = framework.plugins.get(names.DEFAULT_PREEMPTION)
    if not isinstance(plugin, DefaultPreemption):
        raise TypeError("the default profile has no DefaultPreemption plugin")
    columns = cluster.nodes

    started = time.perf_counter()
    plugin.evaluator.index.sync(columns)
    index_build = time.perf_counter() - started

    decisions: list[float] = []
    decisions_cpu: list[float] = []
    cycles: list[float] = []
    preempted = victims = unschedulable = scheduled = 0
    for pod in workload.pending:
        state = CycleState()
        begin = time.perf_counter()
        try:
            result = schedule_pod(framework, state, pod, columns)
        except FitError as err:
            diagnosis = err.diagnosis
        else:
            cluster.assume(pod, result.suggested_host)
            scheduled += 1
            continue
        filtered = time.perf_counter()
        cpu = time.thread_time()
        answer, status = framework.run_post_filter_plugins(state, pod, columns, diagnosis)
        decisions_cpu.append(time.thread_time() - cpu)
        done = time.perf_counter()
        decisions.append(done - filtered)
        cycles.append(done - begin)
        if not status.is_success() or answer is None or not answer.nominated_node:
            unschedulable += 1
            continue
        preempted += 1
        victims += len(answer.victims)
        for victim in answer.victims:
            cluster.delete_pod(victim)
        cluster.assume(pod, answer.nominated_node)

    return {
        "workload": "preemption",
        "nodes": nodes,
        "running_pods": len(workload.running),
        "incoming_pods": len(workload.pending),
        "preemptions": preempted,
        "victims": victims,
        "scheduled_without_preemption": scheduled,
        "unschedulable": unschedulable,
        "pod_index_build_ms": round(index_build * 1000.0, 3),
        "decision": _summary(decisions),
        "decision_cpu": _summary(decisions_cpu),
        "cycle": _summary(cycles),
    }
