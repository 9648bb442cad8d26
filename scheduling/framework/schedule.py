"""schedule_pod: find the feasible nodes, score them, pick one (upstream schedulePod).

Port of pkg/scheduler/schedule_one.go: schedulePod, findNodesThatFitPod,
findNodesThatPassFilters, numFeasibleNodesToFind, prioritizeNodes and selectHost.

Upstream walks the nodes from `nextStartNodeIndex` (wrapping) and stops once it has found
`numFeasibleNodesToFind` (K) feasible ones. berth evaluates every candidate row in one
data-parallel pass, then keeps the first K feasible rows in that rotated order, and counts as
processed the nodes up to and including the K-th feasible one (all of them when fewer are
feasible): the next pod starts right after it. Only the rejections of processed nodes are
reported, as upstream reports only the nodes it visited. (Upstream's 16 parallel workers may
overshoot K a little, nondeterministically; berth follows the rule, not the race.)

Extenders (KubeSchedulerConfiguration.extenders, `Framework.extenders()`) run as upstream's
findNodesThatPassExtenders and prioritizeNodes do: after Filter, only when some node is
feasible, each filtering extender narrows the feasible nodes (also for the nominated node);
after the one-feasible-node shortcut, their prioritize scores x weight x 10 are added to the
plugins' totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.errors import CycleError, FitError, NoNodesAvailableError
from scheduling.framework.extender import (
    ExtenderError,
    HTTPExtender,
    extender_scores_for_rows_by_extender,
    filter_rows_with_extenders,
)
from scheduling.framework.interfaces import Diagnosis
from scheduling.framework.outcomes import Rejections
from scheduling.framework.runtime import Framework
from scheduling.framework.status import Code, Status
from shared.models import Pod

MIN_FEASIBLE_NODES_TO_FIND = 100
"""Below this many nodes every node is checked (upstream minFeasibleNodesToFind)."""
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
"""The adaptive percentage never drops below this."""
EXTENDER_NAME = "Extender"
"""Upstream framework.ExtenderName: the "plugin" of nodes the extenders filtered out."""


@dataclass(slots=True)
class NodeScores:
    """Scores of the feasible rows (explain): totals and each plugin's weighted score."""

    rows: NDArray[np.intp]
    totals: NDArray[np.int64]
    by_plugin: dict[str, NDArray[np.int64]]

    def by_node(self, nodes: NodeColumns) -> dict[str, tuple[int, dict[str, int]]]:
        """node -> (total, {plugin: weighted score}), in row order."""
        out: dict[str, tuple[int, dict[str, int]]] = {}
        plugins = {name: scores.tolist() for name, scores in self.by_plugin.items()}
        totals = self.totals.tolist()
        for i, row in enumerate(self.rows.tolist()):
            out[nodes.names[row]] = (totals[i], {name: s[i] for name, s in plugins.items()})
        return out


@dataclass(slots=True)
class ScheduleResult:
    """Where the pod goes, and what the cycle saw (upstream ScheduleResult, plus diagnosis)."""

    suggested_host: str
    evaluated_nodes: int
    """Feasible nodes plus the nodes rejected by Filter (those the search visited)."""
    feasible_nodes: int
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    """Why the other visited nodes were rejected."""
    scores: NodeScores | None = None
    """Per-node, per-plugin scores: only when asked for (explain) and when scoring ran."""

    def filtered(self, nodes: NodeColumns) -> dict[str, Status]:
        """node -> the status that rejected it."""
        return rejected_nodes(self.diagnosis, nodes)


def rejected_nodes(diagnosis: Diagnosis, nodes: NodeColumns) -> dict[str, Status]:
    """node -> the status that rejected it, in row order."""
    by_row = diagnosis.status_by_row()
    return {nodes.names[row]: by_row[row] for row in sorted(by_row) if row >= 0}


