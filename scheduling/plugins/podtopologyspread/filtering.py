"""PodTopologySpread PreFilter and Filter (upstream podtopologyspread/filtering.go).

PreFilter (calPreFilterState), per hard constraint:
- nodes counted: those that carry every constraint's topology key and pass the constraint's
  inclusion policies (nodeAffinityPolicy, nodeTaintsPolicy);
- match_num: per domain (value code of the key), matching pods on counted nodes
  (TpValueToMatchNum); `present` marks the counted domains, `domains` their number;
- critical_paths: the two domains with the fewest matching pods.
Filter, per node and constraint in order: no topology key -> UnschedulableAndUnresolvable;
match_num + selfMatch - minMatch > maxSkew -> Unschedulable, where minMatch is 0 while fewer
than minDomains domains exist (upstream filtering.go).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.interfaces import FilterResult
from scheduling.framework.status import Status
from scheduling.plugins import names
from scheduling.plugins.podindex import domain_sums, query_matches
from scheduling.plugins.podtopologyspread.common import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    Constraint,
    Inclusion,
    RowCounts,
    has_all_keys,
    row_included,
)
from scheduling.plugins.podtopologyspread.critical_paths import (
    CriticalPath,
    CriticalPaths,
)
from shared.models import Pod


@dataclass(frozen=True, slots=True)
class PreFilterState:
    pod: Pod
    constraints: tuple[Constraint, ...]
    match_num: tuple[NDArray[np.int64], ...]
    """Per constraint: matching pods per value code (+ a trailing slot that stays 0)."""
    present: tuple[NDArray[np.bool_], ...]
    """Per constraint: the domains counted (the keys of upstream's TpValueToMatchNum)."""
    domains: tuple[int, ...]
    critical_paths: tuple[CriticalPaths, ...]

    def min_match_num(self, i: int) -> int:
        """minMatchNum: the global minimum, or 0 while there are fewer than minDomains."""
        if self.domains[i] < self.constraints[i].min_domains:
            return 0
        return self.critical_paths[i].first.match_num

    def tp_value_to_match_num(self, nodes: NodeColumns, i: int) -> dict[str, int]:
        """Upstream's TpValueToMatchNum[i] as a dict (tests, debugging)."""
        values = nodes.label(self.constraints[i].topology_key).values
        codes = np.flatnonzero(self.present[i]).tolist()
        return {values[c]: int(self.match_num[i][c]) for c in codes}


def _initial_paths(
    values: list[str], counts: NDArray[np.int64], present: NDArray[np.bool_]
) -> CriticalPaths:
    """The paths after feeding every counted domain to update(): its two smallest."""
    codes = np.flatnonzero(present)
    if codes.shape[0] == 0:
        return CriticalPaths()
    nums = counts[codes]
    first = int(np.argmin(nums))
    paths = CriticalPaths(CriticalPath(values[int(codes[first])], int(nums[first])))
    if codes.shape[0] > 1:
        rest = nums.copy()
        rest[first] = np.iinfo(np.int64).max
        second = int(np.argmin(rest))
        paths = CriticalPaths(
            paths.first, CriticalPath(values[int(codes[second])], int(nums[second]))
        )
    return paths


def compute(pod: Pod, nodes: NodeColumns, constraints: list[Constraint]) -> PreFilterState:
    counted_nodes = has_all_keys(nodes, constraints)
    inclusion = Inclusion(pod, nodes)
    counts = RowCounts(pod, nodes)
    match_num: list[NDArray[np.int64]] = []
    present: list[NDArray[np.bool_]] = []
    domains: list[int] = []
    paths: list[CriticalPaths] = []
    for constraint in constraints:
        counted = counted_nodes
        included = inclusion.mask(constraint)
        if included is not None:
            counted = counted & included
        column = nodes.label(constraint.topology_key)
        size = len(column.values) + 1
        domain_present = np.bincount(column.codes[counted], minlength=size) > 0
        domain_counts = domain_sums(nodes, constraint.topology_key, counts.of(constraint), counted)
        match_num.append(domain_counts)
        present.append(domain_present)
        domains.append(int(domain_present.sum()))
        paths.append(_initial_paths(column.values, domain_counts, domain_present))
    return PreFilterState(
        pod, tuple(constraints), tuple(match_num), tuple(present), tuple(domains), tuple(paths)
    )


def filter_rows(
    state: PreFilterState, pod: Pod, nodes: NodeColumns, rows: Rows
) -> FilterResult | None:
    size = nodes.size_of(rows)
    undecided = np.ones(size, dtype=np.bool_)
    label_fail = np.zeros(size, dtype=np.bool_)
    skew_fail = np.zeros(size, dtype=np.bool_)
    labels = pod.metadata.labels
    for i, constraint in enumerate(state.constraints):
        codes = nodes.label(constraint.topology_key).codes[rows]
        missing = codes < 0
        self_match = 1 if query_matches(constraint.selector, labels) else 0
        skew = state.match_num[i][codes] + (self_match - state.min_match_num(i))
        too_skewed = ~missing & (skew > constraint.max_skew)
        label_fail |= undecided & missing
        skew_fail |= undecided & too_skewed
        undecided &= ~(missing | too_skewed)
    failures: list[tuple[Status, NDArray[np.bool_]]] = []
    plugin = names.POD_TOPOLOGY_SPREAD
    if label_fail.any():
        status = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=plugin)
        failures.append((status, label_fail))
    if skew_fail.any():
        status = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=plugin)
        failures.append((status, skew_fail))
    if not failures:
        return None
    return FilterResult(undecided, failures)


def update_with_pod(
    state: PreFilterState, other: Pod, nodes: NodeColumns, row: int, delta: int
) -> PreFilterState:
    """Upstream updateWithPod: `other` added to (delta 1) or removed from (delta -1) the node
    at `row`. Returns a new state; `state` is left as it was."""
    pod = state.pod
    if other.metadata.namespace != pod.metadata.namespace:
        return state
    codes = [int(nodes.label(c.topology_key).codes[row]) for c in state.constraints]
    if any(code < 0 for code in codes):
        return state
    match_num = list(state.match_num)
    present = list(state.present)
    domains = list(state.domains)
    paths = list(state.critical_paths)
    labels = other.metadata.labels
    for i, constraint in enumerate(state.constraints):
        if not query_matches(constraint.selector, labels):
            continue
        if not row_included(constraint, pod, nodes, row):
            continue
        code = codes[i]
        match_num[i] = match_num[i].copy()
        match_num[i][code] += delta
        if not present[i][code]:
            present[i] = present[i].copy()
            present[i][code] = True
            domains[i] += 1
        value = nodes.label(constraint.topology_key).values[code]
        paths[i] = paths[i].update(value, int(match_num[i][code]))
    return PreFilterState(
        pod, state.constraints, tuple(match_num), tuple(present), tuple(domains), tuple(paths)
    )
