"""Admission fair sharing in quota admission (services.queue.quota.admission_fair): the
LocalQueues' usage
brought up to date from the admitted records before each round (each fair-sharing
ClusterQueue's waiting workloads are ordered by it: backlog.sort_key), and the entry penalty
of each admission."""

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


def admitted(self: Admission, wl: Workload) -> None:
    """`wl` was admitted: its LocalQueue pays the entry penalty (the queue's heap is then
    ordered again, services.queue.quota.backlog.sort_key)."""
    if self.lq_usage is None or not fair(self, wl.queue):
        return
    self.lq_usage.penalize(wl.local_queue, wl.request())