def percentage_of_nodes_to_score(configured: int | None, num_all_nodes: int) -> int:
    """The percentage in effect: the configured one, or (None or 0) the adaptive default
    50 - nodes/125, never below 5 (50% at 100 nodes, 10% at 5,000, 5% from 5,625 on)."""
    if configured:
        return configured
    return max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes end the search (upstream numFeasibleNodesToFind): all of
    them below 100 nodes, else the percentage of the nodes, never fewer than 100. (A
    percentage above 100 asks for more nodes than exist: all are searched.)"""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage_of_nodes_to_score(percentage, num_all_nodes)
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


def select_host(totals: NDArray[np.int64], rng: np.random.Generator) -> int:
    """The position of the highest total; ties broken uniformly at random, as upstream
    selectHost. The generator is drawn from only when there is a tie."""
    best = totals.max()
    ties = np.flatnonzero(totals == best)
    if ties.shape[0] == 1:
        return int(ties[0])
    return int(ties[rng.integers(ties.shape[0])])


def schedule_pod(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    *,
    explain: bool = False,
) -> ScheduleResult:
    """One pod's placement: PreFilter, Filter, PreScore, Score, selectHost.

    Raises NoNodesAvailableError (no nodes), FitError (no node fits: the caller may run
    PostFilter with its diagnosis) or CycleError (a plugin failed).
    """
    num_all_nodes = len(nodes)
    if num_all_nodes == 0:
        raise NoNodesAvailableError
    signatures = framework.signatures
    if signatures is not None and not explain:
        reused = signatures.select(state, pod, nodes)
        if reused is not None:
            row, num_feasible = reused
            # Every node was visited: the feasible ones plus the rejected ones.
            return ScheduleResult(
                nodes.names[row], num_all_nodes, num_feasible, signatures.diagnosis(nodes)
            )
    diagnosis = Diagnosis(num_all_nodes=num_all_nodes)
    feasible, visited_rejections = _find_nodes_that_fit(framework, state, pod, nodes, diagnosis)
    num_feasible = nodes.size_of(feasible)
    if num_feasible == 0:
        raise FitError(pod, num_all_nodes, diagnosis)
    evaluated = num_feasible + visited_rejections
    if num_feasible == 1:
        host = nodes.names[int(nodes.row_indices(feasible)[0])]
        return ScheduleResult(host, evaluated, 1, diagnosis)

    scores: NodeScores | None = None
    extenders = framework.extenders()
    if not framework.has_score_plugins() and not extenders:
        # Upstream prioritizeNodes: without score plugins and extenders every node scores 1.
        # (The search then stops at the first feasible node, so schedule_pod
        # returns before this; kept as upstream has it.)
        totals = np.ones(num_feasible, dtype=np.int64)
        if explain:
            scores = NodeScores(nodes.row_indices(feasible), totals, {})
    else:
        status = framework.run_pre_score_plugins(state, pod, nodes, feasible)
        if not status.is_success():
            raise CycleError(status)
        outcome = framework.run_score_plugins(state, pod, nodes, feasible, explain=explain)
        if not outcome.status.is_success():
            raise CycleError(outcome.status)
        totals = outcome.totals
        by_plugin = outcome.by_plugin
        if extenders:
            rows = nodes.row_indices(feasible)
            for name, extra in extender_scores_for_rows_by_extender(extenders, pod, nodes, rows):
                totals = totals + extra
                if by_plugin is not None:
                    # Named after the extender (its urlPrefix), as upstream's NodePluginScores.
                    known = by_plugin.get(name)
                    by_plugin[name] = extra if known is None else known + extra
        if by_plugin is not None:
            scores = NodeScores(nodes.row_indices(feasible), totals, by_plugin)
    chosen = select_host(totals, framework.context.rng)
    host = nodes.names[_row_at(feasible, chosen, num_all_nodes)]
    return ScheduleResult(host, evaluated, num_feasible, diagnosis, scores)


def _row_at(rows: Rows, position: int, num_rows: int) -> int:
    if isinstance(rows, slice):
        return range(num_rows)[rows][position]
    return int(rows[position])


def _find_nodes_that_fit(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    diagnosis: Diagnosis,
) -> tuple[Rows, int]:
    """The feasible rows, and how many rejected nodes the search visited (upstream
    findNodesThatFitPod + findNodesThatPassFilters). Fills `diagnosis`."""
    num_all_nodes = len(nodes)
    pre = framework.run_pre_filter_plugins(state, pod, nodes)
    diagnosis.unschedulable_plugins = pre.plugins_with_nodes
    if not pre.status.is_success():
        if not pre.status.is_rejected():
            raise CycleError(pre.status)
        # Every node gets the PreFilter status (preemption reads it); the message replaces
        # the per-node reasons in the FitError.
        all_rows = np.arange(num_all_nodes, dtype=np.intp)
        diagnosis.rejections = [(pre.status, all_rows)]
        diagnosis.pre_filter_msg = pre.status.message()
        _add_plugin_status(diagnosis, pre.status)
        return all_rows[:0], 0

    extenders = framework.extenders()
    nominated = _evaluate_nominated_node(framework, state, pod, nodes, extenders)
    if nominated is not None:
        return nominated, 0

    candidates: Rows = ALL_ROWS
    if pre.result is not None and pre.result.node_names is not None:
        candidates = _narrow(pre.result.node_names, pre.narrowed_by, nodes, diagnosis)
    num_candidates = nodes.size_of(candidates)
    start = framework.context.next_start_node_index
    if num_candidates == 0:
        return candidates, 0

    to_find = num_feasible_nodes_to_find(effective_percentage(framework), num_candidates)
    if not framework.has_score_plugins() and not _filter_or_score(extenders):
        to_find = 1  # upstream: nothing to rank or filter further, the first feasible will do
    outcome = framework.run_filter_plugins_with_nominated_pods(state, pod, nodes, candidates)
    if not outcome.status.is_success():
        framework.context.next_start_node_index = (start + num_candidates) % num_all_nodes
        raise CycleError(outcome.status)

    feasible, processed, rejections = _first_feasible(
        outcome.feasible, outcome.rejections, candidates, num_candidates, start, to_find
    )
    framework.context.next_start_node_index = (start + processed) % num_all_nodes
    visited = 0
    for status, rows in rejections:
        visited += int(rows.shape[0])
        diagnosis.rejections.append((status, rows))
        _add_plugin_status(diagnosis, status)
    if extenders and nodes.size_of(feasible):
        feasible, explained = _filter_with_extenders(extenders, pod, nodes, feasible, diagnosis)
        visited += explained
    return feasible, visited


def _filter_or_score(extenders: Sequence[HTTPExtender]) -> bool:
    """Upstream hasExtenderFilters() or an extender in hasScoring()."""
    return any(e.config.filter_verb or e.config.prioritize_verb for e in extenders)


def _filter_with_extenders(
    extenders: Sequence[HTTPExtender],
    pod: Pod,
    nodes: NodeColumns,
    feasible: Rows,
    diagnosis: Diagnosis,
) -> tuple[NDArray[np.intp], int]:
    """Upstream findNodesThatPassExtenders over the feasible rows: the rows every interested
    extender kept, and how many dropped rows got a status (those count as evaluated). The
    statuses go into the diagnosis under EXTENDER_NAME; a node an extender drops without a
    reason gets none (preemption then treats it as unresolvable, as upstream's absent nodes).
    A failing extender that is not ignorable fails the cycle."""
    rows = nodes.row_indices(feasible)
    try:
        kept, by_row = filter_rows_with_extenders(extenders, pod, nodes, rows)
    except ExtenderError as err:
        raise CycleError(Status(Code.ERROR, (str(err),))) from err
    if kept.shape[0] == rows.shape[0]:
        return kept, 0
    dropped = np.setdiff1d(rows, kept, assume_unique=True)
    # A node the extenders name but that was not feasible keeps its Filter status (each row
    # has one status in the diagnosis).
    grouped: dict[Status, list[int]] = {}
    for row in dropped.tolist():
        status = by_row.get(row)
        if status is not None:
            grouped.setdefault(Status(status.code, status.reasons, EXTENDER_NAME), []).append(row)
    explained = 0
    for status, status_rows in grouped.items():
        explained += len(status_rows)
        diagnosis.rejections.append((status, np.array(status_rows, dtype=np.intp)))
    diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
    return kept, explained


def effective_percentage(framework: Framework) -> int | None:
    """The profile's percentageOfNodesToScore, else the configuration's (None: adaptive)."""
    if framework.percentage_of_nodes_to_score is not None:
        return framework.percentage_of_nodes_to_score
    return framework.context.percentage_of_nodes_to_score


def _first_feasible(
    feasible: Rows,
    rejections: Rejections,
    candidates: Rows,
    num_candidates: int,
    start: int,
    to_find: int,
) -> tuple[Rows, int, Rejections]:
    """Keep the first `to_find` feasible rows in rotated order (from position `start` of the
    candidates, wrapping). Returns them (ascending), the number of candidates the sequential
    walk would have processed, and the rejections among those."""
    num_feasible = num_candidates if isinstance(feasible, slice) else int(feasible.shape[0])
    if num_feasible <= to_find:
        return feasible, num_candidates, rejections
    offset = start % num_candidates
    if isinstance(feasible, slice) and isinstance(candidates, slice):
        # Every candidate is feasible: the first `to_find` from `offset`, as slices if no wrap.
        end = offset + to_find
        if end <= num_candidates:
            return slice(offset, end), to_find, rejections
        rows = np.concatenate(
            (np.arange(end - num_candidates, dtype=np.intp), np.arange(offset, num_candidates))
        )
        return rows, to_find, rejections
    positions = _positions(feasible, candidates, num_candidates)
    split = int(np.searchsorted(positions, offset))
    rotated = np.concatenate((positions[split:], positions[:split]))
    last = int(rotated[to_find - 1])
    processed = (last - offset) % num_candidates + 1
    kept = np.sort(rotated[:to_find])
    rows = kept if isinstance(candidates, slice) else candidates[kept]
    visited: Rejections = []
    for status, rejected in rejections:
        kept_rows = rejected[_visited_mask(rejected, candidates, num_candidates, offset, processed)]
        if kept_rows.shape[0]:
            visited.append((status, kept_rows))
    return rows, processed, visited


def _positions(rows: Rows, candidates: Rows, num_candidates: int) -> NDArray[np.intp]:
    """Positions of `rows` within the (ascending) candidate rows."""
    if isinstance(rows, slice):
        return np.arange(num_candidates, dtype=np.intp)
    if isinstance(candidates, slice):
        return rows
    return np.searchsorted(candidates, rows).astype(np.intp)


def _visited_mask(
    rows: NDArray[np.intp], candidates: Rows, num_candidates: int, offset: int, processed: int
) -> NDArray[np.bool_]:
    rank = (_positions(rows, candidates, num_candidates) - offset) % num_candidates
    return rank < processed


def _narrow(
    names: set[str],
    narrowed_by: list[tuple[str, set[str]]],
    nodes: NodeColumns,
    diagnosis: Diagnosis,
) -> NDArray[np.intp]:
    """The rows named by the PreFilterResult (unknown names dropped, as upstream); every
    other node is rejected as upstream's "absent nodes" status says, attributed to the first
    plugin whose result left it out."""
    index = nodes.index
    rows = np.array(sorted(index[name] for name in names if name in index), dtype=np.intp)
    listed = " ".join(sorted(name for name, _ in narrowed_by))
    excluded = np.ones(len(nodes), dtype=np.bool_)
    excluded[rows] = False
    reason = f"node(s) didn't satisfy plugin(s) [{listed}]"
    for plugin, plugin_names in narrowed_by:
        if not excluded.any():
            break
        kept = np.zeros(len(nodes), dtype=np.bool_)
        kept[[index[name] for name in plugin_names if name in index]] = True
        by_plugin = excluded & ~kept
        if by_plugin.any():
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), plugin)
            diagnosis.rejections.append((status, np.flatnonzero(by_plugin).astype(np.intp)))
            excluded &= kept
    return rows


def _evaluate_nominated_node(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    extenders: Sequence[HTTPExtender],
) -> NDArray[np.intp] | None:
    """A pod nominated by an earlier preemption tries its nominated node first; when that node
    passes every filter and every filtering extender it is the only candidate (upstream
    evaluateNominatedNode). Otherwise, or when an extender fails (upstream logs it), the full
    search runs and records the statuses."""
    nominated = pod.status.nominated_node_name
    if not nominated:
        return None
    row = nodes.index.get(nominated)
    if row is None:
        return None
    outcome = framework.run_filter_plugins_with_nominated_pods(
        state, pod, nodes, np.array([row], dtype=np.intp)
    )
    if not outcome.status.is_success() or nodes.size_of(outcome.feasible) != 1:
        return None
    feasible = nodes.row_indices(outcome.feasible)
    if extenders:
        try:
            feasible, _ = filter_rows_with_extenders(extenders, pod, nodes, feasible)
        except ExtenderError:
            return None
        if feasible.shape[0] == 0:
            return None
    return feasible


def _add_plugin_status(diagnosis: Diagnosis, status: Status) -> None:
    """Upstream Diagnosis.AddPluginStatus (Pending plugins are not tracked separately)."""
    if status.plugin and status.is_rejected():
        diagnosis.unschedulable_plugins.add(status.plugin)
