"""Admission fair sharing in quota admission (services.queue.quota.admission_fair): the
LocalQueues' usage
brought up to date from the admitted records before each round, each fair-sharing
ClusterQueue's waiting workloads ordered by it, and the entry penalty of each admission."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING

from shared.models.kueue import USAGE_BASED

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Workload


def refresh(self: Admission) -> None:
    """Decay each LocalQueue's usage over the time since the last round, with what its
    admitted pods hold now."""
    if self.lq_usage is None:
        return
    current: dict[str, float] = defaultdict(float)
    for rec in self.admitted.values():
        lq = rec.get("lq")
        if lq:
            amounts = {fld.split("|", 2)[2]: int(a) for fld, a in rec["charge"].items()}
            current[lq] += self.lq_usage.value(amounts)
    self.lq_usage.advance(time.time(), current)


def fair(self: Admission, queue: str) -> bool:
    scope = self.queues[queue].spec.admission_scope
    return self.lq_usage is not None and scope is not None and scope.admission_mode == USAGE_BASED


def order(self: Admission, queue: str, waiting: list[Workload]) -> None:
    """Least-used LocalQueue first (then priority and creation), in place."""
    if self.lq_usage is None or not fair(self, queue):
        return
    usage = self.lq_usage
    waiting.sort(
        key=lambda w: (usage.key(w.local_queue, self.lq_weights.get(w.local_queue, 1.0)), w.order)
    )


def admitted(self: Admission, wl: Workload, waiting: list[Workload]) -> None:
    """`wl` was admitted: its LocalQueue pays the entry penalty; the rest is ordered again."""
    if self.lq_usage is None or not fair(self, wl.queue):
        return
    self.lq_usage.penalize(wl.local_queue, wl.request())
    order(self, wl.queue, waiting)
