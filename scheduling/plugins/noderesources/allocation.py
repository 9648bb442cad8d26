"""Resource-allocation scoring over node columns (upstream resource_allocation.go + strategies).

`allocation()` gathers, for the rows being scored, one column pair per configured resource: the
nodes' allocatable and the nodes' requested amount plus the pod's request. The strategies then
score every row at once, looping only over the (few) resources. Per resource, as upstream
`calculateResourceAllocatableRequest`:

- cpu and memory use the node's non-zero requests (100m / 200Mi for containers asking none)
  unless the scorer uses plain requests (BalancedAllocation);
- ephemeral-storage and scalar resources use the plain requests;
- a scalar resource the pod does not request is not scored, and neither is a name that is not
  tracked at all (e.g. "pods");
- a node whose allocatable is 0 for a resource leaves that resource out of its score.

Integer math is Go's. Every quotient here is in [0, 100] with a non-negative numerator, where
Go's truncation is numpy's floor. `_div` divides in float64 when that is provably exact and
divides int64 otherwise (several times slower): with denominators below 2**46 the numerator
(<= 100 x denominator) is below 2**53, so both convert exactly, and the correctly rounded
quotient errs by at most 100 x 2**-53, less than the 1/denominator gap between a non-integer
quotient and the next integer; an integer quotient comes out exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.interfaces import MAX_NODE_SCORE
from scheduling.plugins.noderesources.resource_names import (
    CPU,
    MEMORY,
    is_scalar_resource_name,
    is_tracked_resource,
)

Int64s = NDArray[np.int64]
MAX_UTILIZATION = 100
_NON_ZERO_COLUMN = {CPU: 0, MEMORY: 1}
"""Column of `NodeColumns.non_zero_requested` holding each resource."""
_FLOAT_EXACT_LIMIT = 1 << 46


@dataclass(frozen=True, slots=True)
class ResourceColumn:
    """One scored resource over the rows: allocatable, requested incl. the pod, weight."""

    allocatable: Int64s
    requested: Int64s
    weight: int

    def everywhere(self) -> bool:
        """Every row offers this resource (allocatable > 0), so no per-row masking is needed."""
        return bool(self.allocatable.size == 0 or self.allocatable.min() > 0)


def allocation(
    nodes: NodeColumns,
    rows: Rows,
    names: Sequence[str],
    weights: Sequence[int],
    pod_requests: Sequence[int],
    *,
    use_requested: bool,
) -> list[ResourceColumn]:
    """The columns of the resources that can be scored (others are left out entirely)."""
    columns: list[ResourceColumn] = []
    for name, weight, request in zip(names, weights, pod_requests, strict=True):
        if not is_tracked_resource(name) or (request == 0 and is_scalar_resource_name(name)):
            continue
        col = nodes.resource_index.get(name)
        if col is None:
            continue
        if not use_requested and name in _NON_ZERO_COLUMN:
            used = nodes.non_zero_requested[rows, _NON_ZERO_COLUMN[name]]
        else:
            used = nodes.requested[rows, col]
        columns.append(ResourceColumn(nodes.allocatable[rows, col], used + request, weight))
    return columns


def _div(numerator: Int64s, denominator: Int64s, max_denominator: int) -> Int64s:
    """numerator // denominator for quotients in [0, 100] and denominators >= 1."""
    if max_denominator < _FLOAT_EXACT_LIMIT:
        return (numerator / denominator).astype(np.int64)
    return numerator // denominator


def _weighted_mean(total: Int64s, weight_sum: Int64s | int, size: int) -> Int64s:
    """total // weight_sum per row (0 where the weight sum is 0); total <= 100 * weight_sum."""
    if isinstance(weight_sum, int):
        if weight_sum == 0:
            return np.zeros(size, dtype=np.int64)
        return (total / weight_sum).astype(np.int64)
    return np.where(weight_sum > 0, (total / np.maximum(weight_sum, 1)).astype(np.int64), 0)


ScoreFn = Callable[[ResourceColumn, Int64s, int], Int64s]
"""(column, allocatable with 0 raised to 1, max allocatable) -> per-row score of a resource."""


def _weighted(columns: Sequence[ResourceColumn], size: int, score: ScoreFn) -> Int64s:
    """Σ score·w / Σ w over the resources each row offers (integer division, 0 if none)."""
    total = np.zeros(size, dtype=np.int64)
    weight_sum: Int64s | int = 0
    for column in columns:
        capacity = column.allocatable
        max_capacity = int(capacity.max()) if size else 0
        if column.everywhere():
            resource_score = score(column, capacity, max_capacity)
            weight_sum = weight_sum + column.weight
        else:
            present = capacity > 0
            resource_score = score(column, np.maximum(capacity, 1), max_capacity)
            resource_score = np.where(present, resource_score, 0)
            weight_sum = weight_sum + present * column.weight
        if column.weight != 1:
            resource_score *= column.weight
        total += resource_score
    return _weighted_mean(total, weight_sum, size)


