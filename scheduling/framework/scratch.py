"""Scratch: a private copy of a NodeColumns' pod-derived state that preemption may change.

Preemption asks "would the pod fit on this node without these pods, or with these nominated
pods?". Upstream copies the node's NodeInfo; berth copies what pods change in NodeColumns once
per decision (`requested`, `non_zero_requested`, host ports, the pod lists) and then edits rows
of the copy in place:

- `remove_slots` / `restore_slots` take running pods (PodIndex slots) out of and back into
  any number of rows at once (vectorised sums);
- `add_pod` / `remove_added` put an unbound pod (a nominated pod) on a row.

Everything else (allocatable, labels, taints, names) is shared with the scheduler's view and
never written. `pods_by_node` of the copy is a lazy view: a row's list is built when a plugin
reads it, from the base list minus removed slots plus added pods.

Keep in step with NodeColumns._account_pod: what it updates for a pod, this updates too.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from typing import SupportsIndex, overload

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, UsedPorts, count_host_ports
from scheduling.framework.pod_index import PodIndex, has_host_ports
from shared.models import Pod
from shared.models.resources import non_zero_requests, pod_requests


class _PodsView(list[list[Pod]]):
    """pods_by_node of a Scratch: base lists minus removed slots plus added pods."""

    def __init__(self, base: list[list[Pod]], scratch: Scratch) -> None:
        super().__init__(base)
        self._scratch = scratch

    def _row(self, row: int) -> list[Pod]:
        scratch = self._scratch
        base = list.__getitem__(self, row)
        index = scratch.index
        extra = scratch.added.get(row)
        if index is not None and scratch.removed_per_row[row]:
            removed = scratch.removed
            slots = index.row_slots[row]
            base = [p for p, s in zip(base, slots, strict=True) if not removed[s]]
        return base + extra if extra else base

    @overload
    def __getitem__(self, i: SupportsIndex) -> list[Pod]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[Pod]]: ...

    def __getitem__(self, i: SupportsIndex | slice) -> list[Pod] | list[list[Pod]]:
        if isinstance(i, slice):
            return [self._row(r) for r in range(len(self))[i]]
        row = int(i)
        return self._row(row if row >= 0 else row + len(self))

    def __iter__(self) -> Iterator[list[Pod]]:
        return (self._row(r) for r in range(len(self)))


class Scratch:
    def __init__(self, base: NodeColumns, index: PodIndex | None = None) -> None:
        self.base = base
        self.index = index
        columns = copy.copy(base)
        columns.requested = base.requested.copy()
        columns.non_zero_requested = base.non_zero_requested.copy()
        self._ports_copied = False
        self.columns = columns
        self.removed: NDArray[np.bool_] = np.zeros(
            index.capacity if index is not None else 0, dtype=np.bool_
        )
        self.removed_per_row: NDArray[np.int64] = np.zeros(len(base), dtype=np.int64)
        """How many of each row's running pods are removed."""
        self.added: dict[int, list[Pod]] = {}
        columns.pods_by_node = _PodsView(base.pods_by_node, self)

    # ------------------------------------------------------------------- ports
    def _ports(self) -> UsedPorts:
        if not self._ports_copied:
            self.columns.used_ports = {
                key: {row: Counter(ips) for row, ips in by_row.items()}
                for key, by_row in self.base.used_ports.items()
            }
            self._ports_copied = True
        return self.columns.used_ports

    def _apply_ports(self, row: int, pod: Pod, sign: int) -> None:
        count_host_ports(self._ports(), row, pod, sign)

    # ------------------------------------------------------------ running pods
    def remove_slots(self, slots: NDArray[np.intp]) -> None:
        """Take these running pods off their rows (rows may repeat)."""
        self._shift(slots, -1)

    def restore_slots(self, slots: NDArray[np.intp]) -> None:
        """Put removed running pods back on their rows."""
        self._shift(slots, +1)

    def _shift(self, slots: NDArray[np.intp], sign: int) -> None:
        index = self.index
        if index is None or slots.shape[0] == 0:
            return
        if self.removed.shape[0] < index.capacity:
            grown = np.zeros(index.capacity, dtype=np.bool_)
            grown[: self.removed.shape[0]] = self.removed
            self.removed = grown
        rows = index.row[slots]
        requested = self.columns.requested
        non_zero = self.columns.non_zero_requested
        step = np.diff(rows)
        if slots.shape[0] == 1 or bool((step > 0).all()):
            # One pod per row (a reprieve step): plain fancy indexing.
            requested[rows] += sign * index.requests[slots]
            non_zero[rows] += sign * index.non_zero[slots]
            self.removed_per_row[rows] -= sign
        elif bool((step >= 0).all()):
            # Grouped by row (all victims at once): one sum per row.
            starts = np.flatnonzero(np.concatenate(([True], step != 0)))
            unique_rows = rows[starts]
            requested[unique_rows] += sign * np.add.reduceat(index.requests[slots], starts)
            non_zero[unique_rows] += sign * np.add.reduceat(index.non_zero[slots], starts)
            counts = np.diff(np.append(starts, rows.shape[0]))
            self.removed_per_row[unique_rows] -= sign * counts
        else:
            np.add.at(requested, rows, sign * index.requests[slots])
            np.add.at(non_zero, rows, sign * index.non_zero[slots])
            np.add.at(self.removed_per_row, rows, -sign)
        self.removed[slots] = sign < 0
        with_ports = slots[index.host_ports[slots]]
        for slot in with_ports.tolist():
            self._apply_ports(int(index.row[slot]), index.pod(slot), sign)

    # ----------------------------------------------------------- unbound pods
    def _vector(self, pod: Pod) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        columns = self.columns
        vector = np.zeros(len(columns.resource_names), dtype=np.int64)
        for name, value in pod_requests(pod).items():
            col = columns.resource_index.get(name)
            # A resource no node offers has no column; no node can fit it anyway.
            if col is not None:
                vector[col] += value
        vector[columns.resource_index["pods"]] += 1
        nz = non_zero_requests(pod)
        return vector, np.array([nz.get("cpu", 0), nz.get("memory", 0)], dtype=np.int64)

    def add_pod(self, row: int, pod: Pod) -> None:
        """Account an unbound pod (a nominated one) on `row`."""
        vector, nz = self._vector(pod)
        self.columns.requested[row] += vector
        self.columns.non_zero_requested[row] += nz
        if has_host_ports(pod):
            self._apply_ports(row, pod, +1)
        self.added.setdefault(row, []).append(pod)

    def add_pod_to_rows(self, rows: NDArray[np.intp], pod: Pod) -> None:
        """Account one more `pod` on each of `rows` (distinct): what every one of those nodes
        would look like after binding it (the signature cache's look-ahead)."""
        vector, nz = self._vector(pod)
        self.columns.requested[rows] += vector
        self.columns.non_zero_requested[rows] += nz
        ports = has_host_ports(pod)
        for row in rows.tolist():
            if ports:
                self._apply_ports(row, pod, +1)
            self.added.setdefault(row, []).append(pod)

    def remove_added(self, row: int, pod: Pod) -> None:
        vector, nz = self._vector(pod)
        self.columns.requested[row] -= vector
        self.columns.non_zero_requested[row] -= nz
        if has_host_ports(pod):
            self._apply_ports(row, pod, -1)
        pods = self.added.get(row, [])
        for i, p in enumerate(pods):
            if p is pod:
                del pods[i]
                break
        if not pods:
            self.added.pop(row, None)
