"""What the framework's run_* methods answer (PreFilterOutcome, FilterOutcome, ScoreOutcome)
and how a plugin's status leaves the framework: attributed to its plugin (upstream SetPlugin),
a raised exception turned into an Error status, the framework's own Error messages."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import Rows
from scheduling.framework.interfaces import FilterResult, PreFilterResult
from scheduling.framework.status import SUCCESS, Code, Status

Rejections = list[tuple[Status, NDArray[np.intp]]]
"""(status with its plugin, the rows it rejected); each row appears at most once."""

NO_ROWS: NDArray[np.intp] = np.empty(0, dtype=np.intp)


@dataclass(slots=True)
class PreFilterOutcome:
    """RunPreFilterPlugins' answer."""

    result: PreFilterResult | None
    """The intersection of the plugins' node sets; None (or node_names None) means all."""
    status: Status
    narrowed_by: list[tuple[str, set[str]]] = field(default_factory=list)
    """The plugins that named nodes, in order, with their sets (upstream pluginsWithNodes)."""

    @property
    def plugins_with_nodes(self) -> set[str]:
        return {name for name, _ in self.narrowed_by}


@dataclass(slots=True)
class FilterOutcome:
    """RunFilterPlugins over rows: the rows that passed every plugin, and why others did not."""

    feasible: Rows
    """A subset of the input rows (the input itself, without a copy, when all pass)."""
    rejections: Rejections
    status: Status = SUCCESS
    """Success, or the Error that aborts the cycle."""


@dataclass(slots=True)
class ScoreOutcome:
    """RunScorePlugins over the feasible rows."""

    totals: NDArray[np.int64]
    """Weighted sum per row (aligned with the rows scored)."""
    by_plugin: dict[str, NDArray[np.int64]] | None
    """Each plugin's normalized, weighted scores (only when asked for, for explain)."""
    status: Status = SUCCESS


def attributed(status: Status, plugin: str) -> Status:
    """Upstream SetPlugin: the framework names the plugin that produced a failure."""
    if status.plugin == plugin or status.code in (Code.SUCCESS, Code.SKIP):
        return status
    return Status(status.code, status.reasons, plugin)


def raised(err: Exception) -> Status:
    return Status(Code.ERROR, (str(err) or type(err).__name__,))


def error_status(message: str, plugin: str) -> Status:
    return Status(Code.ERROR, (message,), plugin)


def filter_error(name: str, status: Status) -> Status:
    return error_status(f'running "{name}" filter plugin: {status.message()}', name)


def record_failures(
    name: str, result: FilterResult, indices: NDArray[np.intp], rejections: Rejections
) -> Status | None:
    for status, mask in result.failures:
        if not status.is_rejected():
            return filter_error(name, status)
        rejections.append((attributed(status, name), indices[mask]))
    return None


def score_error(size: int, message: str, plugin: str) -> ScoreOutcome:
    return ScoreOutcome(np.zeros(size, dtype=np.int64), None, error_status(message, plugin))
