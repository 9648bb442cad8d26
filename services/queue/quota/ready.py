"""Kueue's waitForPodsReady for quota admission: an admitted workload (a pod, or a gang's
pods together) whose pods are not all bound within `timeout` is evicted (its pods back to
waiting, its quota released) and may be admitted again only after a backoff, `base x 2^(n-1)`
seconds after its n-th requeue, at most `max`; past `backoff_limit` requeues it stays waiting
(Kueue deactivates it). With `block_admission`, nothing else is admitted while an admitted
workload's pods are not all bound yet.

"Ready" is bound here (berth has no kubelet reporting readiness; a node agent will). The
timeout is checked at each admission round: the queue runs one when the cluster changes, and
every second while a workload waits for its pods or a backoff runs out
(services/queue/housekeeping.py), so timeouts and backoffs come due in a quiet cluster too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.queue.config import WaitForPodsReady
from services.queue.quota.effects import admitted_workloads
from services.queue.quota.evict import PODS_READY_TIMEOUT, count_eviction, evict

if TYPE_CHECKING:
    from services.queue.quota.admission import Admission
    from services.queue.quota.workload import Workload


@dataclass
class Readiness:
    policy: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    bound: set[str] = field(default_factory=set)
    """Admitted pods seen bound."""
    requeued: dict[str, int] = field(default_factory=dict)
    """Workload key -> how many times waitForPodsReady requeued it."""
    until: dict[str, float] = field(default_factory=dict)
    """Workload key -> no admission before (epoch seconds)."""
    leaving: set[str] = field(default_factory=set)
    """Pods evicted for a timeout and not released yet."""
    blocking: str = ""
    """The admitted workload whose pods are not ready yet (blockAdmission), or ""."""

    def backoff(self, n: int) -> float:
        return float(min(self.policy.backoff_max_s, self.policy.backoff_base_s * 2 ** (n - 1)))

    def due(self, admitted: Iterable[str], since: float, now: float) -> bool:
        """Whether a round has readiness work: an admitted pod not bound yet (its timeout
        runs), or a backoff that ran out in (since, now] (its workload may come back)."""
        if self.policy.timeout_s <= 0:
            return False
        return any(key not in self.bound for key in admitted) or any(
            since < until <= now for until in self.until.values()
        )

    def waiting_reason(self, wl: Workload, now: float) -> str:
        """Why `wl` may not be admitted now ("" when it may)."""
        n = self.requeued.get(wl.key, 0)
        limit = self.policy.backoff_limit
        if limit is not None and n > limit:
            return (
                f"deactivated: requeued {n} time(s) by waitForPodsReady (backoffLimitCount {limit})"
            )
        left = self.until.get(wl.key, 0.0) - now
        if left > 0:
            return f"requeued {n} time(s) by waitForPodsReady: backoff, {left:.0f}s left"
        if self.blocking:
            return f"waiting for {self.blocking}'s pods to be ready (waitForPodsReady)"
        return ""


async def check(self: Admission) -> None:
    """Evict the admitted workloads whose pods are not ready within the timeout; note which
    one blocks admission."""
    ready = self.readiness
    ready.leaving &= self.admitted.keys()
    ready.bound &= self.admitted.keys()
    ready.blocking = ""
    if ready.policy.timeout_s <= 0:
        return
    now = time.time()
    evicting = set().union(*self.evicting.values()) | self.draining | ready.leaving
    for key, (candidate, pods) in sorted(admitted_workloads(self.admitted, evicting).items()):
        if candidate.evicting or all(p in ready.bound for p in pods):
            continue
        if now - candidate.admitted_at < ready.policy.timeout_s:
            ready.blocking = ready.blocking or (key if ready.policy.block_admission else "")
            self.dirty = True  # look again at the next change
            continue
        n = ready.requeued[key] = ready.requeued.get(key, 0) + 1
        ready.until[key] = now + ready.backoff(n)
        for pod in pods:
            record = self.admitted[pod]
            await evict(self, pod, record["uid"])
            ready.leaving.add(pod)
            count_eviction(self, record, PODS_READY_TIMEOUT)
