"""Running a profile's Filter plugins over some rows, with nominated pods, as preemption needs.

- `run_filter_plugins`: the Filter plugins in order; per row, the first rejection wins and
  later plugins do not see that row (upstream RunFilterPlugins). Plugins in
  `state.skip_filter_plugins` are not called.
- `run_filters_with_nominated_pods`: upstream RunFilterPluginsWithNominatedPods. Pods nominated
  to a node with priority >= the pod's are treated as running there in a first pass (the pod
  must not take room freed for them); when they were added and the first pass passed, a second
  pass without them must pass too (filters such as pod affinity may need them absent).
  The runtime's Filter step should call this instead of `run_filter_plugins` so that nominated
  pods' resources count when filtering lower or equal priority pods.

PreFilter extensions: a PreFilter plugin whose state depends on other pods (InterPodAffinity,
PodTopologySpread) implements `PreFilterExtensions.add_pod/remove_pod`, called after a pod was
added to or removed from `nodes` at `row` on a scratch copy. They must not mutate shared
objects in place: `CycleState.clone()` is shallow, so write an updated copy of the plugin's
state value into `state`. A Filter plugin without extensions must decide a row from that row's
columns and the cycle state only (row-local): preemption then evaluates all nodes at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, FilterResult
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import Code, Status
from shared.models import Pod, priority_of


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Upstream PreFilterExtensions: keep a PreFilter plugin's state right when preemption (or
    nominated pods) add or remove a pod on one node of a scratch copy."""

    @property
    def name(self) -> str: ...

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, nodes: NodeColumns, row: int
    ) -> Status: ...


@dataclass(slots=True)
class FilterOutcome:
    """Per-row verdicts aligned with the rows evaluated."""

    rows: NDArray[np.intp]
    ok: NDArray[np.bool_]
    failures: list[tuple[Status, NDArray[np.bool_]]] = field(default_factory=list)
    """Disjoint masks (aligned with `rows`) of rows that failed with each status."""

    def status_at(self, i: int) -> Status:
        for status, mask in self.failures:
            if mask[i]:
                return status
        return Status()

    def statuses_by_row(self, which: NDArray[np.bool_] | None = None) -> dict[int, Status]:
        out: dict[int, Status] = {}
        for status, mask in self.failures:
            hit = mask if which is None else mask & which
            for row in self.rows[hit].tolist():
                out[row] = status
        return out


@dataclass(slots=True)
class FilterContext:
    """What running Filter needs beyond the pod and the nodes."""

    filter_plugins: Sequence[FilterPlugin]
    extensions: Sequence[PreFilterExtensions] = ()
    """PreFilter plugins that implement add_pod/remove_pod, in PreFilter order."""
    nominated: Mapping[str, Sequence[Pod]] = field(default_factory=dict)
    """Node name -> pods nominated to run there (status.nominatedNodeName), not yet bound."""

    def active_extensions(self, state: CycleState) -> list[PreFilterExtensions]:
        return [e for e in self.extensions if e.name not in state.skip_filter_plugins]


def extensions_of(plugins: Sequence[object]) -> list[PreFilterExtensions]:
    return [p for p in plugins if isinstance(p, PreFilterExtensions)]


def run_filter_plugins(
    plugins: Sequence[FilterPlugin],
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    rows: NDArray[np.intp],
) -> FilterOutcome:
    """Each plugin in order over the rows still passing; the first rejection of a row wins."""
    n = int(rows.shape[0])
    alive = np.ones(n, dtype=np.bool_)
    failures: list[tuple[Status, NDArray[np.bool_]]] = []
    for plugin in plugins:
        if plugin.name in state.skip_filter_plugins:
            continue
        live = np.flatnonzero(alive)
        if live.shape[0] == 0:
            break
        sub = rows if live.shape[0] == n else rows[live]
        try:
            result = plugin.filter(state, pod, nodes, sub)
        except Exception as err:  # noqa: BLE001 - a plugin bug becomes its Error status
            result = Status.error(str(err) or type(err).__name__)
        if result is None:
            continue
        if isinstance(result, Status):
            if result.code in (Code.SUCCESS, Code.SKIP):
                continue
            mask = np.zeros(n, dtype=np.bool_)
            mask[live] = True
            failures.append((result.with_plugin(plugin.name), mask))
            alive[live] = False
            continue
        _merge(result, live, n, plugin.name, alive, failures)
    return FilterOutcome(rows, alive, failures)


