"""Per-cycle cost of InterPodAffinity and PodTopologySpread alone, on scheduler_perf workloads.

    .venv/bin/python -m cli.bench.podindex [--nodes 5000] [--running 10000]

For each workload, every pending pod goes through both plugins' PreFilter, Filter (all rows),
PreScore, Score and NormalizeScore over the feasible rows, then is bound to the best row (the
bind keeps the PodIndex current). Prints the mean milliseconds per pod for each step.
"""

from __future__ import annotations

import time
from collections import Counter

import click
import numpy as np
from numpy.typing import NDArray

from cli.bench.workloads import WORKLOADS, Workload
from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterResult
from scheduling.plugins.interpodaffinity import InterPodAffinity
from scheduling.plugins.podindex.index import PodIndex
from scheduling.plugins.podtopologyspread import PodTopologySpread

DEFAULT_WORKLOADS = ("pod-affinity", "pod-anti-affinity", "topology-spreading", "scheduling-basic")


def run(workload: Workload) -> tuple[float, Counter[str]]:
    nodes = NodeColumns(workload.nodes, workload.running)
    started = time.perf_counter()
    PodIndex.of(nodes)
    build = time.perf_counter() - started
    plugins = (InterPodAffinity(), PodTopologySpread())
    spent: Counter[str] = Counter()
    for pod in workload.pending:
        state = CycleState()
        t0 = time.perf_counter()
        active = [p for p in plugins if p.pre_filter(state, pod, nodes)[1].is_success()]
        t1 = time.perf_counter()
        ok: NDArray[np.bool_] = np.ones(len(nodes), dtype=np.bool_)
        for plugin in active:
            result = plugin.filter(state, pod, nodes, ALL_ROWS)
            if isinstance(result, FilterResult):
                ok &= result.ok
        rows = np.flatnonzero(ok)
        t2 = time.perf_counter()
        scorers = [p for p in plugins if p.pre_score(state, pod, nodes, rows).is_success()]
        t3 = time.perf_counter()
        total = np.zeros(rows.shape[0], dtype=np.int64)
        for plugin in scorers:
            raw = plugin.score(state, pod, nodes, rows)
            assert isinstance(raw, np.ndarray)
            normalized = plugin.normalize_score(state, pod, raw)
            assert isinstance(normalized, np.ndarray)
            total += normalized
        t4 = time.perf_counter()
        if rows.shape[0]:
            pod.spec.node_name = nodes.names[int(rows[int(np.argmax(total))])]
            nodes.add_pod(pod)
        t5 = time.perf_counter()
        spent.update(
            {
                "pre_filter": t1 - t0,
                "filter": t2 - t1,
                "pre_score": t3 - t2,
                "score+normalize": t4 - t3,
                "bind (index upkeep)": t5 - t4,
            }
        )
    return build, spent


@click.command(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--nodes", type=int, default=5000, show_default=True)
@click.option("--pods", type=int, default=1000, show_default=True)
@click.option("--running", type=int, default=10000, show_default=True)
@click.argument("workloads", nargs=-1, type=click.Choice(sorted(WORKLOADS)))
def main(nodes: int, pods: int, running: int, workloads: tuple[str, ...]) -> None:
    for name in workloads or DEFAULT_WORKLOADS:
        workload = WORKLOADS[name](nodes, pods, running)
        build, spent = run(workload)
        pending = max(1, len(workload.pending))
        per_pod = sum(spent.values()) / pending
        steps = ", ".join(f"{k} {v / pending * 1e3:.3f}" for k, v in spent.items())
        print(
            f"{name:20s} nodes={len(workload.nodes)} running={len(workload.running)} "
            f"index build {build * 1e3:.0f} ms; per pod {per_pod * 1e3:.3f} ms ({steps})"
        )


if __name__ == "__main__":
    main()
