"""InterPodAffinity PreScore, Score and NormalizeScore (upstream interpodaffinity/scoring.go).

PreScore builds a score per topology domain from every existing pod:
- the incoming pod's preferred affinity terms: +weight per existing pod matching a term,
  preferred anti-affinity terms: -weight;
- existing pods' terms that match the incoming pod (symmetry): required affinity
  +hardPodAffinityWeight (when > 0), preferred affinity +weight, preferred anti-affinity -weight.
Score sums, over the topology keys, the score of the node's domain. NormalizeScore maps
[min, max] onto [0, 100] in float64 and truncates, as upstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.interfaces import MAX_NODE_SCORE
from scheduling.plugins.interpodaffinity.filtering import DomainCounts, pod_query
from scheduling.plugins.podindex import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    PodIndex,
    WeightedAffinityTerm,
    domain_array,
    domain_sums,
)
from shared.models import Pod


@dataclass(frozen=True, slots=True)
class PreScoreState:
    topology_score: DomainCounts
    """topologyKey -> score per value code (+ trailing 0 slot); only keys that got a score."""


def compute(
    pod: Pod,
    nodes: NodeColumns,
    preferred_affinity: tuple[WeightedAffinityTerm, ...],
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...],
    namespace_labels: Mapping[str, str],
    hard_pod_affinity_weight: int,
) -> PreScoreState:
    """The incoming terms must have their namespaceSelector merged (see merge_namespaces)."""
    index = PodIndex.of(nodes)
    scores: DomainCounts = {}
    for sign, weighted_terms in ((1, preferred_affinity), (-1, preferred_anti_affinity)):
        for weighted in weighted_terms:
            term = weighted.term
            per_row = index.row_counts(nodes, (pod_query(term),), skip_terminating=False)
            keep = per_row > 0
            if not (keep & (nodes.label(term.topology_key).codes >= 0)).any():
                continue  # no matching pod on a node with the key: no map entry upstream
            sums = domain_sums(nodes, term.topology_key, per_row * (sign * weighted.weight))
            key = term.topology_key
            scores[key] = scores[key] + sums if key in scores else sums
    kinds: tuple[int, ...] = (PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY)
    if hard_pod_affinity_weight > 0:
        kinds = (REQUIRED_AFFINITY, *kinds)
    for key, hits in index.term_hits(nodes, pod, namespace_labels, kinds).items():
        codes = nodes.label(key).codes[hits.rows]
        keep = codes >= 0
        if not keep.any():
            continue
        weights = np.where(
            hits.kinds == REQUIRED_AFFINITY,
            hard_pod_affinity_weight,
            np.where(hits.kinds == PREFERRED_ANTI_AFFINITY, -hits.weights, hits.weights),
        )
        array = scores.get(key)
        array = domain_array(nodes, key) if array is None else array.copy()
        np.add.at(array, codes[keep], weights[keep])
        scores[key] = array
    return PreScoreState(scores)


def score_rows(state: PreScoreState, nodes: NodeColumns, rows: Rows) -> NDArray[np.int64]:
    scores = np.zeros(nodes.size_of(rows), dtype=np.int64)
    for key, domain in state.topology_score.items():
        scores += domain[nodes.label(key).codes[rows]]
    return scores


def normalize(scores: NDArray[np.int64]) -> NDArray[np.int64]:
    """Upstream NormalizeScore: MaxNodeScore * (s - min) / (max - min) in float64,
    truncated; all 0 when max == min."""
    if scores.shape[0] == 0:
        return scores.copy()
    low = int(scores.min())
    spread = int(scores.max()) - low
    if spread <= 0:
        return np.zeros_like(scores)
    fractions = (scores - low).astype(np.float64) / float(spread)
    return (float(MAX_NODE_SCORE) * fractions).astype(np.int64)
