"""PodTopologySpread PreScore, Score and NormalizeScore (upstream podtopologyspread/scoring.go).

PreScore, per soft constraint:
- ignored: feasible nodes missing a topology key (only when all keys are required, i.e. the pod
  has its own constraints or the defaults are not the system ones);
- topology size: distinct values among the scored nodes (for hostname: their number), giving
  the normalizing weight log(size + 2);
- counts per domain over all nodes that carry the keys and pass the inclusion policies
  (hostname constraints count the node's own pods at Score time).
Score: sum over constraints whose key the node has of cnt * weight + (maxSkew - 1), rounded
half away from zero. NormalizeScore: ignored nodes 0; all 100 when the highest
score is 0; otherwise 100 * (max + min - s) / max, integer division.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.interfaces import MAX_NODE_SCORE
from scheduling.plugins.podtopologyspread.common import (
    HOSTNAME_LABEL,
    Constraint,
    Inclusion,
    RowCounts,
    has_all_keys,
)
from shared.models import Pod


def topology_normalizing_weight(size: int) -> float:
    """Upstream topologyNormalizingWeight: log(size + 2)."""
    return math.log(size + 2)


def score_for_count(count: int, max_skew: int, weight: float) -> float:
    """Upstream scoreForCount: count * weight + (maxSkew - 1)."""
    return float(count) * weight + float(max_skew - 1)


@dataclass(slots=True)
class PreScoreState:
    constraints: tuple[Constraint, ...]
    ignored: NDArray[np.bool_]
    """Per row: a node that is not scored (it misses a required topology key)."""
    pods_on_node: tuple[NDArray[np.int64], ...]
    """Per constraint: matching pods per row (used for hostname constraints)."""
    domain_counts: tuple[NDArray[np.int64], ...]
    """Per constraint: matching pods per effective value code (non-hostname constraints)."""
    effective_codes: tuple[NDArray[np.int32], ...]
    """Per constraint: each row's domain; nodes without the key share the "" domain."""
    weights: tuple[float, ...]
    scored_ignored: NDArray[np.bool_] | None = field(default=None)
    """`ignored` for the rows of the last Score call, for NormalizeScore."""


def _effective_codes(nodes: NodeColumns, key: str) -> NDArray[np.int32]:
    """Label codes where a node without the key reads as the value "" (Go's map default)."""
    column = nodes.label(key)
    missing = column.codes < 0
    if not missing.any():
        return column.codes
    empty = column.value_codes.get("", len(column.values))
    return np.where(missing, np.int32(empty), column.codes).astype(np.int32)


def compute(
    pod: Pod,
    nodes: NodeColumns,
    rows: Rows,
    constraints: list[Constraint],
    require_all_topologies: bool,
) -> PreScoreState:
    feasible = nodes.row_indices(rows)
    has_all = has_all_keys(nodes, constraints)
    ignored = ~has_all if require_all_topologies else np.zeros(len(nodes), dtype=np.bool_)
    scored = feasible[~ignored[feasible]]
    counted_nodes = has_all if require_all_topologies else None
    inclusion = Inclusion(pod, nodes)
    counts = RowCounts(pod, nodes)
    pods_on_node: list[NDArray[np.int64]] = []
    domain_counts: list[NDArray[np.int64]] = []
    effective: list[NDArray[np.int32]] = []
    weights: list[float] = []
    for constraint in constraints:
        per_row = counts.of(constraint)
        pods_on_node.append(per_row)
        if constraint.topology_key == HOSTNAME_LABEL:
            domain_counts.append(np.zeros(0, dtype=np.int64))
            effective.append(np.zeros(0, dtype=np.int32))
            weights.append(topology_normalizing_weight(int(scored.shape[0])))
            continue
        codes = _effective_codes(nodes, constraint.topology_key)
        size = len(nodes.label(constraint.topology_key).values) + 1
        counted = counted_nodes
        included = inclusion.mask(constraint)
        if included is not None:
            counted = included if counted is None else counted & included
        if counted is None:
            sums = np.bincount(codes, weights=per_row, minlength=size)
        else:
            sums = np.bincount(codes[counted], weights=per_row[counted], minlength=size)
        domain_counts.append(np.rint(sums).astype(np.int64))
        effective.append(codes)
        topology_size = int(np.unique(codes[scored]).shape[0])
        weights.append(topology_normalizing_weight(topology_size))
    return PreScoreState(
        tuple(constraints),
        ignored,
        tuple(pods_on_node),
        tuple(domain_counts),
        tuple(effective),
        tuple(weights),
    )


def _round_half_away(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Go math.Round for non-negative values (exact, unlike floor(x + 0.5))."""
    floor = np.floor(values)
    return np.where(values - floor >= 0.5, floor + 1, floor).astype(np.int64)


def score_rows(state: PreScoreState, nodes: NodeColumns, rows: Rows) -> NDArray[np.int64]:
    size = nodes.size_of(rows)
    total = np.zeros(size, dtype=np.float64)
    for i, constraint in enumerate(state.constraints):
        has_key = nodes.label(constraint.topology_key).codes[rows] >= 0
        if constraint.topology_key == HOSTNAME_LABEL:
            count = state.pods_on_node[i][rows]
        else:
            count = state.domain_counts[i][state.effective_codes[i][rows]]
        term = count.astype(np.float64) * state.weights[i] + float(constraint.max_skew - 1)
        total += np.where(has_key, term, 0.0)
    ignored = state.ignored[rows]
    state.scored_ignored = ignored
    scores = _round_half_away(total)
    scores[ignored] = 0
    return scores


def normalize(scores: NDArray[np.int64], ignored: NDArray[np.bool_] | None) -> NDArray[np.int64]:
    """Upstream NormalizeScore."""
    if ignored is None or ignored.shape != scores.shape:
        ignored = np.zeros(scores.shape, dtype=np.bool_)
    kept = scores[~ignored]
    if kept.shape[0] == 0:
        return np.zeros_like(scores)
    low = int(kept.min())
    high = max(int(kept.max()), 0)
    if high == 0:
        out = np.full_like(scores, MAX_NODE_SCORE)
    else:
        out = MAX_NODE_SCORE * (high + low - scores) // high
    out[ignored] = 0
    return out
