"""The vectorized strategies against a per-node transcription of upstream's Go, on random nodes.

Random allocatable values include 0 (resource missing on the node), tiny values (rounding
everywhere) and values above 2**46 (where the float division shortcut must not be used).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from scheduling.plugins.noderesources.allocation import (
    ResourceColumn,
    balanced_allocation,
    broken_linear_table,
    least_allocated,
    most_allocated,
    requested_to_capacity_ratio,
)

Node = list[tuple[int, int]]
"""(allocatable, requested incl. the pod) per resource, for one node."""


def go_least(node: Node, weights: Sequence[int]) -> int:
    score = weight_sum = 0
    for (capacity, requested), weight in zip(node, weights, strict=True):
        if capacity == 0:
            continue
        resource = 0 if requested > capacity else (capacity - requested) * 100 // capacity
        score += resource * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def go_most(node: Node, weights: Sequence[int]) -> int:
    score = weight_sum = 0
    for (capacity, requested), weight in zip(node, weights, strict=True):
        if capacity == 0:
            continue
        score += min(requested, capacity) * 100 // capacity * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def go_rtcr(node: Node, weights: Sequence[int], shape: Sequence[tuple[int, int]]) -> int:
    def raw(p: int) -> int:
        for i, (u, s) in enumerate(shape):
            if p <= u:
                if i == 0:
                    return s
                pu, ps = shape[i - 1]
                return ps + int((s - ps) * (p - pu) / (u - pu))  # Go truncates toward zero
        return shape[-1][1]

    score = weight_sum = 0
    for (capacity, requested), weight in zip(node, weights, strict=True):
        if capacity == 0:
            continue
        resource = raw(100) if requested > capacity else raw(requested * 100 // capacity)
        if resource > 0:
            score += resource * weight
            weight_sum += weight
    return math.floor(score / weight_sum + 0.5) if weight_sum else 0


def go_balanced(node: Node) -> int:
    fractions = [min(r / c, 1.0) for c, r in node if c != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / len(fractions)
        squares = 0.0
        for f in fractions:
            squares += (f - mean) * (f - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * 100)


def random_nodes(rng: random.Random, count: int, width: int) -> list[Node]:
    def capacity() -> int:
        return rng.choice(
            [
                0,
                rng.randint(1, 7),
                rng.randint(1, 10**4),
                rng.randint(10**9, 10**13),
                rng.randint(2**46, 2**50),
            ]
        )

    nodes = []
    for _ in range(count):
        node = []
        for _ in range(width):
            c = capacity()
            node.append((c, rng.randint(0, max(2 * c, 3))))
        nodes.append(node)
    return nodes


def as_columns(nodes: list[Node], weights: Sequence[int]) -> list[ResourceColumn]:
    return [
        ResourceColumn(
            np.array([n[j][0] for n in nodes], dtype=np.int64),
            np.array([n[j][1] for n in nodes], dtype=np.int64),
            weights[j],
        )
        for j in range(len(weights))
    ]


Vectorized = Callable[[list[ResourceColumn], int], np.ndarray]
SHAPE = [(0, 20), (30, 100), (70, 5), (100, 90)]


@pytest.mark.parametrize("width", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    ("vectorized", "reference"),
    [
        pytest.param(least_allocated, go_least, id="least"),
        pytest.param(most_allocated, go_most, id="most"),
        pytest.param(
            lambda c, n: requested_to_capacity_ratio(c, n, broken_linear_table(SHAPE)),
            lambda node, w: go_rtcr(node, w, SHAPE),
            id="requested-to-capacity-ratio",
        ),
        pytest.param(
            balanced_allocation, lambda node, w: go_balanced(node), id="balanced-allocation"
        ),
    ],
)
def test_matches_go_per_node(
    vectorized: Vectorized, reference: Callable[[Node, Sequence[int]], int], seed: int, width: int
) -> None:
    rng = random.Random(seed * 100 + width)
    nodes = random_nodes(rng, 400, width)
    weights = [rng.randint(1, 5) for _ in range(width)]
    got = vectorized(as_columns(nodes, weights), len(nodes)).tolist()
    assert got == [reference(node, weights) for node in nodes]


def test_uniform_nodes_use_the_same_results() -> None:
    """Rows that all offer every resource take the unmasked fast paths."""
    rng = random.Random(7)
    nodes = [
        [(rng.randint(1, 10**6), rng.randint(0, 2 * 10**6)) for _ in range(2)] for _ in range(300)
    ]
    columns = as_columns(nodes, [1, 1])
    assert least_allocated(columns, 300).tolist() == [go_least(n, [1, 1]) for n in nodes]
    assert balanced_allocation(columns, 300).tolist() == [go_balanced(n) for n in nodes]
