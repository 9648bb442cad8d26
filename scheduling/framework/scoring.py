"""Score, NormalizeScore and the weights: each active Score plugin's scores over the feasible
rows, normalized, range-checked ([0, 100]) and summed per row as int64, with upstream's
error messages (pkg/scheduler/framework/runtime RunScorePlugins)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NormalizeScorePlugin,
    ScorePlugin,
)
from scheduling.framework.outcomes import ScoreOutcome, raised, score_error
from scheduling.framework.status import Status
from shared.models import Pod

ScoreEntry = tuple[str, ScorePlugin, int, NormalizeScorePlugin | None]
"""(name, plugin, weight, the plugin again when it normalizes its scores)."""


def run_score(
    active: Sequence[ScoreEntry],
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    rows: Rows,
    *,
    explain: bool = False,
) -> ScoreOutcome:
    """The `active` plugins' weighted scores summed per row (by plugin too with `explain`);
    the first failing plugin's Error, naming it, with zero totals."""
    size = nodes.size_of(rows)
    raw: list[NDArray[np.int64]] = []
    for name, plugin, _, _ in active:
        try:
            scores = plugin.score(state, pod, nodes, rows)
        except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
            scores = raised(err)
        if isinstance(scores, Status):
            message = f'running Score plugins: plugin "{name}" failed with: {scores.message()}'
            return score_error(size, message, name)
        raw.append(scores)
    for i, (name, _, _, normalizer) in enumerate(active):
        if normalizer is None:
            continue
        try:
            normalized = normalizer.normalize_score(state, pod, raw[i])
        except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
            normalized = raised(err)
        if isinstance(normalized, Status):
            message = (
                f'running Normalize on Score plugins: plugin "{name}" failed with: '
                f"{normalized.message()}"
            )
            return score_error(size, message, name)
        raw[i] = normalized
    totals: NDArray[np.int64] | None = None
    by_plugin: dict[str, NDArray[np.int64]] | None = {} if explain else None
    for (name, _, weight, _), scores in zip(active, raw, strict=True):
        if scores.shape[0] != size:
            message = (
                f'running Score plugins: plugin "{name}" returned {scores.shape[0]} scores '
                f"for {size} nodes"
            )
            return score_error(size, message, name)
        if scores.dtype != np.int64:
            scores = scores.astype(np.int64)
        # One pass for both bounds: as uint64, a negative score is huge (MIN_NODE_SCORE 0).
        if size and scores.view(np.uint64).max() > MAX_NODE_SCORE:
            bad = scores[(scores < MIN_NODE_SCORE) | (scores > MAX_NODE_SCORE)][0]
            message = (
                f'applying score defaultWeights on Score plugins: plugin "{name}" returns an '
                f"invalid score {bad}, it should in the range of [{MIN_NODE_SCORE}, "
                f"{MAX_NODE_SCORE}] after normalizing"
            )
            return score_error(size, message, name)
        weighted = scores * weight if weight != 1 else scores
        if totals is None:
            totals = weighted.copy()
        else:
            totals += weighted
        if by_plugin is not None:
            by_plugin[name] = weighted
    if totals is None:
        totals = np.zeros(size, dtype=np.int64)
    return ScoreOutcome(totals, by_plugin)
