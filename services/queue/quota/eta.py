"""Estimated admission time of a waiting workload, pure: how long until the quota held in its
ClusterQueue frees enough for it and for the workloads ahead of it, at the rate the queue
has been giving quota back lately (its observed throughput: berth does not know runtimes).

For each resource the workload requests: short = (requests of the workloads ahead of it and
its own) - (what the queue may take now); the estimate is the largest short / released per
second over the last `window` seconds. None when the queue has released none of a resource
it is short of (nothing to extrapolate from).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass
class Releases:
    """What each ClusterQueue gave back lately, per resource."""

    window_s: float = WINDOW_S
    events: dict[str, deque[tuple[float, Mapping[str, int]]]] = field(default_factory=dict)
    since: float | None = None
    """When releases were first watched (a shorter history is a shorter window)."""

    def record(self, queue: str, at: float, amounts: Mapping[str, int]) -> None:
        if self.since is None:
            self.since = at
        self.events.setdefault(queue, deque()).append((at, amounts))

    def watch(self, now: float) -> None:
        if self.since is None:
            self.since = now

    def rate(self, queue: str, now: float) -> dict[str, float]:
        """Released per second, per resource, over the window."""
        events = self.events.get(queue)
        if not events or self.since is None:
            return {}
        while events and events[0][0] < now - self.window_s:
            events.popleft()
        span = min(self.window_s, now - self.since)
        if span <= 0:
            return {}
        out: dict[str, float] = {}
        for _, amounts in events:
            for resource, amount in amounts.items():
                out[resource] = out.get(resource, 0.0) + amount
        return {r: a / span for r, a in out.items()}


def estimate(
    needed: Mapping[str, int], available: Mapping[str, int], rate: Mapping[str, float]
) -> float | None:
    """Seconds until `needed` (the workloads ahead and this one) fits (see the module
    docstring); 0 when it fits now."""
    worst = 0.0
    for resource, amount in needed.items():
        short = amount - available.get(resource, 0)
        if short <= 0:
            continue
        per_s = rate.get(resource, 0.0)
        if per_s <= 0:
            return None
        worst = max(worst, short / per_s)
    return worst
