"""Estimated admission times in quota admission's reasons (services.queue.quota.eta): each waiting
workload's reason ends with "admission estimated in ~Ns", from its position in its queue,
the quota ahead of it, the queue's observed release rate and the rate at which work of a
higher priority arrives; `berth get pods`, `berth describe` and the dashboard show the
reason as it is."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from services.queue.quota.cohorts import Cohort
from services.queue.quota.eta import estimate

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Workload


def estimates(
    self: Admission, cohort: Cohort, queue: str, waiting: Sequence[Workload]
) -> dict[str, str]:
    """Workload key -> "; admission estimated in ~Ns" (absent when unknown)."""
    now = time.time()
    self.releases.watch(now)
    rate = self.releases.rate(queue, now)
    flavors_of = cohort.queues[queue].flavors_of
    available = {
        r: max((cohort.available(queue, (f, r)) for f in flavors), default=0)
        for r, flavors in flavors_of.items()
    }
    out: dict[str, str] = {}
    needed: dict[str, int] = {}
    horizon = self.arrivals.span(now)
    overtaking: dict[int, dict[str, float]] = {}
    """priority -> what arrivals of a higher priority ask for per second."""
    for wl in waiting:
        for resource, amount in wl.request().items():
            needed[resource] = needed.get(resource, 0) + amount
        above = overtaking.get(wl.priority)
        if above is None:
            above = overtaking[wl.priority] = self.arrivals.rate(queue, now, above=wl.priority)
        seconds = estimate(needed, available, rate, above, horizon)
        if seconds is not None and seconds > 0:
            out[wl.key] = f"; admission estimated in ~{seconds:.0f}s"
    return out
