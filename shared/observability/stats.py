"""Recent throughput and enqueue-to-bound latency, from facts the pipeline already records.

Where the facts live: the queue stamps a pod when it first enqueues it (its state's
initial_attempt_timestamp, carried by every schedule request on `berth.schedule` as `its`), and
the binder publishes a "scheduled" outcome on `berth.outcomes` once the binding is stored (the
record's timestamp, in ms, is when). The store keeps no time: its change-stream ids are
"<resourceVersion>-0". `BindingLog` takes both feeds, in any order, and answers for a window:
pods bound per second, and latency percentiles over the bound pods whose enqueue it saw.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_WINDOW_SECONDS = 60.0
DEFAULT_HORIZON_SECONDS = 900.0
"""How long an enqueue time is kept waiting for its binding."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


@dataclass(frozen=True, slots=True)
class RecentStats:
    window_seconds: float
    """The span the rate is over: the window, or less when the log is younger."""
    bound: int
    pods_per_second: float
    latency_samples: int
    """Bound pods whose enqueue time is known (the latency percentiles are over these)."""
    latency_p50_ms: float | None
    latency_p99_ms: float | None

    def to_json(self) -> dict[str, Any]:
        def ms(value: float | None) -> float | None:
            return None if value is None else round(value, 1)

        return {
            "windowSeconds": round(self.window_seconds, 1),
            "bound": self.bound,
            "podsPerSecond": round(self.pods_per_second, 2),
            "latencySamples": self.latency_samples,
            "latencyP50Ms": ms(self.latency_p50_ms),
            "latencyP99Ms": ms(self.latency_p99_ms),
        }


class BindingLog:
    """Enqueue times by pod uid and recent bindings; see the module docstring."""

    def __init__(
        self,
        since: float,
        *,
        window: float = DEFAULT_WINDOW_SECONDS,
        horizon: float = DEFAULT_HORIZON_SECONDS,
    ) -> None:
        self.since = since
        """Epoch seconds from which the log holds every binding."""
        self.window = window
        self.horizon = horizon
        self._enqueued: OrderedDict[str, float] = OrderedDict()
        self._bound: deque[tuple[float, str]] = deque()

    def enqueued(self, uid: str, at: float) -> None:
        """A schedule request: the pod `uid` was first enqueued at `at`."""
        if uid not in self._enqueued and at > 0:
            self._enqueued[uid] = at

    def bound(self, uid: str, at: float) -> None:
        """A "scheduled" outcome: the pod was bound at `at`."""
        self._bound.append((at, uid))

    def prune(self, now: float) -> None:
        cutoff = now - self.window
        while self._bound and self._bound[0][0] < cutoff:
            self._bound.popleft()
        oldest = now - self.horizon
        while self._enqueued and next(iter(self._enqueued.values())) < oldest:
            self._enqueued.popitem(last=False)

    def stats(self, now: float) -> RecentStats:
        self.prune(now)
        cutoff = now - self.window
        recent = [(at, uid) for at, uid in self._bound if cutoff <= at <= now]
        latencies = [
            (at - self._enqueued[uid]) * 1000 for at, uid in recent if uid in self._enqueued
        ]
        span = max(1e-3, min(self.window, now - self.since))
        return RecentStats(
            window_seconds=span,
            bound=len(recent),
            pods_per_second=len(recent) / span,
            latency_samples=len(latencies),
            latency_p50_ms=percentile(latencies, 50) if latencies else None,
            latency_p99_ms=percentile(latencies, 99) if latencies else None,
        )
