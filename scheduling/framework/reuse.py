"""Scheduling signatures: pods that ask the same thing reuse each other's Filter and Score work.

kube-scheduler 1.35 reuses the result of a cycle for the next pod when both have the same
"scheduling signature" (KEP-5598, opportunistic batching), and only for consecutive pods.
berth keeps, per signature, every node's Filter verdict and every Score plugin's raw score,
and brings them up to date before each use by re-evaluating only the rows whose pods changed
since (`NodeColumns.row_log`). Entries survive interleaving: a pod of signature A between two
pods of signature B costs B only the rows A's binding touched.

The answer is exactly the full cycle's (same node, same random tie-break), because reuse is
only attempted where each input is accounted for:

- The pod: the signature holds every field a Filter or Score plugin reads (requests, ports,
  images, selectors, affinity, tolerations, spread, labels and owners, priority, profile).
- The plugins: every PreFilter, Filter, PreScore and Score plugin of the profile declares
  `signature_reuse`. "node-local": its pre-state depends on the pod alone, a row's verdict and
  raw score on that row alone, and its NormalizeScore (if any) on the row's raw score and the
  minimum and maximum raw score over the scored rows. "when-skipped": it reads other nodes'
  pods (inter-pod affinity, topology spread, gangs), so a signature is reused only while it
  returns Skip at PreFilter and PreScore. A plugin without the attribute (out of tree) turns
  reuse off for its profile; `fallbacks` names it.
- The cluster: rows whose pods change are logged; anything else a result may depend on (nodes
  added, removed or updated, a pod with inter-pod affinity terms, namespaces and services)
  bumps `NodeColumns.shared_epoch`, which rebuilds every entry.
- The cycle: reuse applies when the whole search is a single data-parallel pass (every node
  is checked: percentageOfNodesToScore leaves nothing out, no PreFilter narrowing, no
  extenders, no nominated pods, no nominated node) and at least one node fits. Otherwise the
  full cycle runs, and its diagnosis is the one reported.

The best node is kept incrementally: totals are bucketed (a heap of totals, each with its rows
in a sorted list), so a pod costs the re-evaluation of its changed rows plus O(log N) per
changed row, not O(N). Ties are broken by the same draw over the same ascending row order as
`select_host`.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray
from sortedcontainers import SortedList

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Diagnosis,
    NormalizeScorePlugin,
    ScorePlugin,
)
from scheduling.framework.status import Status
from shared.models import Container, Pod

if TYPE_CHECKING:
    from scheduling.framework.runtime import Framework

Reuse = Literal["node-local", "when-skipped"]
NODE_LOCAL: Reuse = "node-local"
WHEN_SKIPPED: Reuse = "when-skipped"

MAX_SIGNATURES = 256
"""Entries kept per profile (least recently used dropped): each holds a few arrays of N."""
REBUILD_FRACTION = 8
"""More than 1/8 of the rows changed since an entry's last use: evaluate all rows at once."""

Signature = Hashable
Int64s = NDArray[np.int64]


def pod_signature(pod: Pod) -> Signature | None:
    """What the cycle reads of `pod`, as a hashable value; None when the pod must take the
    full path (a nominated node is tried before the search)."""
    if pod.status.nominated_node_name:
        return None
    meta, spec = pod.metadata, pod.spec
    return (
        spec.scheduler_name,
        meta.namespace,
        _items(meta.labels),
        tuple((o.api_version, o.kind, o.name, o.controller) for o in meta.owner_references),
        spec.priority,
        spec.node_name,
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


@dataclass(slots=True, eq=False)
class _Scorer:
    name: str
    plugin: ScorePlugin
    weight: int
    normalizer: NormalizeScorePlugin | None
    raw: Int64s
    """Raw score per row (meaningful on feasible rows)."""
    weighted: Int64s
    """Normalized score x weight per row (meaningful on feasible rows)."""
    values: Counter[int] = field(default_factory=Counter)
    """Raw scores over the feasible rows, for the normalizer's minimum and maximum."""

    def bounds(self) -> tuple[int, int]:
        return (min(self.values), max(self.values)) if self.values else (0, 0)


@dataclass(slots=True, eq=False)
class _Entry:
    state: CycleState
    columns: NodeColumns
    epoch: int
    seen: int
    """Absolute position in the columns' row log up to which this entry is current."""
    scorers: list[_Scorer]
    feasible: NDArray[np.bool_]
    status_ids: NDArray[np.int32]
    """-1 on feasible rows, else the index of the rejecting status in `statuses`."""
    statuses: list[Status]
    status_index: dict[Status, int]
    status_rows: Counter[int]
    totals: Int64s
    best: BestRows


class _NotReusable(Exception):
    """This pod's cycle cannot be served from an entry; the reason is counted."""


class SignatureCache:
    """Per profile: signature -> the Filter and Score results of every node, kept current."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self._entries: OrderedDict[Signature, _Entry] = OrderedDict()
        self.hits = 0
        self.builds = 0
        self.rows_evaluated = 0
        self.fallbacks: Counter[str] = Counter()
        """Why a cycle took the full path, by reason (e.g. "PodTopologySpread did not skip")."""
        self._blocker = _unreusable_plugin(framework)
        self._last: _Entry | None = None
        # schedule.py imports the framework runtime, which builds this cache.
        from scheduling.framework.schedule import effective_percentage, num_feasible_nodes_to_find

        self._percentage = effective_percentage
        self._to_find = num_feasible_nodes_to_find

    def clear(self) -> None:
        self._entries.clear()

    def select(self, state: CycleState, pod: Pod, nodes: NodeColumns) -> tuple[int, int] | None:
        """(chosen row, feasible nodes) from the entry of the pod's signature, with `state`
        filled as PreFilter and PreScore would fill it; None: run the full cycle."""
        try:
            signature = self._eligible(pod, nodes)
            entry = self._entries.get(signature)
            if entry is None or not self._refresh(entry, pod, nodes):
                # Gone before the rebuild: a refresh that gave up left the entry half done,
                # and a rebuild may find the pod no longer reusable.
                self._entries.pop(signature, None)
                entry = self._build(pod, nodes)
                self._entries[signature] = entry
                if len(self._entries) > MAX_SIGNATURES:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(signature)
                self.hits += 1
        except _NotReusable as reason:
            self.fallbacks[str(reason)] += 1
            return None
        state.merge(entry.state)
        self._last = entry
        top = entry.best.top()
        if entry.best.size == 1:
            return int(top[0]), 1
        if len(top) == 1:
            return int(top[0]), entry.best.size
        # select_host: the k-th of the tied rows in ascending order, k drawn only on a tie.
        return int(top[int(self.framework.context.rng.integers(len(top)))]), entry.best.size

    def diagnosis(self, nodes: NodeColumns) -> Diagnosis:
        """The rejections of the rows that did not fit in the last `select`, as the full
        search reports them."""
        entry = self._last
        assert entry is not None, "diagnosis() follows a successful select()"
        diagnosis = Diagnosis(num_all_nodes=len(nodes))
        for status_id, count in entry.status_rows.items():
            if count:
                status = entry.statuses[status_id]
                rows = np.flatnonzero(entry.status_ids == status_id).astype(np.intp)
                diagnosis.rejections.append((status, rows))
                if status.plugin:
                    diagnosis.unschedulable_plugins.add(status.plugin)
        return diagnosis

    # ------------------------------------------------------------ eligibility
    def _eligible(self, pod: Pod, nodes: NodeColumns) -> Signature:
        framework = self.framework
        if self._blocker:
            raise _NotReusable(f"{self._blocker} does not declare signature_reuse")
        signature = pod_signature(pod)
        if signature is None:
            raise _NotReusable("nominated node")
        if framework.extenders():
            raise _NotReusable("extenders")
        if framework.nominated_pods():
            raise _NotReusable("nominated pods")
        if not framework.has_score_plugins():
            raise _NotReusable("no score plugins")
        num_nodes = len(nodes)
        if self._to_find(self._percentage(framework), num_nodes) < num_nodes:
            raise _NotReusable("percentageOfNodesToScore below 100")
        return signature

    # ------------------------------------------------------------- building
    def _build(self, pod: Pod, nodes: NodeColumns) -> _Entry:
        framework = self.framework
        state = CycleState()
        pre = framework.run_pre_filter_plugins(state, pod, nodes)
        if not pre.status.is_success():
            raise _NotReusable("PreFilter rejected")
        if pre.result is not None and pre.result.node_names is not None:
            raise _NotReusable("PreFilter narrowed the nodes")
        self._require_skipped(framework.pre_filter_plugins, state.skip_filter_plugins)
        outcome = framework.run_filter_plugins(state, pod, nodes, ALL_ROWS)
        if not outcome.status.is_success():
            raise _NotReusable("Filter failed")
        num_nodes = len(nodes)
        feasible = np.zeros(num_nodes, dtype=np.bool_)
        feasible_rows = nodes.row_indices(outcome.feasible)
        if feasible_rows.shape[0] == 0:
            raise _NotReusable("no node fits")
        feasible[feasible_rows] = True
        status = framework.run_pre_score_plugins(state, pod, nodes, feasible_rows)
        if not status.is_success():
            raise _NotReusable("PreScore failed")
        self._require_skipped(framework.pre_score_plugins, state.skip_score_plugins)
        entry = _Entry(
            state=state,
            columns=nodes,
            epoch=nodes.shared_epoch,
            seen=nodes.row_log_base + len(nodes.row_log),
            scorers=[],
            feasible=feasible,
            status_ids=np.full(num_nodes, -1, dtype=np.int32),
            statuses=[],
            status_index={},
            status_rows=Counter(),
            totals=np.zeros(num_nodes, dtype=np.int64),
            best=BestRows(feasible_rows[:0], np.zeros(0, dtype=np.int64)),
        )
        self._record_rejections(entry, outcome.rejections)
        skip = state.skip_score_plugins
        for name, plugin, weight, normalizer in framework.score_plugins:
            if skip and name in skip:
                continue
            scorer = _Scorer(
                name,
                plugin,
                weight,
                normalizer,
                np.zeros(num_nodes, dtype=np.int64),
                np.zeros(num_nodes, dtype=np.int64),
            )
            raw = self._score(entry, scorer, pod, nodes, feasible_rows)
            scorer.raw[feasible_rows] = raw
            if normalizer is not None:
                scorer.values.update(raw.tolist())
            scorer.weighted[feasible_rows] = self._normalize(entry, scorer, pod, raw) * weight
            entry.scorers.append(scorer)
        self._retotal(entry, feasible_rows)
        self.builds += 1
        self.rows_evaluated += num_nodes
        return entry

    def _require_skipped(self, plugins: Sequence[tuple[str, object]], skipped: set[str]) -> None:
        for name, plugin in plugins:
            if getattr(plugin, "signature_reuse", None) == WHEN_SKIPPED and name not in skipped:
                raise _NotReusable(f"{name} did not skip")

    def _score(
        self, entry: _Entry, scorer: _Scorer, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]
    ) -> Int64s:
        raw = scorer.plugin.score(entry.state, pod, nodes, rows)
        if isinstance(raw, Status) or raw.shape[0] != rows.shape[0]:
            raise _NotReusable(f"{scorer.name} Score failed")
        return raw.astype(np.int64, copy=False)

    def _normalize(self, entry: _Entry, scorer: _Scorer, pod: Pod, raw: Int64s) -> Int64s:
        """The normalized scores of `raw`, a subset of the scored rows: normalized together
        with the minimum and maximum over all of them, which is all a node-local
        normalizer reads."""
        if scorer.normalizer is None:
            scores = raw
        else:
            low, high = scorer.bounds()
            together = np.concatenate((raw, np.array([low, high], dtype=np.int64)))
            out = scorer.normalizer.normalize_score(entry.state, pod, together)
            if isinstance(out, Status):
                raise _NotReusable(f"{scorer.name} NormalizeScore failed")
            scores = out[: raw.shape[0]].astype(np.int64, copy=False)
        if scores.shape[0] and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            raise _NotReusable(f"{scorer.name} score out of range")
        return scores

    def _retotal(self, entry: _Entry, feasible_rows: NDArray[np.intp]) -> None:
        totals = np.zeros(feasible_rows.shape[0], dtype=np.int64)
        for scorer in entry.scorers:
            totals += scorer.weighted[feasible_rows]
        entry.totals[feasible_rows] = totals
        entry.best = BestRows(feasible_rows, totals)

    def _record_rejections(
        self, entry: _Entry, rejections: Sequence[tuple[Status, NDArray[np.intp]]]
    ) -> None:
        for status, rows in rejections:
            status_id = entry.status_index.get(status)
            if status_id is None:
                status_id = entry.status_index[status] = len(entry.statuses)
                entry.statuses.append(status)
            entry.status_ids[rows] = status_id
            entry.status_rows[status_id] += int(rows.shape[0])

    # ------------------------------------------------------------ refreshing
    def _refresh(self, entry: _Entry, pod: Pod, nodes: NodeColumns) -> bool:
        """Bring the entry up to date; False when it must be rebuilt instead."""
        if entry.columns is not nodes or entry.epoch != nodes.shared_epoch:
            return False
        start = entry.seen - nodes.row_log_base
        if start < 0:
            return False
        changed = nodes.row_log[start:]
        if not changed:
            return entry.best.size > 0
        entry.seen = nodes.row_log_base + len(nodes.row_log)
        rows = np.unique(np.array(changed, dtype=np.intp))
        if rows.shape[0] * REBUILD_FRACTION > len(nodes):
            return False
        self.rows_evaluated += int(rows.shape[0])
        outcome = self.framework.run_filter_plugins(entry.state, pod, nodes, rows)
        if not outcome.status.is_success():
            return False
        now_feasible = nodes.row_indices(outcome.feasible)
        was_feasible = rows[entry.feasible[rows]]
        # Forget what the changed rows were, then learn what they are.
        for row in was_feasible.tolist():
            entry.best.remove(row, int(entry.totals[row]))
        old_ids = entry.status_ids[rows]
        for status_id in old_ids[old_ids >= 0].tolist():
            entry.status_rows[status_id] -= 1
        entry.status_ids[rows] = -1
        entry.feasible[rows] = False
        entry.feasible[now_feasible] = True
        self._record_rejections(entry, outcome.rejections)
        renormalize = False
        for scorer in entry.scorers:
            if scorer.normalizer is not None:
                before = scorer.bounds()
                scorer.values.subtract(scorer.raw[was_feasible].tolist())
                scorer.values += Counter()  # drop the zero counts
            raw = self._score(entry, scorer, pod, nodes, now_feasible)
            scorer.raw[now_feasible] = raw
            if scorer.normalizer is not None:
                scorer.values.update(raw.tolist())
                if scorer.bounds() != before:
                    renormalize = True
                    continue
            scorer.weighted[now_feasible] = self._normalize(entry, scorer, pod, raw) * scorer.weight
        if renormalize:
            self._renormalize(entry, pod)
            return entry.best.size > 0
        totals = np.zeros(now_feasible.shape[0], dtype=np.int64)
        for scorer in entry.scorers:
            totals += scorer.weighted[now_feasible]
        entry.totals[now_feasible] = totals
        for row, total in zip(now_feasible.tolist(), totals.tolist(), strict=True):
            entry.best.add(row, total)
        return entry.best.size > 0

    def _renormalize(self, entry: _Entry, pod: Pod) -> None:
        """A normalizer's minimum or maximum moved: every feasible row's score may change."""
        feasible_rows = np.flatnonzero(entry.feasible).astype(np.intp)
        for scorer in entry.scorers:
            raw = scorer.raw[feasible_rows]
            scorer.weighted[feasible_rows] = (
                self._normalize(entry, scorer, pod, raw) * scorer.weight
            )
        self._retotal(entry, feasible_rows)


def _unreusable_plugin(framework: Framework) -> str:
    """The first plugin of the cycle's extension points that does not declare how its
    results may be reused ("" when all do)."""
    points: list[Sequence[tuple[str, object]]] = [
        framework.pre_filter_plugins,
        framework.filter_plugins,
        framework.pre_score_plugins,
        [(name, plugin) for name, plugin, _, _ in framework.score_plugins],
    ]
    for plugins in points:
        for name, plugin in plugins:
            if getattr(plugin, "signature_reuse", None) not in (NODE_LOCAL, WHEN_SKIPPED):
                return name
    return ""
