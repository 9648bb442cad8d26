"""Quota admission's waiting workloads as Kueue's queue manager keeps them
(kubernetes-sigs/kueue pkg/queue/cluster_queue.go), kept up to date on each pod change
instead of rebuilt every round.

Per ClusterQueue (`Heads`): a heap of the *active* workloads, in the queue's order (priority,
then creation time; LocalQueue usage first under admission fair sharing), and the
*inadmissible* (`parked`) ones. A round looks at heads only: a BestEffortFIFO head that does
not fit is parked and the next one becomes the head; a StrictFIFO head that does not fit stays
and blocks its queue. A parked workload is not looked at again until something may have made
room for it: quota released in its cohort tree (a workload finished, deleted or evicted), the
quota objects reloaded (a ClusterQueue, Cohort, ResourceFlavor, LocalQueue, Namespace or
PodGroup changed), or the workload itself changed (a gang's pod came). Those held by
waitForPodsReady (backoff, blockAdmission) are looked at again every round (they wait for
time, not quota).

`Backlog`: every waiting workload by key, the workload of each pending pod, the pods that have
none (no ClusterQueue, unreadable) with why, the last reason found for each workload, and one
`Heads` per ClusterQueue.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from services.queue.quota.workload import Workload

SortKey = Callable[[Workload], Any]


@dataclass
class Heads:
    """One ClusterQueue's waiting workloads: the active heap and the parked set."""

    heap: list[tuple[Any, int, str]] = field(default_factory=list)
    """(sort key, generation, workload key); an entry is stale unless `live` has its generation."""
    live: dict[str, int] = field(default_factory=dict)
    """Active workload key -> the generation of its heap entry."""
    parked: set[str] = field(default_factory=set)
    """Inadmissible workloads (Kueue's inadmissibleWorkloads)."""
    _gen: int = 0

    def push(self, key: str, sort_key: Any) -> None:
        """`key` (new, changed or unparked) among the active ones, at `sort_key`."""
        self.parked.discard(key)
        self._gen += 1
        self.live[key] = self._gen
        heapq.heappush(self.heap, (sort_key, self._gen, key))
        if len(self.heap) > 2 * len(self.live) + 64:  # drop stale entries now and then
            self.heap = [e for e in self.heap if self.live.get(e[2]) == e[1]]
            heapq.heapify(self.heap)

    def head(self) -> str | None:
        """The first active workload, or None."""
        heap = self.heap
        while heap:
            _, gen, key = heap[0]
            if self.live.get(key) == gen:
                return key
            heapq.heappop(heap)
        return None

    def park(self, key: str) -> None:
        self.live.pop(key, None)
        self.parked.add(key)

    def discard(self, key: str) -> None:
        """`key` admitted or gone."""
        self.live.pop(key, None)
        self.parked.discard(key)

    def unpark(self, workloads: dict[str, Workload], sort_key: SortKey) -> int:
        """Every parked workload back among the active ones (Kueue's
        QueueInadmissibleWorkloads); how many moved."""
        moved = [key for key in self.parked if key in workloads]
        for key in moved:
            self.push(key, sort_key(workloads[key]))
        self.parked.clear()
        return len(moved)

    def reorder(self, workloads: dict[str, Workload], sort_key: SortKey) -> None:
        """The active heap again with fresh sort keys (admission fair sharing's order moves
        with the LocalQueues' usage)."""
        self.heap = []
        for key in list(self.live):
            wl = workloads.get(key)
            if wl is None:
                del self.live[key]
                continue
            self._gen += 1
            self.live[key] = self._gen
            self.heap.append((sort_key(wl), self._gen, key))
        heapq.heapify(self.heap)

    def __iter__(self) -> Iterator[str]:
        """Every waiting workload of the queue, active or parked (no order)."""
        yield from self.live
        yield from self.parked

    def __len__(self) -> int:
        return len(self.live) + len(self.parked)


@dataclass
class Backlog:
    workloads: dict[str, Workload] = field(default_factory=dict)
    of_pod: dict[str, str] = field(default_factory=dict)
    """Pending pod key -> its workload's key."""
    unqueued: dict[str, str] = field(default_factory=dict)
    """Pending pod key -> why it has no workload (no ClusterQueue, unreadable)."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Workload key -> why it waits, as the last round that looked at it found."""
    held: dict[str, str] = field(default_factory=dict)
    """Workload key -> its ClusterQueue, parked by waitForPodsReady (back every round)."""
    queues: dict[str, Heads] = field(default_factory=dict)
    """ClusterQueue -> its heads."""

    def heads(self, queue: str) -> Heads:
        found = self.queues.get(queue)
        if found is None:
            found = self.queues[queue] = Heads()
        return found

    def forget(self, key: str) -> None:
        """Workload `key` admitted or gone."""
        wl = self.workloads.pop(key, None)
        if wl is not None:
            self.heads(wl.queue).discard(key)
        self.reasons.pop(key, None)
        self.held.pop(key, None)
