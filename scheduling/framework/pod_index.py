"""PodIndex: the pods bound to a NodeColumns as columns, one slot per pod.

Preemption asks, for every node at once, "which pods have lower priority than P, what do they
request, in which order would they be reprieved". Walking 20,000 Pod objects per decision costs
more than the whole 20 ms budget, so the index keeps priority, start time, requests and row per
pod in numpy arrays and follows the NodeColumns incrementally:

- it listens to the NodeColumns (`pod_listeners`): adding or removing a pod only marks its row
  dirty (O(1) on the scheduling path); the next `sync` re-reads the dirty rows, and pods still
  present keep their slot. A NodeColumns without listeners is compared row by row instead
  (a row whose list is another object or has another length has changed);
- a rebuilt NodeColumns (rows moved) or new resource columns rebuild the whole index.

It also keeps every pod in order of importance, grouped by row (`ordered`): row ascending, then
priority descending, then earlier start first (not started: last), then the row's pod order.
That is the order in which preemption reprieves victims (upstream MoreImportantPod), so a
decision filters this array instead of sorting 20,000 pods.

`row_slots[row]` lists the row's slots in `pods_by_node[row]` order.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, pod_host_ports
from shared.models import Pod, priority_of
from shared.models.resources import non_zero_requests, pod_requests

RANK_BITS = 20
"""rank_key = row << RANK_BITS | rank within the row (fewer than a million pods per node)."""
_MANY_ROWS = 64
"""Beyond this many changed rows, re-sort `ordered` instead of patching it row by row."""


def has_host_ports(pod: Pod) -> bool:
    """Whether NodeColumns records host ports for this pod (containers and sidecars)."""
    return bool(pod_host_ports(pod))


def group_starts(values: NDArray[np.intp]) -> NDArray[np.intp]:
    """For a grouped (e.g. sorted) array: the index where each element's group begins."""
    if values.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    first = np.empty(values.shape[0], dtype=np.bool_)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    starts: NDArray[np.intp] = np.maximum.accumulate(np.where(first, np.arange(values.shape[0]), 0))
    return starts


