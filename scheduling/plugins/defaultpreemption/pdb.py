"""Which potential victims would violate a PodDisruptionBudget (filterPodsWithPDBViolation).

Per node, victims are walked in order of importance; each budget that selects a victim (same
namespace, non-empty selector, the pod not already in its disruptedPods) spends one of its
status.disruptionsAllowed; a victim is violating when any of its budgets goes below zero.
Budgets are counted per node: every node starts from the budgets' current status.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.pod_index import PodIndex
from shared.lifecycle.eviction import disrupted_pods_of
from shared.models import LabelSelector, Pod, PodDisruptionBudget


def pdb_violations(
    index: PodIndex,
    slots: NDArray[np.intp],
    rows: NDArray[np.intp],
    pdbs: Sequence[PodDisruptionBudget],
) -> NDArray[np.bool_]:
    """For victims grouped by row (rows non-decreasing) and, within a row, most important
    first: whether evicting each one violates a budget."""
    violating = np.zeros(slots.shape[0], dtype=np.bool_)
    if not pdbs or slots.shape[0] == 0:
        return violating
    labelled = index.has_labels[slots]
    namespaces = index.namespace[slots]
    for pdb in pdbs:
        selector = pdb.spec.selector
        if selector is None or selector.is_empty():
            continue
        code = index.namespace_codes.get(pdb.metadata.namespace)
        if code is None:
            continue
        maybe = np.flatnonzero(labelled & (namespaces == code))
        if maybe.shape[0] == 0:
            continue
        disrupted = disrupted_pods_of(pdb)
        matched = np.fromiter(
            (_selected(index.pod(int(s)), selector, disrupted) for s in slots[maybe].tolist()),
            dtype=np.bool_,
            count=maybe.shape[0],
        )
        hits = maybe[matched]
        if hits.shape[0] == 0:
            continue
        hit_rows = rows[hits]
        rank = np.arange(hits.shape[0]) - np.searchsorted(hit_rows, hit_rows)
        violating[hits[rank >= pdb.status.disruptions_allowed]] = True
    return violating


def _selected(pod: Pod, selector: LabelSelector, disrupted: dict[str, float]) -> bool:
    return selector.matches(pod.metadata.labels) and pod.metadata.name not in disrupted


def split_by_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[Pod], list[Pod]]:
    """Upstream filterPodsWithPDBViolation for one node's pods in the given order:
    (violating, non-violating), each keeping that order."""
    allowed = [pdb.status.disruptions_allowed for pdb in pdbs]
    violating: list[Pod] = []
    fine: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.metadata.labels:
            for i, pdb in enumerate(pdbs):
                if pdb.metadata.namespace != pod.metadata.namespace:
                    continue
                selector = pdb.spec.selector
                if selector is None or selector.is_empty():
                    continue
                if not selector.matches(pod.metadata.labels):
                    continue
                if pod.metadata.name in disrupted_pods_of(pdb):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine
