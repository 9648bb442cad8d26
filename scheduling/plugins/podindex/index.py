"""PodIndex: the pods bound to NodeColumns rows, as numpy columns for cross-node plugins.

InterPodAffinity and PodTopologySpread ask, once per cycle, "how many existing pods on each
node match this selector" and "which existing pods' affinity terms match the incoming pod".
Walking every pod in Python per cycle would be O(pods) interpreter work per pod scheduled;
instead the index keeps, in step with NodeColumns (it is one of its `pod_listeners`):

- a pod table: per pod its row, its *group* (namespace + exact label set) and whether it is
  terminating. Pods of one workload share a group, so a selector is evaluated in Python once
  per group (and cached per selector), then applied to every pod with one numpy take;
- a term table: one entry per (pod, affinity term) for pods that carry pod (anti-)affinity,
  with the term's *signature* (kind, weight, parsed term). A signature is matched against the
  incoming pod once (cached per incoming pod identity), then applied to entries with one take.

Rows change when nodes are added or removed: the index then rebuilds itself from
`nodes.pods_by_node` on next use (O(pods), as rare as node churn).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.plugins.podindex.selectors import LabelQuery, query_matches
from scheduling.plugins.podindex.terms import AffinityTerm, parse_pod_terms
from shared.models import Pod

REQUIRED_AFFINITY: Final = 0
REQUIRED_ANTI_AFFINITY: Final = 1
PREFERRED_AFFINITY: Final = 2
PREFERRED_ANTI_AFFINITY: Final = 3
KINDS: Final = 4

_INITIAL_CAPACITY = 256
_MAX_CACHED = 1024
"""Selector and incoming-pod caches are dropped wholesale past this many entries."""
_MAX_HOT = 32
"""Queries whose per-row counts are kept up to date on every bind (least recently used out)."""

GroupKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class PodQuery:
    """Pods in `namespaces` (None: any namespace) whose labels match `selector` (None: none)."""

    namespaces: frozenset[str] | None
    selector: LabelQuery | None

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return query_matches(self.selector, labels)


@dataclass(slots=True)
class TermHits:
    """Term-table entries that matched the incoming pod, for one topology key."""

    rows: NDArray[np.intp]
    kinds: NDArray[np.int8]
    weights: NDArray[np.int64]


class _HotCounts:
    """Per-row counts of one query, kept current as pods come and go."""

    __slots__ = ("counts", "queries", "skip_terminating")

    def __init__(
        self, queries: tuple[PodQuery, ...], skip_terminating: bool, counts: NDArray[np.int64]
    ) -> None:
        self.queries = queries
        self.skip_terminating = skip_terminating
        self.counts = counts


class _LazyMask:
    """A boolean per group (or signature), evaluated for new ids as they appear."""

    __slots__ = ("done", "mask")

    def __init__(self) -> None:
        self.mask: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.done = 0


_T = TypeVar("_T", bound=np.generic)


def _grown(array: NDArray[_T], size: int) -> NDArray[_T]:
    if size <= array.shape[0]:
        return array
    bigger = np.zeros(max(size, 2 * array.shape[0], _INITIAL_CAPACITY), dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


class PodIndex:
    """Bound pods by row, grouped by label set; use `PodIndex.of(nodes)`."""

    def __init__(self, owner: NodeColumns | None = None) -> None:
        self._owner = None if owner is None else weakref.ref(owner)
        self._dirty = True
        self._reset()

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def of(nodes: NodeColumns) -> PodIndex:
        """The index attached to these NodeColumns (created and attached on first use).

        A shallow copy of a NodeColumns shares its listener list but not its pods (preemption's
        scratch copies): it gets a throwaway index, never the original's."""
        for listener in nodes.pod_listeners:
            if isinstance(listener, PodIndex) and listener._owned_by(nodes):
                listener._sync(nodes)
                return listener
        if any(isinstance(listener, PodIndex) for listener in nodes.pod_listeners):
            transient = PodIndex()
            transient._sync(nodes)
            return transient
        index = PodIndex(nodes)
        nodes.pod_listeners.append(index)
        index._sync(nodes)
        return index

    def _owned_by(self, nodes: NodeColumns) -> bool:
        return self._owner is not None and self._owner() is nodes

    def _reset(self) -> None:
        # pod table
        self._count = 0
        self._rows: NDArray[np.int32] = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._groups: NDArray[np.int32] = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._terminating: NDArray[np.bool_] = np.zeros(_INITIAL_CAPACITY, dtype=np.bool_)
        self._slot_of: dict[str, int] = {}
        self._uid_at: list[str] = []
        self._terminating_count = 0
        # groups (never removed: a label set seen once is likely to come back)
        self._group_ids: dict[GroupKey, int] = {}
        self.group_namespaces: list[str] = []
        self.group_labels: list[Mapping[str, str]] = []
        # term table
        self._entries = 0
        self._entry_sig: NDArray[np.int32] = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._entry_row: NDArray[np.int32] = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._entry_owner: list[str] = []
        self._entries_of: dict[str, list[int]] = {}
        self.kind_entries = [0] * KINDS
        """Number of term-table entries per kind (REQUIRED_AFFINITY...)."""
        # signatures
        self._sig_ids: dict[tuple[int, int, AffinityTerm], int] = {}
        self.sig_terms: list[AffinityTerm] = []
        self._sig_kind: NDArray[np.int8] = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._sig_weight: NDArray[np.int64] = np.zeros(_INITIAL_CAPACITY, dtype=np.int64)
        self._sig_topology: NDArray[np.int32] = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._topology_ids: dict[str, int] = {}
        self.topology_keys: list[str] = []
        # caches
        self._group_masks: dict[Hashable, _LazyMask] = {}
        self._sig_masks: dict[Hashable, _LazyMask] = {}
        self._hot: dict[tuple[tuple[PodQuery, ...], bool], _HotCounts] = {}

    def _sync(self, nodes: NodeColumns) -> None:
        if not self._dirty:
            return
        self._reset()
        for row, pods in enumerate(nodes.pods_by_node):
            for pod in pods:
                self._insert(row, pod)
        self._dirty = False

    # PodListener
    def pod_added(self, row: int, pod: Pod) -> None:
        if not self._dirty:
            self._insert(row, pod)

    def pod_removed(self, row: int, pod: Pod) -> None:
        if not self._dirty:
            self._delete(pod.metadata.uid)

    def rows_rebuilt(self) -> None:
        self._dirty = True

    # ---------------------------------------------------------------- mutation
    def _group_of(self, pod: Pod) -> int:
        labels = pod.metadata.labels
        key = (pod.metadata.namespace, frozenset(labels.items()))
        gid = self._group_ids.get(key)
        if gid is None:
            gid = len(self.group_namespaces)
            self._group_ids[key] = gid
            self.group_namespaces.append(pod.metadata.namespace)
            self.group_labels.append(dict(labels))
        return gid

    def _insert(self, row: int, pod: Pod) -> None:
        uid = pod.metadata.uid
        if uid in self._slot_of:  # re-added without removal: keep the latest copy
            self._delete(uid)
        slot = self._count
        size = slot + 1
        self._rows = _grown(self._rows, size)
        self._groups = _grown(self._groups, size)
        self._terminating = _grown(self._terminating, size)
        gid = self._group_of(pod)
        self._rows[slot] = row
        self._groups[slot] = gid
        terminating = pod.metadata.deletion_timestamp is not None
        self._terminating[slot] = terminating
        self._terminating_count += terminating
        self._slot_of[uid] = slot
        self._uid_at.append(uid)
        self._count = size
        self._bump_hot(row, gid, terminating, 1)
        if pod.spec.affinity is not None:
            self._insert_terms(row, pod)

    def _insert_terms(self, row: int, pod: Pod) -> None:
        terms = parse_pod_terms(pod)
        if terms.is_empty():
            return
        signed: list[tuple[int, int, AffinityTerm]] = [
            *((REQUIRED_AFFINITY, 0, t) for t in terms.required_affinity),
            *((REQUIRED_ANTI_AFFINITY, 0, t) for t in terms.required_anti_affinity),
            *((PREFERRED_AFFINITY, w.weight, w.term) for w in terms.preferred_affinity),
            *((PREFERRED_ANTI_AFFINITY, w.weight, w.term) for w in terms.preferred_anti_affinity),
        ]
        uid = pod.metadata.uid
        slots = self._entries_of.setdefault(uid, [])
        for signature in signed:
            slot = self._entries
            self._entry_sig = _grown(self._entry_sig, slot + 1)
            self._entry_row = _grown(self._entry_row, slot + 1)
            self._entry_sig[slot] = self._signature_id(signature)
            self._entry_row[slot] = row
            self._entry_owner.append(uid)
            slots.append(slot)
            self._entries = slot + 1
            self.kind_entries[signature[0]] += 1

    def _signature_id(self, signature: tuple[int, int, AffinityTerm]) -> int:
        sid = self._sig_ids.get(signature)
        if sid is not None:
            return sid
        sid = len(self.sig_terms)
        self._sig_ids[signature] = sid
        kind, weight, term = signature
        self.sig_terms.append(term)
        self._sig_kind = _grown(self._sig_kind, sid + 1)
        self._sig_weight = _grown(self._sig_weight, sid + 1)
        self._sig_topology = _grown(self._sig_topology, sid + 1)
        self._sig_kind[sid] = kind
        self._sig_weight[sid] = weight
        tid = self._topology_ids.get(term.topology_key)
        if tid is None:
            tid = len(self.topology_keys)
            self._topology_ids[term.topology_key] = tid
            self.topology_keys.append(term.topology_key)
        self._sig_topology[sid] = tid
        return sid

    def _delete(self, uid: str) -> None:
        slot = self._slot_of.pop(uid, None)
        if slot is None:
            return
        terminating = bool(self._terminating[slot])
        self._terminating_count -= terminating
        self._bump_hot(int(self._rows[slot]), int(self._groups[slot]), terminating, -1)
        last = self._count - 1
        if slot != last:
            moved = self._uid_at[last]
            self._rows[slot] = self._rows[last]
            self._groups[slot] = self._groups[last]
            self._terminating[slot] = self._terminating[last]
            self._uid_at[slot] = moved
            self._slot_of[moved] = slot
        self._uid_at.pop()
        self._count = last
        for entry in sorted(self._entries_of.pop(uid, ()), reverse=True):
            self._delete_entry(entry)

    def _bump_hot(self, row: int, gid: int, terminating: bool, delta: int) -> None:
        for hot in self._hot.values():
            if terminating and hot.skip_terminating:
                continue
            if self.group_mask(hot.queries)[gid]:
                hot.counts[row] += delta

    def _delete_entry(self, entry: int) -> None:
        self.kind_entries[int(self._sig_kind[self._entry_sig[entry]])] -= 1
        last = self._entries - 1
        if entry != last:
            owner = self._entry_owner[last]
            self._entry_sig[entry] = self._entry_sig[last]
            self._entry_row[entry] = self._entry_row[last]
            self._entry_owner[entry] = owner
            owned = self._entries_of[owner]
            owned[owned.index(last)] = entry
        self._entry_owner.pop()
        self._entries = last

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return self._count

    def group_mask(self, queries: tuple[PodQuery, ...]) -> NDArray[np.bool_]:
        """Per group: does every query match it (cached per query tuple)."""
        cached = self._group_masks.get(queries)
        if cached is None:
            if len(self._group_masks) >= _MAX_CACHED:
                self._group_masks.clear()
            cached = self._group_masks[queries] = _LazyMask()
        total = len(self.group_namespaces)
        if cached.done < total:
            fresh = [
                all(q.matches(self.group_namespaces[g], self.group_labels[g]) for q in queries)
                for g in range(cached.done, total)
            ]
            cached.mask = np.concatenate([cached.mask, np.array(fresh, dtype=np.bool_)])
            cached.done = total
        return cached.mask

    def row_counts(
        self, nodes: NodeColumns, queries: tuple[PodQuery, ...], *, skip_terminating: bool
    ) -> NDArray[np.int64]:
        """Per row of `nodes`: how many bound pods match every query (optionally ignoring
        terminating pods). An empty tuple of queries matches nothing."""
        self._sync(nodes)
        size = len(nodes)
        if not queries:
            return np.zeros(size, dtype=np.int64)
        key = (queries, skip_terminating)
        hot = self._hot.pop(key, None)
        if hot is None or hot.counts.shape[0] != size:
            hot = _HotCounts(
                queries, skip_terminating, self._count_rows(queries, skip_terminating, size)
            )
            if len(self._hot) >= _MAX_HOT:
                del self._hot[next(iter(self._hot))]
        self._hot[key] = hot  # most recently used last
        return hot.counts.copy()

    def _count_rows(
        self, queries: tuple[PodQuery, ...], skip_terminating: bool, size: int
    ) -> NDArray[np.int64]:
        if self._count == 0:
            return np.zeros(size, dtype=np.int64)
        groups = self.group_mask(queries)
        if not groups.any():
            return np.zeros(size, dtype=np.int64)
        count = self._count
        selected = groups[self._groups[:count]]
        if skip_terminating and self._terminating_count:
            selected &= ~self._terminating[:count]
        counts: NDArray[np.int64] = np.bincount(self._rows[:count][selected], minlength=size)
        return counts.astype(np.int64, copy=False)

    def signature_mask(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> NDArray[np.bool_]:
        """Per signature: does its term match a pod with this namespace and labels."""
        key = (namespace, frozenset(labels.items()), frozenset(namespace_labels.items()))
        cached = self._sig_masks.get(key)
        if cached is None:
            if len(self._sig_masks) >= _MAX_CACHED:
                self._sig_masks.clear()
            cached = self._sig_masks[key] = _LazyMask()
        total = len(self.sig_terms)
        if cached.done < total:
            fresh = [
                self.sig_terms[s].matches(namespace, labels, namespace_labels)
                for s in range(cached.done, total)
            ]
            cached.mask = np.concatenate([cached.mask, np.array(fresh, dtype=np.bool_)])
            cached.done = total
        return cached.mask

    def term_hits(
        self,
        nodes: NodeColumns,
        pod: Pod,
        namespace_labels: Mapping[str, str],
        kinds: tuple[int, ...],
    ) -> dict[str, TermHits]:
        """Existing pods' terms of these kinds that match `pod`, by topology key: the row of
        each owner pod, the term kind and (preferred terms) its weight."""
        self._sync(nodes)
        if not any(self.kind_entries[k] for k in kinds):
            return {}
        sigs = len(self.sig_terms)
        kind_of = self._sig_kind[:sigs]
        wanted = self.signature_mask(pod.metadata.namespace, pod.metadata.labels, namespace_labels)
        if len(kinds) < KINDS:
            of_kind = kind_of == kinds[0]
            for kind in kinds[1:]:
                of_kind |= kind_of == kind
            wanted = wanted & of_kind
        if not wanted.any():
            return {}
        entry_sig = self._entry_sig[: self._entries]
        hit = wanted[entry_sig]
        if not hit.any():
            return {}
        sig = entry_sig[hit]
        rows = self._entry_row[: self._entries][hit].astype(np.intp)
        topology = self._sig_topology[sig]
        present = np.flatnonzero(np.bincount(topology, minlength=len(self.topology_keys)))
        out: dict[str, TermHits] = {}
        for tid in present.tolist():
            if present.shape[0] == 1:
                mine_rows, mine_sig = rows, sig
            else:
                mine = topology == tid
                mine_rows, mine_sig = rows[mine], sig[mine]
            out[self.topology_keys[tid]] = TermHits(
                mine_rows, self._sig_kind[mine_sig], self._sig_weight[mine_sig]
            )
        return out


def domain_sums(
    nodes: NodeColumns,
    topology_key: str,
    per_row: NDArray[np.int64],
    rows: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """Sum `per_row` (one value per node row) into the domains of `topology_key`: one slot per
    value code of the label column plus a trailing slot that stays 0, so that indexing the
    result with a row's code (MISSING is -1) reads 0 for nodes without the key. `rows`
    restricts the sum to those rows; nodes without the key never count."""
    column = nodes.label(topology_key)
    size = len(column.values) + 1
    keep = column.codes >= 0
    if rows is not None:
        keep &= rows
    codes = column.codes[keep]
    if codes.shape[0] == 0:
        return np.zeros(size, dtype=np.int64)
    sums = np.bincount(codes, weights=per_row[keep], minlength=size)
    return np.rint(sums).astype(np.int64)


def domain_array(nodes: NodeColumns, topology_key: str) -> NDArray[np.int64]:
    """Zeros, one slot per value code of `topology_key` plus the trailing MISSING slot."""
    return np.zeros(len(nodes.label(topology_key).values) + 1, dtype=np.int64)
