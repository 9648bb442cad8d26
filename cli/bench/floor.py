"""The floor every benchmark figure is compared with: the naive data-parallel cycle.

Machines of the kind berth is measured on differ about threefold in speed, so a figure alone
says little; its ratio to this floor, measured in the same process just before, says how much
work berth saves (or wastes) against doing the obvious thing with numpy:

    for each pod: a fit mask over all nodes (cpu, memory, pods), LeastAllocated and
    BalancedAllocation over all nodes, the best feasible node with a random tie-break, bind.

5,000 nodes of 4 CPU / 32 Gi / 110 pods, identical pods of 100m / 500 Mi (scheduler_perf's
node-default and pod-default). No framework, no plugins, no cache: one pod's decision and its
accounting, nothing else.
"""

from __future__ import annotations

import time

import numpy as np

GI = 1024**3
MI = 1024**2
FLOOR_NODES = 5000
FLOOR_PODS = 3000
WARM_UP = 300


def floor_pods_per_s(nodes: int = FLOOR_NODES, pods: int = FLOOR_PODS, seed: int = 0) -> float:
    """Pods per second of the naive cycle (see the module docstring)."""
    allocatable = np.tile(np.array([4000, 32 * GI, 110], dtype=np.int64), (nodes, 1))
    requested = np.zeros_like(allocatable)
    pod = np.array([100, 500 * MI, 1], dtype=np.int64)
    rng = np.random.default_rng(seed)
    started = 0.0
    for i in range(WARM_UP + pods):
        if i == WARM_UP:
            started = time.perf_counter()
        after = requested + pod
        fits = (after <= allocatable).all(axis=1)
        cpu_mem_after = after[:, :2]
        capacity = allocatable[:, :2]
        least = ((capacity - cpu_mem_after) * 100 // capacity).sum(axis=1) // 2
        fraction = np.minimum(cpu_mem_after / capacity, 1.0)
        balanced = ((1.0 - np.abs(fraction[:, 0] - fraction[:, 1]) / 2) * 100).astype(np.int64)
        totals = np.where(fits, least + balanced, -1)
        ties = np.flatnonzero(totals == totals.max())
        chosen = ties[rng.integers(ties.shape[0])]
        requested[chosen] += pod
    return pods / (time.perf_counter() - started)


def with_floor(report: dict[str, object], value_key: str, floor: float) -> None:
    """Add `floor_pods_per_s` and the ratio of `report[value_key]` to it."""
    report["floor_pods_per_s"] = round(floor, 1)
    value = report.get(value_key)
    if isinstance(value, int | float) and floor > 0:
        report["ratio_to_floor"] = round(value / floor, 2)
