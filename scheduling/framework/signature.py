"""Scheduling signatures: what a cycle reads of a pod, and how plugins declare their reuse.

Two pods with the same `pod_signature` get the same Filter verdicts and Score results on every
node (given the same cluster), so the signature cache (reuse.py) evaluates them once and keeps
them current. Every PreFilter, Filter, PreScore and Score plugin declares `signature_reuse`:

- NODE_LOCAL: its pre-state depends on the pod alone, a row's verdict and raw score on that
  row alone (the row's node, and its pods through their requests, ports and volumes), and its
  NormalizeScore (if any) on the row's raw score and the minimum and maximum raw score over the
  scored rows.
- WHEN_SKIPPED: it reads other nodes' pods (inter-pod affinity, topology spread, gangs). It is
  evaluated in full every cycle, beside the reused results of the others, unless it returns
  Skip at PreFilter and PreScore (its Skip depends on the pod, on pods with inter-pod terms
  and on cluster objects, whose changes `NodeColumns` counts).

A plugin without the attribute (out of tree) turns reuse off for its profile.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from sortedcontainers import SortedList

from shared.models import Container, Pod

Reuse = Literal["node-local", "when-skipped"]
NODE_LOCAL: Reuse = "node-local"
WHEN_SKIPPED: Reuse = "when-skipped"

Signature = Hashable
Int64s = NDArray[np.int64]


def pod_signature(pod: Pod) -> Signature | None:
    """What the cycle reads of `pod`, as a hashable value; None when the pod must take the
    full path (a nominated node is tried before the search)."""
    if pod.status.nominated_node_name:
        return None
    return _signature(pod, pod.spec.node_name)


def placed_signature(pod: Pod) -> Signature:
    """The signature a pod counted on a node had while it waited (its binding and any
    nomination set aside). A pod counted on a row whose placed signature is a signature's
    own changes the row as one more pod of that signature would: the same requests, ports,
    labels and terms (kept.py promotes the row from its look-ahead, whoever placed it)."""
    return _signature(pod, "")


def _signature(pod: Pod, node_name: str) -> Signature:
    meta, spec = pod.metadata, pod.spec
    return (
        spec.scheduler_name,
        meta.namespace,
        _items(meta.labels),
        tuple((o.api_version, o.kind, o.name, o.controller) for o in meta.owner_references),
        spec.priority,
        node_name,
        spec.host_network,
        _items(spec.node_selector),
        _items(spec.overhead),
        tuple(_container(c) for c in spec.containers),
        tuple(_container(c) for c in spec.init_containers),
        repr(spec.affinity) if spec.affinity is not None else "",
        repr(spec.tolerations) if spec.tolerations else "",
        repr(spec.topology_spread_constraints) if spec.topology_spread_constraints else "",
    )


def _items(mapping: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(mapping.items())) if mapping else ()


def _container(c: Container) -> tuple[Any, ...]:
    ports = tuple((p.container_port, p.host_port, p.host_ip, p.protocol) for p in c.ports)
    resources = c.resources
    return (c.image, _items(resources.requests), _items(resources.limits), ports, c.restart_policy)


class BestRows:
    """The feasible rows by total: the highest total and its rows in ascending order.

    `add`, `remove` and `pick` cost O(log N): one sorted list per distinct total, and a heap
    of totals whose lists are non-empty (stale totals are dropped lazily).
    """

    def __init__(self, rows: NDArray[np.intp], totals: Int64s) -> None:
        self._rows: dict[int, SortedList[int]] = {}
        self.size = int(rows.shape[0])
        order = np.lexsort((rows, totals))
        grouped_rows = rows[order].tolist()
        grouped_totals = totals[order].tolist()
        start = 0
        for i in range(1, len(grouped_rows) + 1):
            if i == len(grouped_rows) or grouped_totals[i] != grouped_totals[start]:
                self._rows[grouped_totals[start]] = SortedList(grouped_rows[start:i])
                start = i
        self._heap = [-total for total in self._rows]
        heapq.heapify(self._heap)

    def add(self, row: int, total: int) -> None:
        bucket = self._rows.get(total)
        if bucket is None:
            self._rows[total] = SortedList((row,))
            heapq.heappush(self._heap, -total)
        else:
            bucket.add(row)
        self.size += 1

    def remove(self, row: int, total: int) -> None:
        bucket = self._rows[total]
        bucket.remove(row)
        if not bucket:
            del self._rows[total]
        self.size -= 1

    def top(self) -> SortedList[int]:
        """The rows with the highest total, ascending (the heap's stale tops are dropped)."""
        while True:
            bucket = self._rows.get(-self._heap[0])
            if bucket is not None:
                return bucket
            heapq.heappop(self._heap)
