"""Test helpers for data-parallel plugins: per-node views of one Filter or Score call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterResult
from scheduling.framework.status import Status
from shared.models import Pod


class _Filter(Protocol):
    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None: ...


def rows_of(nodes: NodeColumns, names: Sequence[str] | None) -> Rows:
    """ALL_ROWS, or the index array of these nodes (in the given order)."""
    if names is None:
        return ALL_ROWS
    return np.array([nodes.index[name] for name in names], dtype=np.intp)


def filter_statuses(
    plugin: _Filter,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    names: Sequence[str] | None = None,
) -> dict[str, Status | None]:
    """Run Filter once over the rows of `names` (all nodes by default): node -> its status
    (None when it passes). Also checks FilterResult's invariants."""
    rows = rows_of(nodes, names)
    evaluated = [nodes.names[row] for row in nodes.row_indices(rows).tolist()]
    result = plugin.filter(state, pod, nodes, rows)
    if result is None:
        return dict.fromkeys(evaluated)
    if isinstance(result, Status):
        return dict.fromkeys(evaluated, result)
    assert result.ok.shape == (len(evaluated),)
    covered = np.zeros(len(evaluated), dtype=np.int64)
    out: dict[str, Status | None] = dict.fromkeys(evaluated)
    for status, mask in result.failures:
        assert not status.is_success()
        covered += mask
        for i in np.flatnonzero(mask).tolist():
            out[evaluated[i]] = status
    assert (covered <= 1).all(), "failure masks overlap"
    assert ((covered == 1) == ~result.ok).all(), "failures do not cover exactly ~ok"
    return out


def by_name(nodes: NodeColumns, rows: Rows, values: NDArray[np.int64]) -> dict[str, int]:
    """Score values (aligned with rows) keyed by node name."""
    evaluated = [nodes.names[row] for row in nodes.row_indices(rows).tolist()]
    assert values.shape == (len(evaluated),)
    return dict(zip(evaluated, values.tolist(), strict=True))