def _least(column: ResourceColumn, capacity: Int64s, max_capacity: int) -> Int64s:
    free = column.allocatable - column.requested
    np.maximum(free, 0, out=free)
    free *= MAX_NODE_SCORE
    return _div(free, capacity, max_capacity)


def _most(column: ResourceColumn, capacity: Int64s, max_capacity: int) -> Int64s:
    used = np.minimum(column.requested, column.allocatable)
    used *= MAX_NODE_SCORE
    return _div(used, capacity, max_capacity)


def least_allocated(columns: Sequence[ResourceColumn], size: int) -> Int64s:
    """(capacity - requested) * 100 / capacity per resource (0 when over capacity), then the
    weighted mean Σ score·w / Σ w with integer division."""
    return _weighted(columns, size, _least)


def most_allocated(columns: Sequence[ResourceColumn], size: int) -> Int64s:
    """requested * 100 / capacity per resource, requested capped at capacity; weighted mean."""
    return _weighted(columns, size, _most)


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
    columns: Sequence[ResourceColumn], size: int, table: Int64s
) -> Int64s:
    """shape(requested * 100 / capacity) per resource (100 when over capacity); a resource
    scoring 0 adds no weight. The weighted mean is rounded half up, as upstream's math.Round
    on a positive value: (2·Σ + w) // 2w."""
    total = np.zeros(size, dtype=np.int64)
    weight_sum = np.zeros(size, dtype=np.int64)
    for column in columns:
        capacity = column.allocatable
        max_capacity = int(capacity.max()) if size else 0
        everywhere = column.everywhere()
        used = np.minimum(column.requested, capacity)
        used *= MAX_UTILIZATION
        divisor = capacity if everywhere else np.maximum(capacity, 1)
        scores = table[_div(used, divisor, max_capacity)]
        counted = scores > 0
        if not everywhere:
            counted &= capacity > 0
            scores = np.where(counted, scores, 0)
        if column.weight != 1:
            scores *= column.weight
        total += scores
        weight_sum += counted * column.weight
    total *= 2
    total += weight_sum
    weight_sum *= 2
    rounded = _div(total, np.maximum(weight_sum, 1), 0)
    return np.where(weight_sum > 0, rounded, 0)


def balanced_allocation(columns: Sequence[ResourceColumn], size: int) -> Int64s:
    """(1 - std) * 100 over the requested/allocatable fractions (each capped at 1), truncated.

    As upstream balancedResourceScorer: resources with allocatable 0 are left out; with two
    fractions std is |a - b| / 2, with more the population standard deviation, with fewer 0.
    Sums run in resource order so the float results match Go bit for bit.
    """
    if not columns:
        return np.full(size, MAX_NODE_SCORE, dtype=np.int64)
    everywhere = all(c.everywhere() for c in columns)
    fractions = []
    for c in columns:
        fraction = c.requested / (c.allocatable if everywhere else np.maximum(c.allocatable, 1))
        np.minimum(fraction, 1.0, out=fraction)
        fractions.append(fraction)
    if everywhere and len(columns) <= 2:
        if len(columns) == 1:
            return np.full(size, MAX_NODE_SCORE, dtype=np.int64)
        # Go: std = |(a - b) / 2|; score = int64((1 - std) * 100). In place, same operations.
        std = np.subtract(fractions[0], fractions[1], out=fractions[0])
        std *= 0.5
        np.abs(std, out=std)
        np.subtract(1.0, std, out=std)
        std *= MAX_NODE_SCORE
        return std.astype(np.int64)
    present = [c.allocatable > 0 for c in columns]
    fractions = [np.where(p, f, 0.0) for p, f in zip(present, fractions, strict=True)]
    count = np.sum(present, axis=0)
    total = np.zeros(size)
    for f in fractions:
        total = total + f
    mean = total / np.maximum(count, 1)
    squares = np.zeros(size)
    for p, f in zip(present, fractions, strict=True):
        squares = squares + np.where(p, (f - mean) ** 2, 0.0)
    highest = np.max(
        [np.where(p, f, -np.inf) for p, f in zip(present, fractions, strict=True)], axis=0
    )
    lowest = np.min(
        [np.where(p, f, np.inf) for p, f in zip(present, fractions, strict=True)], axis=0
    )
    std = np.where(
        count == 2,
        np.abs((highest - lowest) / 2),
        np.where(count > 2, np.sqrt(squares / np.maximum(count, 1)), 0.0),
    )
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)
