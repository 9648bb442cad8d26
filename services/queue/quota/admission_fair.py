"""Admission fair sharing (Kueue's AdmissionFairSharing, KEP-4136), pure: within a
ClusterQueue whose admissionScope.admissionMode is UsageBasedAdmissionFairSharing, workloads
of the LocalQueue that has used the least lately go first.

A LocalQueue's usage is an exponentially decayed average of what its admitted workloads hold:
over `dt` seconds it becomes `usage x d + current x (1 - d)` with `d = 0.5 ** (dt /
halfLife)`, `current` the sum over resources of weight x amount (berth's units: milli-CPU,
bytes, counts; weight 1 unless configured, as Kueue's resourceWeights). Admitting a workload
adds an entry penalty, what it would add over one sampling interval, so that a burst of
admissions in one round alternates between LocalQueues. The order key is usage / the
LocalQueue's fairSharing weight (weight 0: last).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.models.kueue import USAGE_BASED

__all__ = ["USAGE_BASED", "LocalQueueUsage"]


@dataclass
class LocalQueueUsage:
    half_life_s: float
    sampling_s: float = 300.0
    weights: Mapping[str, float] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    """LocalQueue "namespace/name" -> its decayed usage."""
    at: float | None = None

    def value(self, request: Mapping[str, int]) -> float:
        return sum(self.weights.get(r, 1.0) * a for r, a in request.items())

    def _decay(self, seconds: float) -> float:
        return 0.5 ** (max(0.0, seconds) / self.half_life_s) if self.half_life_s > 0 else 0.0

    def advance(self, now: float, current: Mapping[str, float]) -> None:
        """`seconds` have passed with `current` usage held (per LocalQueue) since the last call."""
        if self.at is None:
            self.at = now
            return
        d = self._decay(now - self.at)
        for lq in set(self.usage) | set(current):
            self.usage[lq] = self.usage.get(lq, 0.0) * d + current.get(lq, 0.0) * (1 - d)
        self.at = now

    def penalize(self, lq: str, request: Mapping[str, int]) -> None:
        """A workload of `lq` was admitted: its entry penalty."""
        penalty = self.value(request) * (1 - self._decay(self.sampling_s))
        self.usage[lq] = self.usage.get(lq, 0.0) + penalty

    def key(self, lq: str, weight: float) -> float:
        if weight <= 0:
            return math.inf
        return self.usage.get(lq, 0.0) / weight
