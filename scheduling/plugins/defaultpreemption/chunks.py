"""The many-nodes-at-once dry run's bookkeeping: a chunk of nodes evaluated together, and the
candidate lists collected over chunks in rotation order (upstream's dry run stops as soon
as they are full)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.nominated import (
    FilterOutcome,
)
from scheduling.plugins.defaultpreemption.environment import SlotCandidate


@dataclass(slots=True)
class Chunk:
    """Nodes evaluated together, and what SelectVictimsOnNode found on each."""

    rows: NDArray[np.intp]
    """The chunk's rows in rotation order."""
    with_victims: NDArray[np.intp]
    first: FilterOutcome
    """Filter with every potential victim removed, over `with_victims`."""
    victim_slots: NDArray[np.intp]
    victim_rows: NDArray[np.intp]
    victims_per_row: NDArray[np.int64]
    violations_per_row: NDArray[np.int64]

    def candidate(self, row: int) -> SlotCandidate:
        begin = int(np.searchsorted(self.victim_rows, row))
        end = begin + int(self.victims_per_row[row])
        return SlotCandidate(row, self.victim_slots[begin:end], int(self.violations_per_row[row]))


class Collected:
    """The candidate lists of upstream's dry run: each holds at most `wanted` candidates, and
    the walk stops once one candidate violates no PDB and both lists hold `wanted`."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.fine: list[SlotCandidate] = []
        self.bad: list[SlotCandidate] = []
        self.seen_fine = 0
        self.seen_bad = 0
        self.done = False

    def add(self, chunk: Chunk) -> None:
        rows = chunk.rows
        is_candidate = chunk.victims_per_row[rows] > 0
        fine = is_candidate & (chunk.violations_per_row[rows] == 0)
        bad = is_candidate & ~fine
        count_fine = self.seen_fine + np.cumsum(fine)
        count_bad = self.seen_bad + np.cumsum(bad)
        wanted = self.wanted
        done = (count_fine > 0) & (
            np.minimum(count_fine, wanted) + np.minimum(count_bad, wanted) >= wanted
        )
        self.done = bool(done.any())
        stop = int(np.argmax(done)) + 1 if self.done else int(rows.shape[0])
        head = rows[:stop]
        for row in head[fine[:stop]][: wanted - len(self.fine)].tolist():
            self.fine.append(chunk.candidate(int(row)))
        for row in head[bad[:stop]][: wanted - len(self.bad)].tolist():
            self.bad.append(chunk.candidate(int(row)))
        self.seen_fine = int(count_fine[stop - 1]) if stop else self.seen_fine
        self.seen_bad = int(count_bad[stop - 1]) if stop else self.seen_bad
