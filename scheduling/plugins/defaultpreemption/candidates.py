"""Preemption candidates and how upstream picks one (pickOneNodeForPreemption).

Among candidate nodes, in order, keep the nodes with the best value of each criterion until one
is left:
1. fewest PDB violations;
2. lowest priority of the most important victim;
3. smallest sum of victim priorities (each shifted by 2^31 so that more negative-priority
   victims never look cheaper than fewer);
4. fewest victims;
5. latest start time among the highest-priority victims (their earliest start; not started
   counts as now);
6. then the first remaining candidate (upstream: the first in Go map order, i.e. arbitrary).

Victims are kept in order of importance (priority descending, then earlier start first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shared.models import Pod, priority_of

PRIORITY_SHIFT = 2**31
"""math.MaxInt32 + 1: makes every int32 priority non-negative in the sum."""


@dataclass(slots=True)
class Candidate:
    """A node where evicting `victims` lets the preemptor fit."""

    node_name: str
    victims: list[Pod]
    num_pdb_violations: int = 0


def pod_start_time(pod: Pod, now: float) -> float:
    """Upstream GetPodStartTime: status.startTime, or now when the pod has not started."""
    start = pod.status.start_time
    return now if start is None else start


def more_important_pod(a: Pod, b: Pod, now: float) -> bool:
    """Upstream MoreImportantPod: higher priority, then the older (earlier started) pod."""
    pa, pb = priority_of(a), priority_of(b)
    if pa != pb:
        return pa > pb
    return pod_start_time(a, now) < pod_start_time(b, now)


@dataclass(slots=True)
class CandidateTable:
    """Candidates as arrays: victims of candidate i are victim_* [offsets[i]:offsets[i+1]],
    most important first."""

    num_pdb_violations: NDArray[np.int64]
    offsets: NDArray[np.intp]
    victim_priority: NDArray[np.int64]
    victim_start: NDArray[np.float64]

    @staticmethod
    def from_candidates(candidates: Sequence[Candidate], now: float) -> CandidateTable:
        counts = [len(c.victims) for c in candidates]
        offsets = np.zeros(len(candidates) + 1, dtype=np.intp)
        offsets[1:] = np.cumsum(counts)
        victims = [p for c in candidates for p in c.victims]
        return CandidateTable(
            np.array([c.num_pdb_violations for c in candidates], dtype=np.int64),
            offsets,
            np.array([priority_of(p) for p in victims], dtype=np.int64),
            np.array([pod_start_time(p, now) for p in victims], dtype=np.float64),
        )


def pick_one(table: CandidateTable) -> int:
    """The index of the chosen candidate (-1 when there is none). Every candidate must have at
    least one victim."""
    n = int(table.num_pdb_violations.shape[0])
    if n == 0:
        return -1
    if n == 1:
        return 0
    starts = table.offsets[:-1]
    counts = np.diff(table.offsets)
    owner = np.repeat(np.arange(n), counts)
    highest = np.maximum.reduceat(table.victim_priority, starts)
    criteria: list[Callable[[], NDArray[np.float64] | NDArray[np.int64]]] = [
        lambda: -table.num_pdb_violations,
        lambda: -highest,
        lambda: -np.add.reduceat(table.victim_priority + PRIORITY_SHIFT, starts),
        lambda: -counts.astype(np.int64),
        lambda: _earliest_start_of_highest(table, starts, owner, highest),
    ]
    alive = np.ones(n, dtype=np.bool_)
    for criterion in criteria:
        score = criterion()
        best = score[alive].max()
        alive &= score == best
        if int(alive.sum()) == 1:
            break
    return int(np.flatnonzero(alive)[0])


def _earliest_start_of_highest(
    table: CandidateTable,
    starts: NDArray[np.intp],
    owner: NDArray[np.int64],
    highest: NDArray[np.int64],
) -> NDArray[np.float64]:
    """Upstream GetEarliestPodStartTime: earliest start among each node's top-priority victims."""
    top = table.victim_priority == highest[owner]
    start = np.where(top, table.victim_start, np.inf)
    earliest: NDArray[np.float64] = np.minimum.reduceat(start, starts)
    return earliest


def pick_one_node_for_preemption(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """Upstream SelectCandidate over Candidate objects."""
    index = pick_one(CandidateTable.from_candidates(candidates, now))
    return None if index < 0 else candidates[index]


def num_candidates(num_nodes: int, min_percentage: int, min_absolute: int) -> int:
    """Upstream calculateNumCandidates: the dry run stops after this many candidates (once one
    of them violates no PDB)."""
    n = (num_nodes * min_percentage) // 100
    n = max(n, min_absolute)
    return min(n, num_nodes)
