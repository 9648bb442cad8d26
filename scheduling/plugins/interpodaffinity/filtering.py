"""InterPodAffinity PreFilter and Filter (upstream interpodaffinity/filtering.go).

PreFilter counts, per topology domain (a (topologyKey, value) pair), three things:
- existing_anti: existing pods whose required anti-affinity terms match the incoming pod
  (the symmetry rule: those domains reject the incoming pod);
- affinity: existing pods that match *all* the incoming pod's required affinity terms;
- anti: existing pods that match one of the incoming pod's required anti-affinity terms.

Each count is an int64 array per topology key, indexed by the label column's value code, with
a trailing slot that stays 0 (so indexing with MISSING, -1, reads 0). As upstream, the counts
of different terms with the same topology key are merged into one map.

Filter, per node, in upstream's order: affinity (UnschedulableAndUnresolvable), anti-affinity
(Unschedulable), existing pods' anti-affinity (Unschedulable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.interfaces import FilterResult
from scheduling.framework.status import Status
from scheduling.plugins import names
from scheduling.plugins.podindex import (
    REQUIRED_ANTI_AFFINITY,
    AffinityTerm,
    ClusterObjects,
    PodIndex,
    PodQuery,
    domain_array,
    domain_sums,
    parse_pod_terms,
)
from shared.models import Pod

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

DomainCounts = dict[str, NDArray[np.int64]]
"""topologyKey -> count per value code (+ a trailing 0 slot for nodes without the key)."""


def merge_namespaces(term: AffinityTerm, objects: ClusterObjects) -> AffinityTerm:
    """Upstream mergeAffinityTermNamespacesIfNotEmpty, for the incoming pod's terms: a
    non-empty namespaceSelector is unrolled into `namespaces` (then matches nothing itself);
    an empty one (all namespaces) is kept; so matching never needs namespace labels."""
    selector = term.namespace_selector
    if selector is not None and selector.is_empty():
        return term
    namespaces = set(term.namespaces)
    if selector is not None:
        namespaces.update(
            ns.metadata.name for ns in objects.namespaces() if selector.matches(ns.metadata.labels)
        )
    return replace(term, namespaces=frozenset(namespaces), namespace_selector=None)


def pod_query(term: AffinityTerm) -> PodQuery:
    """A merged incoming term as a PodIndex query (an empty namespaceSelector: any namespace)."""
    any_namespace = term.namespace_selector is not None
    return PodQuery(None if any_namespace else term.namespaces, term.selector)


def matches_all(terms: tuple[AffinityTerm, ...], pod: Pod) -> bool:
    """Upstream podMatchesAllAffinityTerms (merged terms: namespace labels are not needed)."""
    if not terms:
        return False
    ns, labels = pod.metadata.namespace, pod.metadata.labels
    return all(term.matches(ns, labels, {}) for term in terms)


def any_positive(counts: DomainCounts) -> bool:
    """The upstream map is non-empty (it deletes pairs whose count drops to 0)."""
    return any(bool((array != 0).any()) for array in counts.values())


@dataclass(frozen=True, slots=True)
class PreFilterState:
    pod: Pod
    affinity_terms: tuple[AffinityTerm, ...]
    anti_affinity_terms: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str]
    existing_anti: DomainCounts
    affinity: DomainCounts
    anti: DomainCounts

    def is_empty(self) -> bool:
        """Nothing to check: upstream PreFilter returns Skip."""
        return (
            not any_positive(self.existing_anti)
            and not self.affinity_terms
            and not self.anti_affinity_terms
        )


def _add_rows(
    counts: DomainCounts, nodes: NodeColumns, key: str, per_row: NDArray[np.int64]
) -> None:
    sums = domain_sums(nodes, key, per_row)
    if key in counts:
        counts[key] = counts[key] + sums
    else:
        counts[key] = sums


def compute(
    pod: Pod,
    nodes: NodeColumns,
    affinity_terms: tuple[AffinityTerm, ...],
    anti_affinity_terms: tuple[AffinityTerm, ...],
    namespace_labels: Mapping[str, str],
) -> PreFilterState:
    index = PodIndex.of(nodes)
    # Symmetry: existing pods' required anti-affinity terms that match the incoming pod.
    existing: DomainCounts = {}
    hits = index.term_hits(nodes, pod, namespace_labels, (REQUIRED_ANTI_AFFINITY,))
    for key, hit in hits.items():
        codes = nodes.label(key).codes[hit.rows]
        codes = codes[codes >= 0]
        if codes.shape[0]:
            counts = domain_array(nodes, key)
            np.add.at(counts, codes, 1)
            existing[key] = counts
    affinity: DomainCounts = {}
    if affinity_terms:
        # A pod counts only if it matches every term; it then counts once per term.
        query = tuple(pod_query(term) for term in affinity_terms)
        per_row = index.row_counts(nodes, query, skip_terminating=False)
        if per_row.any():
            for term in affinity_terms:
                _add_rows(affinity, nodes, term.topology_key, per_row)
    anti: DomainCounts = {}
    for term in anti_affinity_terms:
        per_row = index.row_counts(nodes, (pod_query(term),), skip_terminating=False)
        if per_row.any():
            _add_rows(anti, nodes, term.topology_key, per_row)
    return PreFilterState(
        pod, affinity_terms, anti_affinity_terms, namespace_labels, existing, affinity, anti
    )


def _reject_positive(
    counts: DomainCounts, nodes: NodeColumns, rows: Rows, keys: list[str], size: int
) -> NDArray[np.bool_]:
    rejected = np.zeros(size, dtype=np.bool_)
    for key in dict.fromkeys(keys):
        domain = counts.get(key)
        if domain is not None:
            rejected |= domain[nodes.label(key).codes[rows]] > 0
    return rejected


def filter_rows(state: PreFilterState, nodes: NodeColumns, rows: Rows) -> FilterResult | None:
    size = nodes.size_of(rows)
    # Affinity: every term's topology key must be on the node, and (unless this is the first
    # pod of a self-affine group) each term's domain must hold a matching pod.
    affinity_fail = np.zeros(size, dtype=np.bool_)
    if state.affinity_terms:
        missing = np.zeros(size, dtype=np.bool_)
        empty_domain = np.zeros(size, dtype=np.bool_)
        for term in state.affinity_terms:
            codes = nodes.label(term.topology_key).codes[rows]
            missing |= codes < 0
            domain = state.affinity.get(term.topology_key)
            empty_domain |= True if domain is None else domain[codes] <= 0
        first_of_group = not any_positive(state.affinity) and matches_all(
            state.affinity_terms, state.pod
        )
        affinity_fail = missing if first_of_group else missing | empty_domain
    anti_fail = _reject_positive(
        state.anti, nodes, rows, [t.topology_key for t in state.anti_affinity_terms], size
    )
    existing_fail = _reject_positive(
        state.existing_anti, nodes, rows, list(state.existing_anti), size
    )
    anti_fail &= ~affinity_fail
    existing_fail &= ~(affinity_fail | anti_fail)
    failures: list[tuple[Status, NDArray[np.bool_]]] = []
    plugin = names.INTER_POD_AFFINITY
    if affinity_fail.any():
        status = Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=plugin)
        failures.append((status, affinity_fail))
    if anti_fail.any():
        status = Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=plugin)
        failures.append((status, anti_fail))
    if existing_fail.any():
        reason = ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
        failures.append((Status.unschedulable(reason, plugin=plugin), existing_fail))
    if not failures:
        return None
    return FilterResult(~(affinity_fail | anti_fail | existing_fail), failures)


def _bump(counts: DomainCounts, nodes: NodeColumns, key: str, row: int, delta: int) -> None:
    code = int(nodes.label(key).codes[row])
    if code < 0:
        return
    array = counts.get(key)
    array = domain_array(nodes, key) if array is None else array.copy()
    array[code] += delta
    counts[key] = array


def update_with_pod(
    state: PreFilterState, other: Pod, nodes: NodeColumns, row: int, delta: int
) -> PreFilterState:
    """Upstream preFilterState.updateWithPod: `other` added to (delta 1) or removed from
    (delta -1) the node at `row`. Returns a new state; `state` is left as it was."""
    existing = dict(state.existing_anti)
    affinity = dict(state.affinity)
    anti = dict(state.anti)
    pod = state.pod
    ns, labels = pod.metadata.namespace, pod.metadata.labels
    for term in parse_pod_terms(other).required_anti_affinity:
        if term.matches(ns, labels, state.namespace_labels):
            _bump(existing, nodes, term.topology_key, row, delta)
    if matches_all(state.affinity_terms, other):
        for term in state.affinity_terms:
            _bump(affinity, nodes, term.topology_key, row, delta)
    other_ns, other_labels = other.metadata.namespace, other.metadata.labels
    for term in state.anti_affinity_terms:
        if term.matches(other_ns, other_labels, {}):
            _bump(anti, nodes, term.topology_key, row, delta)
    return PreFilterState(
        pod,
        state.affinity_terms,
        state.anti_affinity_terms,
        state.namespace_labels,
        existing,
        affinity,
        anti,
    )