def _merge(
    result: FilterResult,
    live: NDArray[np.intp],
    n: int,
    plugin: str,
    alive: NDArray[np.bool_],
    failures: list[tuple[Status, NDArray[np.bool_]]],
) -> None:
    if bool(result.ok.all()):
        return
    for status, sub_mask in result.failures:
        mask = np.zeros(n, dtype=np.bool_)
        mask[live[sub_mask]] = True
        failures.append((status.with_plugin(plugin), mask))
    alive[live[~result.ok]] = False


def ge_nominated_pods(pod: Pod, nominated: Sequence[Pod]) -> list[Pod]:
    """Nominated pods the pod must yield to: priority >= its own, other than itself."""
    priority = priority_of(pod)
    uid = pod.metadata.uid
    return [p for p in nominated if priority_of(p) >= priority and p.metadata.uid != uid]


def nominated_rows(
    ctx: FilterContext, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]
) -> dict[int, list[Pod]]:
    """Row -> the >=-priority pods nominated there, for the evaluated rows only."""
    if not ctx.nominated:
        return {}
    wanted = np.zeros(len(nodes), dtype=np.bool_)
    wanted[rows] = True
    out: dict[int, list[Pod]] = {}
    for node_name, pods in ctx.nominated.items():
        row = nodes.index.get(node_name)
        if row is None or not wanted[row]:
            continue
        ge = ge_nominated_pods(pod, pods)
        if ge:
            out[row] = ge
    return out


def nominated_pods_from(pods: Sequence[Pod]) -> dict[str, list[Pod]]:
    """Node name -> unbound pods nominated to it, from a list of pods (dry runs, tests)."""
    out: dict[str, list[Pod]] = {}
    for pod in pods:
        node = pod.status.nominated_node_name
        if node and not pod.spec.node_name:
            out.setdefault(node, []).append(pod)
    return out


def run_filters_with_nominated_pods(
    ctx: FilterContext,
    state: CycleState,
    pod: Pod,
    scratch: Scratch,
    rows: NDArray[np.intp],
) -> FilterOutcome:
    """Upstream RunFilterPluginsWithNominatedPods over `rows` of `scratch.columns`.

    The scratch is used to add nominated pods and is left as it was found.
    """
    nodes = scratch.columns
    by_row = nominated_rows(ctx, pod, nodes, rows)
    if not by_row:
        return run_filter_plugins(ctx.filter_plugins, state, pod, nodes, rows)
    extensions = ctx.active_extensions(state)
    if not extensions:
        return _two_passes_row_local(ctx, state, pod, scratch, rows, by_row)
    return _two_passes_per_row(ctx, state, pod, scratch, rows, by_row, extensions)


def _two_passes_row_local(
    ctx: FilterContext,
    state: CycleState,
    pod: Pod,
    scratch: Scratch,
    rows: NDArray[np.intp],
    by_row: dict[int, list[Pod]],
) -> FilterOutcome:
    # Row-local plugins: add every nominated pod at once; each row sees only its own.
    for row, pods in by_row.items():
        for p in pods:
            scratch.add_pod(row, p)
    try:
        first = run_filter_plugins(ctx.filter_plugins, state, pod, scratch.columns, rows)
    finally:
        for row, pods in by_row.items():
            for p in pods:
                scratch.remove_added(row, p)
    had = np.zeros(len(scratch.columns), dtype=np.bool_)
    had[list(by_row)] = True
    again = first.ok & had[rows]
    if not bool(again.any()):
        return first
    idx = np.flatnonzero(again)
    second = run_filter_plugins(ctx.filter_plugins, state, pod, scratch.columns, rows[idx])
    return _overlay(first, idx, second)


