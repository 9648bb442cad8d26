"""PreFilter and Filter over node rows, with upstream's semantics: PreFilter's node sets
intersected and its Skip recorded (RunPreFilterPlugins), each Filter plugin on the rows the
ones before it passed (RunFilterPlugins), and nominated pods counted as running where they
were nominated (RunFilterPluginsWithNominatedPods)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.framework import nominated as nominated_filter
from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, PreFilterPlugin, PreFilterResult
from scheduling.framework.outcomes import (
    NO_ROWS,
    FilterOutcome,
    PreFilterOutcome,
    Rejections,
    attributed,
    error_status,
    filter_error,
    raised,
    record_failures,
)
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import SUCCESS, Code, Status
from shared.models import Pod


def run_pre_filter(
    plugins: Sequence[tuple[str, PreFilterPlugin]], state: CycleState, pod: Pod, nodes: NodeColumns
) -> PreFilterOutcome:
    """Every PreFilter plugin in order (upstream RunPreFilterPlugins).

    Skip: that plugin's Filter is skipped this cycle. UnschedulableAndUnresolvable or an
    Error stops at once; Unschedulable is remembered and the rest still run (preemption
    needs their state). PreFilterResults intersect; an empty intersection rejects the pod.
    """
    skip: set[str] = set()
    result: PreFilterResult | None = None
    narrowed_by: list[tuple[str, set[str]]] = []
    rejected: Status | None = None
    try:
        for name, plugin in plugins:
            try:
                narrowed, status = plugin.pre_filter(state, pod, nodes)
            except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
                narrowed, status = None, raised(err)
            if status.code == Code.SKIP:
                skip.add(name)
                continue
            if status.code != Code.SUCCESS:
                status = attributed(status, name)
                if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return PreFilterOutcome(None, status)
                if status.code == Code.UNSCHEDULABLE:
                    rejected = status
                    continue
                return PreFilterOutcome(
                    None,
                    error_status(f'running PreFilter plugin "{name}": {status.message()}', name),
                )
            if narrowed is None or narrowed.node_names is None:
                continue
            narrowed_by.append((name, set(narrowed.node_names)))
            result = (
                PreFilterResult(set(narrowed.node_names))
                if result is None
                else result.merge(narrowed)
            )
            if result.node_names is not None and not result.node_names:
                listed = sorted(n for n, _ in narrowed_by)
                message = (
                    f"node(s) didn't satisfy plugin {listed[0]}"
                    if len(listed) == 1
                    else f"node(s) didn't satisfy plugin(s) [{' '.join(listed)}] simultaneously"
                )
                # Upstream's status names no plugin; berth names the one that emptied the
                # intersection, so every rejected node has a plugin to report.
                status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,), name)
                return PreFilterOutcome(result, status, narrowed_by)
        return PreFilterOutcome(result, rejected or SUCCESS, narrowed_by)
    finally:
        state.skip_filter_plugins = skip


def run_filter(
    plugins: Sequence[tuple[str, FilterPlugin]],
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    rows: Rows = ALL_ROWS,
) -> FilterOutcome:
    """Every Filter plugin in order, each on the rows that passed the ones before it."""
    remaining: Rows = rows
    rejections: Rejections = []
    skip = state.skip_filter_plugins
    for name, plugin in plugins:
        if skip and name in skip:
            continue
        try:
            result = plugin.filter(state, pod, nodes, remaining)
        except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
            result = raised(err)
        if result is None:
            continue
        if isinstance(result, Status):
            if result.code == Code.SUCCESS:
                continue
            if not result.is_rejected():
                return FilterOutcome(NO_ROWS, rejections, filter_error(name, result))
            rejections.append((attributed(result, name), nodes.row_indices(remaining)))
            return FilterOutcome(NO_ROWS, rejections)
        if not result.failures:
            continue  # FilterResult invariant: no failures means every row passed
        indices = nodes.row_indices(remaining)
        error = record_failures(name, result, indices, rejections)
        if error is not None:
            return FilterOutcome(NO_ROWS, rejections, error)
        remaining = indices[result.ok]
        if remaining.shape[0] == 0:
            break
    return FilterOutcome(remaining, rejections)


def run_filter_with_nominated(
    filter_plugins: Sequence[tuple[str, FilterPlugin]],
    pre_filter_plugins: Sequence[tuple[str, PreFilterPlugin]],
    nominated: Mapping[str, Sequence[Pod]],
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    rows: Rows = ALL_ROWS,
) -> FilterOutcome:
    """The Filter step of a cycle (upstream RunFilterPluginsWithNominatedPods): pods
    nominated to a node with priority >= the pod's count as running there, so the pod
    does not take room freed for them. Without such pods, `run_filter`."""
    if nominated:
        indices = nodes.row_indices(rows)
        context = nominated_filter.FilterContext(
            [plugin for _, plugin in filter_plugins],
            nominated_filter.extensions_of([plugin for _, plugin in pre_filter_plugins]),
            nominated,
        )
        if nominated_filter.nominated_rows(context, pod, nodes, indices):
            outcome = nominated_filter.run_filters_with_nominated_pods(
                context, state, pod, Scratch(nodes), indices
            )
            rejections: Rejections = []
            for status, mask in outcome.failures:
                if not status.is_rejected():
                    return FilterOutcome(NO_ROWS, rejections, filter_error(status.plugin, status))
                rejections.append((status, outcome.rows[mask]))
            return FilterOutcome(outcome.rows[outcome.ok], rejections)
    return run_filter(filter_plugins, state, pod, nodes, rows)
