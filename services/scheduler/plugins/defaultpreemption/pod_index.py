"""PodIndex: the pods bound to a NodeColumns as columns, one slot per pod.

Preemption asks, for every node at once, "which pods have lower priority than P, what do they
request, in which order would they be reprieved". Walking 20,000 Pod objects per decision costs
more than the whole 20 ms budget, so the index keeps priority, start time, requests and row per
pod in numpy arrays and follows the NodeColumns incrementally:

- a row whose pod list is a different object or has another length has changed (NodeColumns
  appends on add and builds a new list on remove); only changed rows are re-read, and pods
  still present keep their slot;
- a rebuilt NodeColumns (rows moved: a new `names` list) or new resource columns rebuild the
  whole index.

`row_slots[row]` lists the row's slots in `pods_by_node[row]` order.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numpy.typing import NDArray

from services.scheduler.framework.columns import NodeColumns
from shared.models import Pod, priority_of
from shared.models.resources import non_zero_requests, pod_requests


def has_host_ports(pod: Pod) -> bool:
    """Whether NodeColumns records host ports for this pod (used_ports)."""
    return any(port.host_port for c in pod.spec.containers for port in c.ports)


class PodIndex:
    def __init__(self) -> None:
        self._nodes: NodeColumns | None = None
        self._names: list[str] | None = None
        self._generation = -1
        self._lists: list[list[Pod]] = []
        self._lens: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.num_resources = 0
        self._allocate(0)
        self.row_slots: list[list[int]] = []
        self.namespace_codes: dict[str, int] = {}
        self.full_rebuilds = 0

    # ------------------------------------------------------------------ storage
    def _allocate(self, capacity: int) -> None:
        r = self.num_resources
        self.capacity = capacity
        self.alive: NDArray[np.bool_] = np.zeros(capacity, dtype=np.bool_)
        self.row: NDArray[np.intp] = np.zeros(capacity, dtype=np.intp)
        self.priority: NDArray[np.int64] = np.zeros(capacity, dtype=np.int64)
        self.start: NDArray[np.float64] = np.full(capacity, np.nan)
        """status.startTime; NaN when the pod has not started (upstream uses "now")."""
        self.requests: NDArray[np.int64] = np.zeros((capacity, r), dtype=np.int64)
        """Requests per NodeColumns resource column, with 1 in the "pods" column."""
        self.non_zero: NDArray[np.int64] = np.zeros((capacity, 2), dtype=np.int64)
        self.host_ports: NDArray[np.bool_] = np.zeros(capacity, dtype=np.bool_)
        self.has_labels: NDArray[np.bool_] = np.zeros(capacity, dtype=np.bool_)
        self.namespace: NDArray[np.int32] = np.zeros(capacity, dtype=np.int32)
        self.position: NDArray[np.intp] = np.zeros(capacity, dtype=np.intp)
        """Index of the pod in its row's pod list (the order NodeInfo.Pods keeps)."""
        self.pods: list[Pod | None] = [None] * capacity
        self._free: list[int] = list(range(capacity - 1, -1, -1))

    def _grow(self) -> None:
        old = self.capacity
        new = max(1024, old * 2)
        for name in (
            "alive",
            "row",
            "priority",
            "start",
            "host_ports",
            "has_labels",
            "namespace",
            "position",
        ):
            array = getattr(self, name)
            fill = np.nan if name == "start" else 0
            grown = np.full(new, fill, dtype=array.dtype)
            grown[:old] = array
            setattr(self, name, grown)
        requests = np.zeros((new, self.num_resources), dtype=np.int64)
        requests[:old] = self.requests
        self.requests = requests
        non_zero = np.zeros((new, 2), dtype=np.int64)
        non_zero[:old] = self.non_zero
        self.non_zero = non_zero
        self.pods.extend([None] * (new - old))
        self._free.extend(range(new - 1, old - 1, -1))
        self.capacity = new

    def _put(self, row: int, pod: Pod, resource_index: dict[str, int]) -> int:
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self.alive[slot] = True
        self.row[slot] = row
        self.priority[slot] = priority_of(pod)
        start = pod.status.start_time
        self.start[slot] = math.nan if start is None else start
        vector = self.requests[slot]
        vector[:] = 0
        for name, value in pod_requests(pod).items():
            col = resource_index.get(name)
            if col is not None:
                vector[col] += value
        vector[resource_index["pods"]] += 1
        nz = non_zero_requests(pod)
        self.non_zero[slot, 0] = nz.get("cpu", 0)
        self.non_zero[slot, 1] = nz.get("memory", 0)
        self.host_ports[slot] = has_host_ports(pod)
        self.has_labels[slot] = bool(pod.metadata.labels)
        namespace = pod.metadata.namespace
        code = self.namespace_codes.setdefault(namespace, len(self.namespace_codes))
        self.namespace[slot] = code
        self.pods[slot] = pod
        return slot

    def _drop(self, slot: int) -> None:
        self.alive[slot] = False
        self.pods[slot] = None
        self._free.append(slot)

    # ------------------------------------------------------------------ syncing
    def sync(self, nodes: NodeColumns) -> None:
        """Bring the index up to date with `nodes` (cheap when little changed)."""
        if (
            nodes is not self._nodes
            or nodes.names is not self._names
            or len(nodes.resource_names) != self.num_resources
        ):
            self._rebuild(nodes)
            return
        if nodes.generation == self._generation:
            return
        current = nodes.pods_by_node
        n = len(current)
        lens = np.fromiter(map(len, current), dtype=np.int64, count=n)
        same = np.fromiter(map(operator.is_, current, self._lists), dtype=np.bool_, count=n)
        changed = np.flatnonzero(~same | (lens != self._lens))
        for row in changed.tolist():
            self._resync_row(row, current[row], nodes.resource_index)
        self._lens = lens
        self._generation = nodes.generation

    def _resync_row(self, row: int, pods: list[Pod], resource_index: dict[str, int]) -> None:
        by_identity = {id(self.pods[s]): s for s in self.row_slots[row]}
        slots: list[int] = []
        for pod in pods:
            slot = by_identity.pop(id(pod), None)
            slots.append(self._put(row, pod, resource_index) if slot is None else slot)
        for slot in by_identity.values():
            self._drop(slot)
        self.row_slots[row] = slots
        self.position[slots] = np.arange(len(slots))
        self._lists[row] = pods

    def _rebuild(self, nodes: NodeColumns) -> None:
        self.full_rebuilds += 1
        self.num_resources = len(nodes.resource_names)
        total = sum(len(p) for p in nodes.pods_by_node)
        self._allocate(max(1024, total + total // 4))
        self.namespace_codes = {}
        resource_index = nodes.resource_index
        self.row_slots = [
            [self._put(row, pod, resource_index) for pod in pods]
            for row, pods in enumerate(nodes.pods_by_node)
        ]
        for slots in self.row_slots:
            self.position[slots] = np.arange(len(slots))
        self._nodes = nodes
        self._names = nodes.names
        self._lists = list(nodes.pods_by_node)
        self._lens = np.fromiter(map(len, self._lists), dtype=np.int64, count=len(self._lists))
        self._generation = nodes.generation

    # ------------------------------------------------------------------ reading
    def pod(self, slot: int) -> Pod:
        pod = self.pods[slot]
        if pod is None:
            raise KeyError(f"slot {slot} holds no pod")
        return pod

    def start_or(self, slots: NDArray[np.intp], now: float) -> NDArray[np.float64]:
        """Start times with `now` for pods that have not started (upstream GetPodStartTime)."""
        start = self.start[slots]
        return np.where(np.isnan(start), now, start)
