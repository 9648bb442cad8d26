"""Resource-allocation scoring over node columns (upstream resource_allocation.go + strategies).

`allocation()` gathers, for the rows being scored, each configured resource's allocatable and
the node's requested amount plus the pod's request, as two (rows x resources) int64 matrices.
The strategies then score every row at once. Per resource, as upstream
`calculateResourceAllocatableRequest`:

- cpu and memory use the node's non-zero requests (100m / 200Mi for containers asking none)
  unless the scorer uses plain requests (BalancedAllocation);
- ephemeral-storage and scalar resources use the plain requests;
- a scalar resource the pod does not request is not scored, and neither is a name that is not
  tracked at all (e.g. "pods");
- a node whose allocatable is 0 for a resource leaves that resource out of its score.

Integer math is Go's: every division here has a non-negative numerator, so numpy's floor
division equals Go's truncation (the RequestedToCapacityRatio shape table truncates
explicitly, see `broken_linear_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from services.scheduler.framework.columns import NodeColumns, Rows
from services.scheduler.framework.interfaces import MAX_NODE_SCORE
from services.scheduler.plugins.noderesources.resource_names import (
    CPU,
    MEMORY,
    is_scalar_resource_name,
    is_tracked_resource,
)

Int64s = NDArray[np.int64]
MAX_UTILIZATION = 100
_NON_ZERO_COLUMN = {CPU: 0, MEMORY: 1}
"""Column of `NodeColumns.non_zero_requested` holding each resource."""


def take_columns(matrix: Int64s, rows: Rows, cols: Sequence[int]) -> Int64s:
    """matrix[rows][:, cols] with at most one copy (a view when both are contiguous)."""
    first = cols[0]
    if list(cols) == list(range(first, first + len(cols))):
        return matrix[rows, first : first + len(cols)]
    if isinstance(rows, slice):
        return matrix[rows][:, list(cols)]
    return matrix[np.ix_(rows, np.asarray(cols, dtype=np.intp))]


def allocation(
    nodes: NodeColumns,
    rows: Rows,
    names: Sequence[str],
    weights: Sequence[int],
    pod_requests: Sequence[int],
    *,
    use_requested: bool,
) -> tuple[Int64s, Int64s, Int64s]:
    """(allocatable, requested incl. the pod, weights) for the resources that can be scored.

    Matrices are (rows x kept resources); resources no node can offer are dropped here.
    """
    cols: list[int] = []
    kept_weights: list[int] = []
    pod: list[int] = []
    non_zero: list[tuple[int, int]] = []
    for name, weight, request in zip(names, weights, pod_requests, strict=True):
        if not is_tracked_resource(name) or (request == 0 and is_scalar_resource_name(name)):
            continue
        col = nodes.resource_index.get(name)
        if col is None:
            continue
        if not use_requested and name in _NON_ZERO_COLUMN:
            non_zero.append((len(cols), _NON_ZERO_COLUMN[name]))
        cols.append(col)
        kept_weights.append(weight)
        pod.append(request)
    size = nodes.size_of(rows)
    if not cols:
        empty = np.zeros((size, 0), dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.int64)
    allocatable = take_columns(nodes.allocatable, rows, cols)
    if len(non_zero) == len(cols) == 2 and non_zero == [(0, 0), (1, 1)]:
        # The default cpu+memory scoring: one slice of the non-zero matrix.
        used = nodes.non_zero_requested[rows]
    else:
        used = take_columns(nodes.requested, rows, cols)
        if non_zero:
            used = used.copy()
            for position, nz_col in non_zero:
                used[:, position] = nodes.non_zero_requested[rows, nz_col]
    requested = used + np.asarray(pod, dtype=np.int64)
    return allocatable, requested, np.asarray(kept_weights, dtype=np.int64)


def _weighted_mean(scores: Int64s, weights: Int64s) -> Int64s:
    """Σ score·w / Σ w per row (integer division), 0 where the weight sum is 0."""
    weight_sum = weights.sum(axis=1)
    total = (scores * weights).sum(axis=1)
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)


def least_allocated(allocatable: Int64s, requested: Int64s, weights: Int64s) -> Int64s:
    """(capacity - requested) * 100 / capacity per resource, 0 when over capacity."""
    if allocatable.shape[1] == 0:
        return np.zeros(allocatable.shape[0], dtype=np.int64)
    present = allocatable != 0
    capacity = np.where(present, allocatable, 1)
    free = np.maximum(capacity - requested, 0)
    scores = free * MAX_NODE_SCORE // capacity
    return _weighted_mean(scores, present * weights)


def most_allocated(allocatable: Int64s, requested: Int64s, weights: Int64s) -> Int64s:
    """requested * 100 / capacity per resource, requested capped at capacity."""
    if allocatable.shape[1] == 0:
        return np.zeros(allocatable.shape[0], dtype=np.int64)
    present = allocatable != 0
    capacity = np.where(present, allocatable, 1)
    scores = np.minimum(requested, capacity) * MAX_NODE_SCORE // capacity
    return _weighted_mean(scores, present * weights)


def broken_linear_table(shape: Sequence[tuple[int, int]]) -> Int64s:
    """Upstream helper.BuildBrokenLinearFunction evaluated at utilization 0..100.

    `shape` is (utilization, score) points, utilization ascending, scores already on the
    0..100 scale. Between points the value is interpolated with Go's integer division, which
    truncates toward zero (matters for falling segments).
    """
    table = np.zeros(MAX_UTILIZATION + 1, dtype=np.int64)
    for p in range(MAX_UTILIZATION + 1):
        table[p] = _broken_linear(shape, p)
    return table


def _broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    for i, (utilization, score) in enumerate(shape):
        if p <= utilization:
            if i == 0:
                return score
            prev_utilization, prev_score = shape[i - 1]
            numerator = (score - prev_score) * (p - prev_utilization)
            step = abs(numerator) // (utilization - prev_utilization)
            return prev_score + (step if numerator >= 0 else -step)
    return shape[-1][1]


def requested_to_capacity_ratio(
    allocatable: Int64s, requested: Int64s, weights: Int64s, table: Int64s
) -> Int64s:
    """shape(requested * 100 / capacity) per resource; a resource scoring 0 adds no weight.

    The weighted mean is rounded half up, as upstream's math.Round on a positive value.
    """
    if allocatable.shape[1] == 0:
        return np.zeros(allocatable.shape[0], dtype=np.int64)
    present = allocatable != 0
    capacity = np.where(present, allocatable, 1)
    fits = present & (requested <= allocatable)
    utilization = np.where(fits, requested * MAX_UTILIZATION // capacity, MAX_UTILIZATION)
    scores = table[utilization]
    counted = (present & (scores > 0)) * weights
    weight_sum = counted.sum(axis=1)
    total = (scores * counted).sum(axis=1)
    rounded = (2 * total + weight_sum) // np.maximum(2 * weight_sum, 1)
    return np.where(weight_sum > 0, rounded, 0)


def balanced_allocation(allocatable: Int64s, requested: Int64s) -> Int64s:
    """(1 - std) * 100 over the requested/allocatable fractions (each capped at 1).

    As upstream balancedResourceScorer: resources with allocatable 0 are left out; with two
    fractions std is |a - b| / 2, with more the population standard deviation, with fewer 0.
    Sums run in resource order so the float results match Go bit for bit.
    """
    size, width = allocatable.shape
    if width == 0:
        return np.full(size, MAX_NODE_SCORE, dtype=np.int64)
    present = allocatable != 0
    capacity = np.where(present, allocatable, 1).astype(np.float64)
    fractions = np.minimum(requested.astype(np.float64) / capacity, 1.0)
    fractions = np.where(present, fractions, 0.0)
    count = present.sum(axis=1)
    if width == 2:
        std = np.where(count == 2, np.abs((fractions[:, 0] - fractions[:, 1]) / 2), 0.0)
    else:
        highest = np.where(present, fractions, -np.inf).max(axis=1)
        lowest = np.where(present, fractions, np.inf).min(axis=1)
        total = np.zeros(size)
        for j in range(width):
            total = total + fractions[:, j]
        mean = total / np.maximum(count, 1)
        squares = np.zeros(size)
        for j in range(width):
            squares = squares + np.where(present[:, j], (fractions[:, j] - mean) ** 2, 0.0)
        std = np.where(
            count == 2,
            np.abs((highest - lowest) / 2),
            np.where(count > 2, np.sqrt(squares / np.maximum(count, 1)), 0.0),
        )
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