def _two_passes_per_row(
    ctx: FilterContext,
    state: CycleState,
    pod: Pod,
    scratch: Scratch,
    rows: NDArray[np.intp],
    by_row: dict[int, list[Pod]],
    extensions: Sequence[PreFilterExtensions],
) -> FilterOutcome:
    # Cross-node PreFilter state: each node with nominated pods gets its own state copy.
    has = np.fromiter((r in by_row for r in rows.tolist()), dtype=np.bool_, count=len(rows))
    plain = np.flatnonzero(~has)
    outcome = FilterOutcome(rows, np.zeros(len(rows), dtype=np.bool_), [])
    if plain.shape[0]:
        outcome = _overlay(
            outcome,
            plain,
            run_filter_plugins(ctx.filter_plugins, state, pod, scratch.columns, rows[plain]),
        )
    for i in np.flatnonzero(has).tolist():
        row = int(rows[i])
        one = np.array([row], dtype=np.intp)
        result = _with_nominated_on_row(ctx, state, pod, scratch, row, by_row[row], extensions)
        if result.is_success():
            result = _single(
                run_filter_plugins(ctx.filter_plugins, state, pod, scratch.columns, one)
            )
        outcome = _overlay(outcome, np.array([i], dtype=np.intp), _outcome_of(one, result))
    return outcome


def _with_nominated_on_row(
    ctx: FilterContext,
    state: CycleState,
    pod: Pod,
    scratch: Scratch,
    row: int,
    pods: list[Pod],
    extensions: Sequence[PreFilterExtensions],
) -> Status:
    copy = state.clone()
    added: list[Pod] = []
    try:
        for p in pods:
            scratch.add_pod(row, p)
            added.append(p)
            for ext in extensions:
                status = ext.add_pod(copy, pod, p, scratch.columns, row)
                if not status.is_success():
                    return Status.error(
                        f"running AddPod on PreFilter plugin {ext.name!r}: {status.message()}"
                    )
        one = np.array([row], dtype=np.intp)
        return _single(run_filter_plugins(ctx.filter_plugins, copy, pod, scratch.columns, one))
    finally:
        for p in reversed(added):
            scratch.remove_added(row, p)


def _single(outcome: FilterOutcome) -> Status:
    return Status() if bool(outcome.ok[0]) else outcome.status_at(0)


def _outcome_of(rows: NDArray[np.intp], status: Status) -> FilterOutcome:
    if status.is_success():
        return FilterOutcome(rows, np.ones(len(rows), dtype=np.bool_), [])
    return FilterOutcome(
        rows, np.zeros(len(rows), dtype=np.bool_), [(status, np.ones(len(rows), dtype=np.bool_))]
    )


def _overlay(base: FilterOutcome, idx: NDArray[np.intp], sub: FilterOutcome) -> FilterOutcome:
    """`base` with the rows at positions `idx` replaced by `sub`'s verdicts."""
    n = len(base.rows)
    ok = base.ok.copy()
    ok[idx] = sub.ok
    replaced = np.zeros(n, dtype=np.bool_)
    replaced[idx] = True
    failures = [(s, m & ~replaced) for s, m in base.failures]
    for status, mask in sub.failures:
        full = np.zeros(n, dtype=np.bool_)
        full[idx[mask]] = True
        failures.append((status, full))
    return FilterOutcome(base.rows, ok, [(s, m) for s, m in failures if bool(m.any())])


def filter_with_nominated_pods(
    filter_plugins: Sequence[FilterPlugin],
    pre_filter_plugins: Sequence[object],
    nominated: Mapping[str, Sequence[Pod]],
    state: CycleState,
    pod: Pod,
    nodes: NodeColumns,
    rows: NDArray[np.intp],
) -> FilterOutcome:
    """The runtime's Filter step with nominated pods (upstream findNodesThatPassFilters calls
    RunFilterPluginsWithNominatedPods per node): `run_filter_plugins` when no >=-priority pod
    is nominated to an evaluated node, else the two passes on a scratch copy."""
    ctx = FilterContext(filter_plugins, extensions_of(pre_filter_plugins), nominated)
    if not nominated_rows(ctx, pod, nodes, rows):
        return run_filter_plugins(filter_plugins, state, pod, nodes, rows)
    return run_filters_with_nominated_pods(ctx, state, pod, Scratch(nodes), rows)
