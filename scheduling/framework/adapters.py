"""Adapters from the per-node plugin forms to the data-parallel Filter and Score interfaces.

Out-of-tree authors may write `filter_node(state, pod, node, pods) -> Status` or
`score_node(state, pod, node, pods) -> int` (interfaces.NodeFilterPlugin / NodeScorePlugin).
The framework wraps them with these adapters, which call the function once per row: a Python
loop per node, fine for small clusters and slow for large ones (in-tree plugins are all
data-parallel).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    FilterPlugin,
    FilterResult,
    NodeFilterPlugin,
    NodeScorePlugin,
    NormalizeScorePlugin,
    ScorePlugin,
)
from scheduling.framework.status import Status
from shared.models import Pod


class NodeFilterAdapter:
    """A FilterPlugin over a NodeFilterPlugin: rows with an equal status share one mask."""

    __slots__ = ("name", "plugin")

    def __init__(self, plugin: NodeFilterPlugin) -> None:
        self.plugin = plugin
        self.name: str = plugin.name

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        indices = nodes.row_indices(rows).tolist()
        ok = np.ones(len(indices), dtype=np.bool_)
        failed: dict[Status, list[int]] = {}
        for i, row in enumerate(indices):
            status = self.plugin.filter_node(state, pod, nodes.nodes[row], nodes.pods_by_node[row])
            if not status.is_success():
                ok[i] = False
                failed.setdefault(status, []).append(i)
        if not failed:
            return None
        failures: list[tuple[Status, NDArray[np.bool_]]] = []
        for status, positions in failed.items():
            mask = np.zeros(len(indices), dtype=np.bool_)
            mask[positions] = True
            failures.append((status, mask))
        return FilterResult(ok, failures)


class NodeScoreAdapter:
    """A ScorePlugin over a NodeScorePlugin."""

    __slots__ = ("name", "plugin")

    def __init__(self, plugin: NodeScorePlugin) -> None:
        self.plugin = plugin
        self.name: str = plugin.name

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64]:
        indices = nodes.row_indices(rows).tolist()
        return np.fromiter(
            (
                self.plugin.score_node(state, pod, nodes.nodes[row], nodes.pods_by_node[row])
                for row in indices
            ),
            dtype=np.int64,
            count=len(indices),
        )


class NormalizingNodeScoreAdapter(NodeScoreAdapter):
    """A NodeScoreAdapter whose plugin also has ScoreExtensions (normalize_score)."""

    __slots__ = ()

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64] | Status:
        normalizer = self.plugin
        assert isinstance(normalizer, NormalizeScorePlugin)
        return normalizer.normalize_score(state, pod, scores)


def as_filter_plugin(plugin: object) -> FilterPlugin | None:
    """The plugin's data-parallel Filter: itself, an adapter for the per-node form, or None."""
    if isinstance(plugin, FilterPlugin):
        return plugin
    if isinstance(plugin, NodeFilterPlugin):
        return NodeFilterAdapter(plugin)
    return None


def as_score_plugin(plugin: object) -> ScorePlugin | None:
    """The plugin's data-parallel Score: itself, an adapter for the per-node form, or None."""
    if isinstance(plugin, ScorePlugin):
        return plugin
    if isinstance(plugin, NodeScorePlugin):
        if isinstance(plugin, NormalizeScorePlugin):
            return NormalizingNodeScoreAdapter(plugin)
        return NodeScoreAdapter(plugin)
    return None