def runs(values: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """For a grouped array: each group's value and length (np.unique without sorting)."""
    if values.shape[0] == 0:
        return values, np.zeros(0, dtype=np.intp)
    first = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    lengths = np.diff(np.append(first, values.shape[0]))
    return values[first], lengths


class _DirtyRows:
    """A PodListener that only remembers which rows changed."""

    __slots__ = ("full", "rows")

    def __init__(self) -> None:
        self.rows: set[int] = set()
        self.full = False

    def pod_added(self, row: int, pod: Pod) -> None:
        self.rows.add(row)

    def pod_removed(self, row: int, pod: Pod) -> None:
        self.rows.add(row)

    def rows_rebuilt(self) -> None:
        self.full = True


class PodIndex:
    def __init__(self, *, listen: bool = True) -> None:
        """`listen=False`: never register with NodeColumns; compare rows on every sync."""
        self._listen = listen
        self._nodes: NodeColumns | None = None
        self._names: list[str] | None = None
        self._generation = -1
        self._listener: _DirtyRows | None = None
        self._lists: list[list[Pod]] = []
        self._lens: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.num_resources = 0
        self._allocate(0)
        self.row_slots: list[list[int]] = []
        self.namespace_codes: dict[str, int] = {}
        self.ordered: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        """Live slots in order of importance, grouped by row."""
        self._ordered_keys: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.full_rebuilds = 0

    # ------------------------------------------------------------------ storage
    _FIELDS = (
        "alive",
        "row",
        "priority",
        "start",
        "host_ports",
        "has_labels",
        "namespace",
        "position",
        "rank_key",
    )

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
        self.rank_key: NDArray[np.int64] = np.zeros(capacity, dtype=np.int64)
        """row << RANK_BITS | the pod's rank by importance within its row."""
        self.pods: list[Pod | None] = [None] * capacity
        self._free: list[int] = list(range(capacity - 1, -1, -1))

    def _grow(self) -> None:
        old = self.capacity
        new = max(1024, old * 2)
        for name in self._FIELDS:
            array = getattr(self, name)
            grown = np.full(new, np.nan if name == "start" else 0, dtype=array.dtype)
            grown[:old] = array
            setattr(self, name, grown)
        for name, width in (("requests", self.num_resources), ("non_zero", 2)):
            grown2 = np.zeros((new, width), dtype=np.int64)
            grown2[:old] = getattr(self, name)
            setattr(self, name, grown2)
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
        listener = self._listener
        if (
            nodes is not self._nodes
            or nodes.names is not self._names
            or len(nodes.resource_names) != self.num_resources
            or (listener is not None and listener.full)
        ):
            self._rebuild(nodes)
            return
        if nodes.generation == self._generation:
            return
        current = nodes.pods_by_node
        if listener is not None:
            changed = sorted(listener.rows)
            listener.rows.clear()
        else:
            n = len(current)
            lens = np.fromiter(map(len, current), dtype=np.int64, count=n)
            same = np.fromiter(map(operator.is_, current, self._lists), dtype=np.bool_, count=n)
            changed = np.flatnonzero(~same | (lens != self._lens)).tolist()
            self._lens = lens
        for row in changed:
            self._resync_row(row, current[row], nodes.resource_index)
        self._reorder(changed)
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
        self._lists[row] = pods
        if not slots:
            return
        self.position[slots] = np.arange(len(slots))
        ranked = sorted(range(len(slots)), key=lambda i: self._importance(slots[i], i))
        base = row << RANK_BITS
        for rank, i in enumerate(ranked):
            self.rank_key[slots[i]] = base | rank

    def _importance(self, slot: int, position: int) -> tuple[int, float, int]:
        start = float(self.start[slot])
        return (-int(self.priority[slot]), math.inf if math.isnan(start) else start, position)

    def _reorder(self, rows: list[int]) -> None:
        if not rows:
            return
        if len(rows) > _MANY_ROWS:
            self._sort_all()
            return
        ordered, keys = self.ordered, self._ordered_keys
        for row in rows:
            lo = int(np.searchsorted(keys, row << RANK_BITS))
            hi = int(np.searchsorted(keys, (row + 1) << RANK_BITS))
            slots = np.array(self.row_slots[row], dtype=np.intp)
            block = slots[np.argsort(self.rank_key[slots])]
            ordered = np.concatenate((ordered[:lo], block, ordered[hi:]))
            keys = np.concatenate((keys[:lo], self.rank_key[block], keys[hi:]))
        self.ordered, self._ordered_keys = ordered, keys

    def _sort_all(self) -> None:
        live = np.flatnonzero(self.alive).astype(np.intp)
        self.ordered = live[np.argsort(self.rank_key[live])]
        self._ordered_keys = self.rank_key[self.ordered]

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
        live = np.array([s for slots in self.row_slots for s in slots], dtype=np.intp)
        rows = self.row[live]
        count = np.arange(live.shape[0])
        self.position[live] = count - group_starts(rows)
        start = self.start[live]
        order = np.lexsort(
            (
                self.position[live],
                np.where(np.isnan(start), np.inf, start),
                -self.priority[live],
                rows,
            )
        )
        ranked = live[order]
        ranked_rows = rows[order]
        rank = count - group_starts(ranked_rows)
        self.rank_key[ranked] = (ranked_rows.astype(np.int64) << RANK_BITS) | rank
        self.ordered = ranked
        self._ordered_keys = self.rank_key[ranked]
        self._attach(nodes)
        self._names = nodes.names
        self._lists = list(nodes.pods_by_node)
        self._lens = np.fromiter(map(len, self._lists), dtype=np.int64, count=len(self._lists))
        self._generation = nodes.generation

    def _attach(self, nodes: NodeColumns) -> None:
        """Listen to `nodes` (and stop listening to the previous NodeColumns)."""
        if self._nodes is not None and self._listener is not None:
            listeners = getattr(self._nodes, "pod_listeners", None)
            if isinstance(listeners, list) and self._listener in listeners:
                listeners.remove(self._listener)
        self._nodes = nodes
        self._listener = None
        listeners = getattr(nodes, "pod_listeners", None)
        if self._listen and isinstance(listeners, list):
            self._listener = _DirtyRows()
            listeners.append(self._listener)

    # ------------------------------------------------------------------ reading
    @property
    def names(self) -> list[str]:
        """Node names by row, as of the last sync."""
        return self._names if self._names is not None else []

    def pod(self, slot: int) -> Pod:
        pod = self.pods[slot]
        if pod is None:
            raise KeyError(f"slot {slot} holds no pod")
        return pod

    def start_or(self, slots: NDArray[np.intp], now: float) -> NDArray[np.float64]:
        """Start times with `now` for pods that have not started (upstream GetPodStartTime)."""
        start = self.start[slots]
        return np.where(np.isnan(start), now, start)

    def in_order(self, slots: NDArray[np.intp]) -> NDArray[np.intp]:
        """These slots grouped by row, most important first."""
        return slots[np.argsort(self.rank_key[slots], kind="stable")]
