"""criticalPaths (upstream podtopologyspread/filtering.go).

Per constraint, the two topology values with the fewest matching pods: [0] always holds the
minimum; [1] is >= [0] but, after updates, not guaranteed to be the second minimum. Two are
enough because preemption removes pods from one node at a time, on its own copy of the state.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_INT32 = 2**31 - 1
"""newCriticalPaths' initial MatchNum (math.MaxInt32)."""


@dataclass(frozen=True, slots=True)
class CriticalPath:
    topology_value: str = ""
    match_num: int = MAX_INT32


@dataclass(frozen=True, slots=True)
class CriticalPaths:
    first: CriticalPath = CriticalPath()
    second: CriticalPath = CriticalPath()

    def update(self, value: str, num: int) -> CriticalPaths:
        """criticalPaths.update as a value: the paths after `value` now holds `num` pods."""
        first, second = self.first, self.second
        if value == first.topology_value:
            first = CriticalPath(value, num)
        elif value == second.topology_value:
            second = CriticalPath(value, num)
        elif num < first.match_num:
            return CriticalPaths(CriticalPath(value, num), first)
        elif num < second.match_num:
            return CriticalPaths(first, CriticalPath(value, num))
        else:
            return self
        if first.match_num > second.match_num:
            first, second = second, first
        return CriticalPaths(first, second)

    def as_pairs(self) -> list[tuple[str, int]]:
        return [
            (self.first.topology_value, self.first.match_num),
            (self.second.topology_value, self.second.match_num),
        ]
