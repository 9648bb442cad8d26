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
    groups: dict[str, list[tuple[Any, str]]] = field(default_factory=dict)
    """Shape -> the parked workloads of that shape (sort key, key): one pod set of the same
    requests and placement fits or not as any other of its shape in this queue, so only the
    first comes back when quota is released; the next when one of the shape is admitted."""
    shape_of: dict[str, str] = field(default_factory=dict)
    """Parked workload key -> its group's shape."""
    alone: set[str] = field(default_factory=set)
    """The parked workloads in no group (all come back when quota is released)."""
    _gen: int = 0

    def push(self, key: str, sort_key: Any) -> None:
        """`key` (new, changed or unparked) among the active ones, at `sort_key`."""
        self.parked.discard(key)
        self.shape_of.pop(key, None)
        self.alone.discard(key)
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

    def park(self, key: str, sort_key: Any = None, shape: str | None = None) -> None:
        """`key` inadmissible; in the group of `shape` (its fit is its shape's) if given."""
        self.live.pop(key, None)
        self.parked.add(key)
        if shape is None:
            self.alone.add(key)
            self.shape_of.pop(key, None)
        else:
            self.alone.discard(key)
            self.shape_of[key] = shape
            group = self.groups.setdefault(shape, [])
            heapq.heappush(group, (sort_key, key))
            if len(group) > 2 * len(self.parked) + 64:
                group[:] = [e for e in group if self.shape_of.get(e[1]) == shape]
                heapq.heapify(group)

    def discard(self, key: str) -> None:
        """`key` admitted or gone."""
        self.live.pop(key, None)
        self.parked.discard(key)
        self.shape_of.pop(key, None)
        self.alone.discard(key)

    def unpark(self, workloads: dict[str, Workload], sort_key: SortKey) -> int:
        """The parked workloads back among the active ones (Kueue's
        QueueInadmissibleWorkloads), the first of each shape group only; how many moved."""
        alone = list(self.alone)
        for key in alone:
            if key in workloads:
                self.push(key, sort_key(workloads[key]))
            else:
                self.discard(key)
        return len(alone) + sum(
            self.wake(shape, workloads, sort_key) for shape in list(self.groups)
        )

    def wake(self, shape: str, workloads: dict[str, Workload], sort_key: SortKey) -> int:
        """The first parked workload of `shape` back among the active ones (one of its
        shape was admitted, or quota was released): 1, or 0 when none is parked."""
        group = self.groups.get(shape)
        while group:
            _, key = heapq.heappop(group)
            if self.shape_of.get(key) != shape:
                continue  # a stale entry: active, parked again elsewhere, or gone
            if key not in workloads:
                self.discard(key)
                continue
            self.push(key, sort_key(workloads[key]))
            break
        else:
            self.groups.pop(shape, None)
            return 0
        if not group:
            del self.groups[shape]
        return 1

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
    reasons: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Workload key -> (round, why it waits), as the last round that looked at it found."""
    group_reasons: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    """(ClusterQueue, shape) -> (round, why its shape does not fit): the reason of the parked
    workloads of a group that no later round looked at (a round's own findings stand)."""
    held: dict[str, str] = field(default_factory=dict)
    """Workload key -> its ClusterQueue, parked by waitForPodsReady (back every round)."""
    queues: dict[str, Heads] = field(default_factory=dict)
    """ClusterQueue -> its heads."""

    def heads(self, queue: str) -> Heads:
        found = self.queues.get(queue)
        if found is None:
            found = self.queues[queue] = Heads()
        return found

    def reason(self, queue: str, key: str) -> str | None:
        """Why workload `key` waits: its own reason, or its shape group's when fresher."""
        own = self.reasons.get(key)
        heads = self.queues.get(queue)
        shape = None if heads is None else heads.shape_of.get(key)
        group = None if shape is None else self.group_reasons.get((queue, shape))
        if group is not None and (own is None or group[0] > own[0]):
            return group[1]
        return None if own is None else own[1]

    def forget(self, key: str) -> None:
        """Workload `key` admitted or gone."""
        wl = self.workloads.pop(key, None)
        if wl is not None:
            self.heads(wl.queue).discard(key)
        self.reasons.pop(key, None)
        self.held.pop(key, None)
