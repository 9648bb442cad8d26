"""Test plugins for preemption: small, honest stand-ins for the real Filter plugins.

- FitFilter: NodeResourcesFit's Filter (reasons "Too many pods", "Insufficient <resource>").
- CodeFilter: upstream's FakeFilterPlugin (a fixed code per node name) counting rows seen.
- MatchFilter / TrueFilter / FalseFilter: upstream's tf plugins.
- ErrorExtension: upstream's TestPlugin (PreFilter extensions failing on nodes labelled
  error=true).
- SpreadFilter: PodTopologySpread's required constraints (DoNotSchedule, maxSkew, label
  selector "key exists") with cross-node PreFilter state and add_pod/remove_pod, enough to port
  the upstream preemption tables that use PodTopologySpread.
- NoopExtension: an active PreFilter extension that does nothing (forces the node-by-node
  dry run so both ways can be compared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, StateKey
from scheduling.framework.interfaces import (
    Diagnosis,
    FilterPlugin,
    FilterResult,
    PreFilterResult,
)
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.plugins.defaultpreemption import (
    PreemptionEnvironment,
    nominated_pods_from,
)
from shared.models import Node, Pod, PodDisruptionBudget
from shared.models.resources import pod_requests

_FIT_KEY = StateKey[dict[str, int]]("PreFilterFakeFit")


class FitFilter:
    name: ClassVar[str] = "NodeResourcesFit"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(_FIT_KEY, pod_requests(pod))
        return None, SUCCESS

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        requests = state.read(_FIT_KEY)
        idx = nodes.row_indices(rows)
        reasons: list[list[str]] = [[] for _ in range(len(idx))]
        pods_col = nodes.resource_index["pods"]
        free_pods = nodes.allocatable[idx, pods_col] - nodes.requested[idx, pods_col]
        for i in np.flatnonzero(free_pods < 1).tolist():
            reasons[i].append("Too many pods")
        for name, value in requests.items():
            if value <= 0:
                continue
            col = nodes.resource_index.get(name)
            free = (
                np.zeros(len(idx), dtype=np.int64)
                if col is None
                else nodes.allocatable[idx, col] - nodes.requested[idx, col]
            )
            for i in np.flatnonzero(free < value).tolist():
                reasons[i].append(f"Insufficient {name}")
        ok = np.array([not r for r in reasons], dtype=np.bool_)
        if ok.all():
            return None
        groups: dict[tuple[str, ...], NDArray[np.bool_]] = {}
        for i, r in enumerate(reasons):
            if r:
                key = tuple(r)
                if key not in groups:
                    groups[key] = np.zeros(len(idx), dtype=np.bool_)
                groups[key][i] = True
        return FilterResult(
            ok, [(Status(Code.UNSCHEDULABLE, k, self.name), m) for k, m in groups.items()]
        )


class CodeFilter:
    """A fixed code per node name (missing: success); counts the rows it judged."""

    name: ClassVar[str] = "FakeFilter"

    def __init__(self, codes: dict[str, Code] | None = None) -> None:
        self.codes = codes or {}
        self.calls = 0

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        idx = nodes.row_indices(rows)
        self.calls += len(idx)
        codes = [self.codes.get(nodes.names[r], Code.SUCCESS) for r in idx.tolist()]
        ok = np.array([c == Code.SUCCESS for c in codes], dtype=np.bool_)
        if ok.all():
            return None
        failures = []
        for code in sorted({c for c in codes if c != Code.SUCCESS}):
            mask = np.array([c == code for c in codes], dtype=np.bool_)
            failures.append((Status(code, (), self.name), mask))
        return FilterResult(ok, failures)


class TrueFilter:
    name: ClassVar[str] = "TrueFilter"

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        return None


class FalseFilter:
    name: ClassVar[str] = "FalseFilter"

    def filter(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        return Status.unschedulable("injecting failure for pod test-pod", plugin=self.name)


class MatchFilter:
    """Passes only the node named like the pod."""

    name: ClassVar[str] = "MatchFilter"

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        idx = nodes.row_indices(rows)
        ok = np.array([nodes.names[r] == pod.metadata.name for r in idx.tolist()], dtype=bool)
        return FilterResult.from_mask(ok, Status.unschedulable("node not matched"))


class ErrorExtension:
    """Upstream TestPlugin: AddPod/RemovePod fail on nodes labelled error=true."""

    name: ClassVar[str] = "test-plugin"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    def _check(self, verb: str, pod: Pod, nodes: NodeColumns, row: int) -> Status:
        if nodes.nodes[row].metadata.labels.get("error") == "true":
            return Status.error(f"failed to {verb} pod: {pod.metadata.name}")
        return SUCCESS

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._check("add", pod, nodes, row)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._check("remove", pod, nodes, row)


class NoopExtension:
    name: ClassVar[str] = "Noop"

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return SUCCESS

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return SUCCESS


@dataclass(frozen=True, slots=True)
class _Constraint:
    key: str
    max_skew: int
    selector_key: str


@dataclass(frozen=True, slots=True)
class _SpreadState:
    constraints: tuple[_Constraint, ...]
    counts: tuple[dict[str, int], ...]
    """Per constraint: domain value -> matching pods."""


_SPREAD_KEY = StateKey[_SpreadState]("PreFilterFakeSpread")


class SpreadFilter:
    """Required topology spread with selectors of the form {key Exists}, every node eligible."""

    name: ClassVar[str] = "PodTopologySpread"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        constraints = []
        for spec in pod.spec.topology_spread_constraints:
            assert spec.label_selector is not None
            (req,) = spec.label_selector.match_expressions
            constraints.append(_Constraint(spec.topology_key, spec.max_skew, req.key))
        if not constraints:
            state.skip_filter_plugins.add(self.name)
            return None, Status.skip()
        counts: list[dict[str, int]] = []
        for c in constraints:
            per: dict[str, int] = {}
            for row, node in enumerate(nodes.nodes):
                domain = node.metadata.labels.get(c.key)
                if domain is None:
                    continue
                matching = sum(1 for p in nodes.pods_by_node[row] if c.selector_key in _labels(p))
                per[domain] = per.get(domain, 0) + matching
            counts.append(per)
        state.write(_SPREAD_KEY, _SpreadState(tuple(constraints), tuple(counts)))
        return None, SUCCESS

    def _update(
        self, state: CycleState, other: Pod, nodes: NodeColumns, row: int, delta: int
    ) -> Status:
        current = state.read(_SPREAD_KEY)
        counts = []
        for c, per in zip(current.constraints, current.counts, strict=True):
            copy = dict(per)
            domain = nodes.nodes[row].metadata.labels.get(c.key)
            if domain is not None and c.selector_key in _labels(other):
                copy[domain] = copy.get(domain, 0) + delta
            counts.append(copy)
        state.write(_SPREAD_KEY, _SpreadState(current.constraints, tuple(counts)))
        return SUCCESS

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._update(state, pod_to_add, nodes, row, +1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._update(state, pod_to_remove, nodes, row, -1)

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        spread = state.read(_SPREAD_KEY)
        idx = nodes.row_indices(rows)
        ok = np.ones(len(idx), dtype=np.bool_)
        for c, per in zip(spread.constraints, spread.counts, strict=True):
            minimum = min(per.values()) if per else 0
            self_match = 1 if c.selector_key in _labels(pod) else 0
            for i, r in enumerate(idx.tolist()):
                domain = nodes.nodes[r].metadata.labels.get(c.key)
                if domain is None or per.get(domain, 0) + self_match - minimum > c.max_skew:
                    ok[i] = False
        reason = "node(s) didn't match pod topology spread constraints"
        return FilterResult.from_mask(ok, Status.unschedulable(reason))


def _labels(pod: Pod) -> dict[str, str]:
    return pod.metadata.labels


# ----------------------------------------------------------------------------- harness
def run_pre_filters(plugins: Sequence[object], pod: Pod, nodes: NodeColumns) -> CycleState:
    state = CycleState()
    for plugin in plugins:
        pre_filter = getattr(plugin, "pre_filter", None)
        if pre_filter is not None:
            pre_filter(state, pod, nodes)
    return state


def all_unschedulable(nodes: NodeColumns, names: Sequence[str] | None = None) -> Diagnosis:
    """A diagnosis where these nodes (all by default) were rejected as Unschedulable."""
    wanted = list(nodes.names) if names is None else list(names)
    rows = np.array([nodes.index[n] for n in wanted], dtype=np.intp)
    return Diagnosis(num_all_nodes=len(nodes), rejections=[(Status.unschedulable(), rows)])


def diagnosis_of(nodes: NodeColumns, codes: dict[str, Code]) -> Diagnosis:
    rejections = []
    for code in sorted(set(codes.values())):
        rows = np.array([nodes.index[n] for n, c in codes.items() if c == code], dtype=np.intp)
        rejections.append((Status(code), rows))
    return Diagnosis(num_all_nodes=len(nodes), rejections=rejections)


def environment(
    nodes: NodeColumns,
    plugins: Sequence[object],
    *,
    pdbs: Sequence[PodDisruptionBudget] = (),
    pods: Sequence[Pod] = (),
    extenders: Sequence[object] = (),
) -> PreemptionEnvironment:
    filters: list[FilterPlugin] = [p for p in plugins if isinstance(p, FilterPlugin)]
    return PreemptionEnvironment(
        nodes=nodes,
        filter_plugins=filters,
        pre_filter_plugins=list(plugins),
        nominated=nominated_pods_from(pods),
        pdbs=pdbs,
        extenders=extenders,  # type: ignore[arg-type]
    )


def columns(nodes: Sequence[Node], pods: Sequence[Pod]) -> NodeColumns:
    return NodeColumns(nodes, [p for p in pods if p.spec.node_name])


@dataclass(frozen=True, slots=True)
class _AffinityState:
    counts: dict[str, int]
    """Topology value -> existing pods carrying the selector label."""


_AFFINITY_KEY = StateKey[_AffinityState]("PreFilterFakeAffinity")


class AffinityFilter:
    """Required (anti-)affinity of the incoming pod to pods carrying label `selector_key`, over
    the topology label `topology_key`, with PreFilter extensions (InterPodAffinity's shape).
    Affinity rejects a node as UnschedulableAndUnresolvable when no pod matches anywhere,
    else as Unschedulable; anti-affinity rejects as Unschedulable."""

    name: ClassVar[str] = "InterPodAffinity"

    def __init__(self, topology_key: str, selector_key: str, *, anti: bool) -> None:
        self.topology_key = topology_key
        self.selector_key = selector_key
        self.anti = anti

    def _domain(self, nodes: NodeColumns, row: int) -> str | None:
        return nodes.nodes[row].metadata.labels.get(self.topology_key)

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        counts: dict[str, int] = {}
        for row in range(len(nodes)):
            domain = self._domain(nodes, row)
            if domain is None:
                continue
            hits = sum(1 for p in nodes.pods_by_node[row] if self.selector_key in _labels(p))
            counts[domain] = counts.get(domain, 0) + hits
        state.write(_AFFINITY_KEY, _AffinityState(counts))
        return None, SUCCESS

    def _update(
        self, state: CycleState, other: Pod, nodes: NodeColumns, row: int, d: int
    ) -> Status:
        domain = self._domain(nodes, row)
        if domain is None or self.selector_key not in _labels(other):
            return SUCCESS
        counts = dict(state.read(_AFFINITY_KEY).counts)
        counts[domain] = counts.get(domain, 0) + d
        state.write(_AFFINITY_KEY, _AffinityState(counts))
        return SUCCESS

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._update(state, pod_to_add, nodes, row, +1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._update(state, pod_to_remove, nodes, row, -1)

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        counts = state.read(_AFFINITY_KEY).counts
        idx = nodes.row_indices(rows)
        here = np.array([counts.get(self._domain(nodes, r) or "", 0) for r in idx.tolist()])
        if self.anti:
            reason = "node(s) didn't match pod anti-affinity rules"
            return FilterResult.from_mask(here == 0, Status.unschedulable(reason))
        reason = "node(s) didn't match pod affinity rules"
        if sum(counts.values()) == 0:
            return FilterResult.from_mask(here > 0, Status.unresolvable(reason))
        return FilterResult.from_mask(here > 0, Status.unschedulable(reason))
