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
- The plugins: each declares how its results may be reused (signature.py). The node-local
  ones are kept per signature; the others (inter-pod affinity, topology spread, gangs) are
  skipped while they Skip, and otherwise evaluated in full each cycle on the rows the
  node-local ones let through ("mixed" entries), their scores added to the kept ones. A
  plugin without a declaration turns reuse off for its profile; `fallbacks` names it.
- The cluster: rows whose pods change are logged; anything else a result may depend on (nodes
  added, removed or updated, namespaces and services) bumps `NodeColumns.shared_epoch`, which
  rebuilds every entry. A pod with inter-pod terms bumps `inter_pod_epoch`: entries that
  relied on the other plugins skipping check again that they still do.
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

from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Diagnosis,
    NormalizeScorePlugin,
    ScorePlugin,
)
from scheduling.framework.scratch import Scratch
from scheduling.framework.signature import (
    NODE_LOCAL,
    WHEN_SKIPPED,
    BestRows,
    Signature,
    pod_signature,
)
from scheduling.framework.status import Code, Status
from shared.models import Pod

if TYPE_CHECKING:
    from scheduling.framework.runtime import FilterOutcome, Framework

MAX_SIGNATURES = 256
"""Entries kept per profile (least recently used dropped): each holds a few arrays of N."""
REBUILD_FRACTION = 8
"""More than 1/8 of the rows changed since an entry's last use: evaluate all rows at once."""
LOOKAHEAD_BATCH = 64
"""Rows whose look-ahead is recomputed together (one scratch copy of the columns)."""
SMALL_CHANGE = 64
"""Up to this many changed rows update the best-row structure row by row, else rebuild it."""
MAX_PLACED = 1 << 16
"""Placements remembered for their look-ahead (older ones are evaluated when they bind)."""

Int64s = NDArray[np.int64]


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
    next_raw: Int64s
    """Raw score per row with one more pod of the signature there (the look-ahead)."""
    values: Counter[int] = field(default_factory=Counter)
    """Raw scores over the feasible rows, for the normalizer's minimum and maximum."""
    normalized: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """(raw, minimum, maximum) -> normalized score, for one-row updates."""

    def bounds(self) -> tuple[int, int]:
        return (min(self.values), max(self.values)) if self.values else (0, 0)


@dataclass(slots=True, eq=False)
class _Results:
    """Filter and Score results of some rows (ascending), aligned with `rows`."""

    rows: NDArray[np.intp]
    feasible: NDArray[np.bool_]
    status_ids: NDArray[np.int32]
    """-1 where feasible, else the rejecting status's index in the entry's `statuses`."""
    raws: list[Int64s]
    """Per scorer, the raw score (0 where infeasible)."""


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
    next_feasible: NDArray[np.bool_]
    next_status_ids: NDArray[np.int32]
    next_valid: NDArray[np.bool_]
    """Rows whose look-ahead (`next_*`) matches their current pods plus one of ours."""
    inter_pod_epoch: int
    pure: bool
    """Every plugin that reads other nodes skips: the kept results are the whole answer."""
    local_skips: tuple[set[str], set[str]]
    """The node-local plugins that skipped at PreFilter and at PreScore."""
    stale: set[int] = field(default_factory=set)
    """Rows whose look-ahead is out of date, recomputed LOOKAHEAD_BATCH at a time."""


class _NotReusable(Exception):
    """This pod's cycle cannot be served from an entry; the reason is counted."""


class _NotReusableHere(_NotReusable):
    """Nor can any pod of its signature's, until a shared change (`shared_epoch`)."""


class SignatureCache:
    """Per profile: signature -> the Filter and Score results of every node, kept current."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self._entries: OrderedDict[Signature, _Entry] = OrderedDict()
        self._placed: OrderedDict[str, _Entry] = OrderedDict()
        self._unreusable: OrderedDict[Signature, tuple[NodeColumns, int, str]] = OrderedDict()
        """signature -> (columns, shared epoch, reason): known not reusable until it moves."""
        """uid -> the entry that chose the pod's node (its binding there is one step ahead)."""
        self.hits = 0
        self.builds = 0
        self.rows_evaluated = 0
        """Rows run through the Filter and Score plugins (builds, changed rows, look-ahead)."""
        self.rows_promoted = 0
        """Changed rows brought up to date from the look-ahead, without a plugin call."""
        self.mixed = 0
        """Cycles answered by a mixed entry (the plugins reading other nodes run in full)."""
        self.known_unreusable = 0
        """Fallbacks decided from an earlier pod of the signature, without running PreFilter."""
        self.fallbacks: Counter[str] = Counter()
        """Why a cycle took the full path, by reason (e.g. "PodTopologySpread did not skip")."""
        self._blocker = _unreusable_plugin(framework)
        self._others = _others(framework)
        """Names of the plugins evaluated in full each cycle unless they skip."""
        self._mixable = _others_filter_last(framework, self._others)
        self._last: _Entry | None = None
        self._last_rejections: list[tuple[Status, NDArray[np.intp]]] = []
        # schedule.py imports the framework runtime, which builds this cache.
        from scheduling.framework.schedule import (
            effective_percentage,
            num_feasible_nodes_to_find,
            select_host,
        )

        self._percentage = effective_percentage
        self._to_find = num_feasible_nodes_to_find
        self._select_host = select_host
        self._local_names = {name for name, _ in framework.filter_plugins} - self._others

    def clear(self) -> None:
        self._entries.clear()
        self._unreusable.clear()
        self._placed.clear()

    def select(self, state: CycleState, pod: Pod, nodes: NodeColumns) -> tuple[int, int] | None:
        """(chosen row, feasible nodes) from the entry of the pod's signature, with `state`
        filled as PreFilter and PreScore would fill it; None: run the full cycle."""
        signature: Signature = None
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
        except _NotReusableHere as reason:
            # Until the next shared change, this signature goes straight to the full path.
            self._unreusable[signature] = (nodes, nodes.shared_epoch, str(reason))
            if len(self._unreusable) > MAX_SIGNATURES:
                self._unreusable.popitem(last=False)
            self.fallbacks[str(reason)] += 1
            return None
        except _NotReusable as reason:
            self.fallbacks[str(reason)] += 1
            return None
        self._last = entry
        self._last_rejections = []
        if not entry.pure:
            try:
                chosen = self._select_mixed(entry, state, pod, nodes)
            except _NotReusable as reason:
                self.fallbacks[str(reason)] += 1
                return None
            self._placed[pod.metadata.uid] = entry
            return chosen
        state.merge(entry.state)
        top = entry.best.top()
        if entry.best.size == 1 or len(top) == 1:
            row = int(top[0])
        else:
            # select_host: the k-th of the tied rows in ascending order, k drawn only on a tie.
            row = int(top[int(self.framework.context.rng.integers(len(top)))])
        self._placed[pod.metadata.uid] = entry
        if len(self._placed) > MAX_PLACED:
            self._placed.popitem(last=False)
        return row, entry.best.size

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
        for status, rows in self._last_rejections:
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
        spec = pod.spec
        affinity = spec.affinity
        if not self._mixable and (
            spec.topology_spread_constraints
            or (affinity is not None and (affinity.pod_affinity or affinity.pod_anti_affinity))
        ):
            # Its own terms keep InterPodAffinity or PodTopologySpread from skipping: known
            # without running PreFilter.
            raise _NotReusable("inter-pod affinity or spread terms")
        known = self._unreusable.get(signature)
        if known is not None and known[0] is nodes and known[1] == nodes.shared_epoch:
            self.known_unreusable += 1
            raise _NotReusable(known[2])
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
            if pre.status.plugin in self._others:
                raise _NotReusable(f"{pre.status.plugin} PreFilter rejected")
            raise _NotReusableHere("PreFilter rejected")
        if pre.result is not None and pre.result.node_names is not None:
            raise _NotReusableHere("PreFilter narrowed the nodes")
        others = self._others
        filter_skips = state.skip_filter_plugins
        pure = self._all_skip(framework.pre_filter_plugins, filter_skips)
        # The kept results are the node-local plugins' only.
        local_filter_skips = filter_skips - others
        state.skip_filter_plugins = local_filter_skips | others
        outcome = framework.run_filter_plugins(state, pod, nodes, ALL_ROWS)
        if not outcome.status.is_success():
            raise _NotReusable("Filter failed")
        feasible_rows = nodes.row_indices(outcome.feasible)
        if feasible_rows.shape[0] == 0:
            raise _NotReusable("no node fits")
        status = framework.run_pre_score_plugins(state, pod, nodes, feasible_rows)
        if not status.is_success():
            raise _NotReusableHere("PreScore failed")
        pure = pure and self._all_skip(framework.pre_score_plugins, state.skip_score_plugins)
        local_score_skips = state.skip_score_plugins - others
        state.skip_score_plugins = local_score_skips | others
        n = len(nodes)
        entry = _Entry(
            state=state,
            columns=nodes,
            epoch=nodes.shared_epoch,
            seen=nodes.row_log_base + len(nodes.row_log),
            scorers=[],
            feasible=np.zeros(n, dtype=np.bool_),
            status_ids=np.full(n, -1, dtype=np.int32),
            statuses=[],
            status_index={},
            status_rows=Counter(),
            totals=np.zeros(n, dtype=np.int64),
            best=BestRows(feasible_rows[:0], np.zeros(0, dtype=np.int64)),
            next_feasible=np.zeros(n, dtype=np.bool_),
            next_status_ids=np.full(n, -1, dtype=np.int32),
            next_valid=np.zeros(n, dtype=np.bool_),
            inter_pod_epoch=nodes.inter_pod_epoch,
            pure=pure,
            local_skips=(local_filter_skips, local_score_skips),
        )
        if not pure and not self._mixable:
            raise _NotReusableHere(f"{self._first_not_skipped(state, pod, nodes)} did not skip")
        skip = state.skip_score_plugins
        for name, plugin, weight, normalizer in framework.score_plugins:
            if not (skip and name in skip):
                raw, weighted, ahead = (np.zeros(n, dtype=np.int64) for _ in range(3))
                entry.scorers.append(
                    _Scorer(name, plugin, weight, normalizer, raw, weighted, ahead)
                )
        every_row = np.arange(n, dtype=np.intp)
        self._apply(entry, pod, self._results(entry, pod, nodes, every_row, outcome))
        self._look_ahead(entry, pod, nodes, every_row)
        self.builds += 1
        return entry

    def _all_skip(self, plugins: Sequence[tuple[str, object]], skipped: set[str]) -> bool:
        return all(name in skipped for name, _ in plugins if name in self._others)

    def _first_not_skipped(self, state: CycleState, pod: Pod, nodes: NodeColumns) -> str:
        """The first plugin reading other nodes that did not skip (for the fallback reason),
        found by asking each again."""
        probe = CycleState()
        for name, plugin in self.framework.pre_filter_plugins:
            if name in self._others and plugin.pre_filter(probe, pod, nodes)[1].code != Code.SKIP:
                return name
        return next(name for name, _ in self.framework.pre_score_plugins if name in self._others)

    def _still_pure(self, entry: _Entry, pod: Pod, nodes: NodeColumns) -> bool:
        """After a change of pods with inter-pod terms: do the plugins that read other nodes
        still skip for this signature?"""
        probe = CycleState()
        for name, plugin in self.framework.pre_filter_plugins:
            if name in self._others and plugin.pre_filter(probe, pod, nodes)[1].code != Code.SKIP:
                return False
        rows = np.flatnonzero(entry.feasible).astype(np.intp)
        for name, pre_score in self.framework.pre_score_plugins:
            if (
                name in self._others
                and pre_score.pre_score(probe, pod, nodes, rows).code != Code.SKIP
            ):
                return False
        return True

    # ------------------------------------------------------------ mixed entries
    def _select_mixed(
        self, entry: _Entry, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[int, int]:
        """The full cycle's answer from the kept node-local results plus this cycle's run of
        the plugins that read other nodes (as the full cycle runs them: PreFilter, Filter on
        the rows the others let through, PreScore and Score on the feasible rows)."""
        framework = self.framework
        others = self._others
        state.merge(entry.state)
        filter_skips = set(entry.local_skips[0])
        for name, plugin in framework.pre_filter_plugins:
            if name not in others:
                continue
            narrowed, status = plugin.pre_filter(state, pod, nodes)
            if status.code == Code.SKIP:
                filter_skips.add(name)
            elif not status.is_success() or (narrowed is not None and narrowed.node_names):
                raise _NotReusable(f"{name} PreFilter did not succeed")
        candidates = np.flatnonzero(entry.feasible).astype(np.intp)
        # Only the others' Filters, in profile order, on the rows the node-local ones kept.
        state.skip_filter_plugins = self._local_names | filter_skips
        outcome = framework.run_filter_plugins(state, pod, nodes, candidates)
        state.skip_filter_plugins = filter_skips
        if not outcome.status.is_success():
            raise _NotReusable("Filter failed")
        feasible = nodes.row_indices(outcome.feasible)
        if feasible.shape[0] == 0:
            raise _NotReusable("no node fits")
        self._last_rejections = list(outcome.rejections)
        self.mixed += 1
        if feasible.shape[0] == 1:
            return int(feasible[0]), 1
        score_skips = set(entry.local_skips[1])
        for name, pre_score in framework.pre_score_plugins:
            if name in others:
                status = pre_score.pre_score(state, pod, nodes, feasible)
                if status.code == Code.SKIP:
                    score_skips.add(name)
                elif not status.is_success():
                    raise _NotReusable(f"{name} PreScore failed")
        state.skip_score_plugins = score_skips
        if self._all_skip(framework.pre_filter_plugins, filter_skips) and self._all_skip(
            framework.pre_score_plugins, score_skips
        ):
            # Every plugin reading other nodes skipped: the kept results answer from now on
            # (until a pod with inter-pod terms comes or goes).
            entry.pure = True
        totals = np.zeros(feasible.shape[0], dtype=np.int64)
        for scorer in entry.scorers:
            if scorer.normalizer is None:
                totals += scorer.weighted[feasible]
                continue
            kept = scorer.raw[feasible]
            if (int(kept.min()), int(kept.max())) == scorer.bounds():
                totals += scorer.weighted[feasible]
            else:  # normalized over fewer rows than the kept scores were
                totals += self._normalize_over(state, pod, scorer, kept) * scorer.weight
        for name, score_plugin, weight, normalizer in framework.score_plugins:
            if name not in others or name in score_skips:
                continue
            raw = score_plugin.score(state, pod, nodes, feasible)
            if isinstance(raw, Status) or raw.shape[0] != feasible.shape[0]:
                raise _NotReusable(f"{name} Score failed")
            scores = raw.astype(np.int64, copy=False)
            if normalizer is not None:
                out = normalizer.normalize_score(state, pod, scores)
                if isinstance(out, Status):
                    raise _NotReusable(f"{name} NormalizeScore failed")
                scores = out.astype(np.int64, copy=False)
            if scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE:
                raise _NotReusable(f"{name} score out of range")
            totals += scores * weight
        return int(feasible[self._select_host(totals, framework.context.rng)]), int(
            feasible.shape[0]
        )

    def _normalize_over(self, state: CycleState, pod: Pod, scorer: _Scorer, raw: Int64s) -> Int64s:
        assert scorer.normalizer is not None
        out = scorer.normalizer.normalize_score(state, pod, raw)
        if isinstance(out, Status):
            raise _NotReusable(f"{scorer.name} NormalizeScore failed")
        scores = out.astype(np.int64, copy=False)
        if scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE:
            raise _NotReusable(f"{scorer.name} score out of range")
        return scores

    # ----------------------------------------------------------- evaluating
    def _evaluate(
        self, entry: _Entry, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]
    ) -> _Results:
        """Run the Filter and Score plugins on `rows` of `nodes`."""
        outcome = self.framework.run_filter_plugins(entry.state, pod, nodes, rows)
        if not outcome.status.is_success():
            raise _NotReusable("Filter failed")
        return self._results(entry, pod, nodes, rows, outcome)

    def _results(
        self,
        entry: _Entry,
        pod: Pod,
        nodes: NodeColumns,
        rows: NDArray[np.intp],
        outcome: FilterOutcome,
    ) -> _Results:
        self.rows_evaluated += int(rows.shape[0])
        ok = nodes.row_indices(outcome.feasible)
        feasible = np.zeros(rows.shape[0], dtype=np.bool_)
        feasible[np.searchsorted(rows, ok)] = True
        status_ids = np.full(rows.shape[0], -1, dtype=np.int32)
        for status, rejected in outcome.rejections:
            status_id = entry.status_index.get(status)
            if status_id is None:
                status_id = entry.status_index[status] = len(entry.statuses)
                entry.statuses.append(status)
            status_ids[np.searchsorted(rows, rejected)] = status_id
        raws = []
        for scorer in entry.scorers:
            raw = np.zeros(rows.shape[0], dtype=np.int64)
            scores = scorer.plugin.score(entry.state, pod, nodes, ok)
            if isinstance(scores, Status) or scores.shape[0] != ok.shape[0]:
                raise _NotReusable(f"{scorer.name} Score failed")
            raw[feasible] = scores
            raws.append(raw)
        return _Results(rows, feasible, status_ids, raws)

    def _look_ahead(
        self, entry: _Entry, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]
    ) -> None:
        """Evaluate `rows` as they will be once one more pod of the signature is bound on
        each: the next pod's binding then updates its row without a plugin call."""
        scratch = Scratch(nodes)
        scratch.add_pod_to_rows(rows, pod)
        ahead = self._evaluate(entry, pod, scratch.columns, rows)
        entry.next_feasible[rows] = ahead.feasible
        entry.next_status_ids[rows] = ahead.status_ids
        for scorer, raw in zip(entry.scorers, ahead.raws, strict=True):
            scorer.next_raw[rows] = raw
        entry.next_valid[rows] = True

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

    # ------------------------------------------------------------- updating
    def _apply(self, entry: _Entry, pod: Pod, results: _Results) -> None:
        """Make `results` the entry's current view of their rows."""
        rows, feasible = results.rows, results.feasible
        was = rows[entry.feasible[rows]]
        small = rows.shape[0] <= SMALL_CHANGE
        if small:
            for row in was.tolist():
                entry.best.remove(row, int(entry.totals[row]))
        old_ids = entry.status_ids[rows]
        entry.status_rows.subtract(old_ids[old_ids >= 0].tolist())
        entry.status_rows.update(results.status_ids[~feasible].tolist())
        entry.status_ids[rows] = results.status_ids
        entry.feasible[rows] = feasible
        renormalize = not small
        for scorer, raw in zip(entry.scorers, results.raws, strict=True):
            if scorer.normalizer is not None:
                before = scorer.bounds()
                scorer.values.subtract(scorer.raw[was].tolist())
                scorer.values += Counter()  # drop the rows' old values that reached 0
                scorer.values.update(raw[feasible].tolist())
                renormalize = renormalize or scorer.bounds() != before
            scorer.raw[rows] = raw
        if renormalize:
            # A normalizer's minimum or maximum moved (or many rows changed): every
            # feasible row's score is recomputed and the best-row structure rebuilt.
            every = np.flatnonzero(entry.feasible).astype(np.intp)
            self._retotal(entry, pod, every)
            entry.best = BestRows(every, entry.totals[every])
            return
        now = rows[feasible]
        totals = self._retotal(entry, pod, now)
        for row, total in zip(now.tolist(), totals.tolist(), strict=True):
            entry.best.add(row, total)

    def _apply_row(
        self, entry: _Entry, pod: Pod, row: int, feasible: bool, status_id: int, raws: list[int]
    ) -> None:
        """`_apply` for one row, in plain Python (numpy's per-call cost dominates there)."""
        was = bool(entry.feasible[row])
        if was:
            entry.best.remove(row, int(entry.totals[row]))
        old_id = int(entry.status_ids[row])
        if old_id >= 0:
            entry.status_rows[old_id] -= 1
        if not feasible:
            entry.status_rows[status_id] += 1
        entry.status_ids[row] = status_id
        entry.feasible[row] = feasible
        renormalize = False
        for scorer, raw in zip(entry.scorers, raws, strict=True):
            if scorer.normalizer is not None:
                before = scorer.bounds()
                values = scorer.values
                if was:
                    old = int(scorer.raw[row])
                    values[old] -= 1
                    if not values[old]:
                        del values[old]
                if feasible:
                    values[raw] += 1
                renormalize = renormalize or scorer.bounds() != before
            scorer.raw[row] = raw
        if renormalize:
            every = np.flatnonzero(entry.feasible).astype(np.intp)
            self._retotal(entry, pod, every)
            entry.best = BestRows(every, entry.totals[every])
            return
        if not feasible:
            return
        total = 0
        for scorer, raw in zip(entry.scorers, raws, strict=True):
            score = (
                raw if scorer.normalizer is None else self._normalize_one(entry, scorer, pod, raw)
            )
            if not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                raise _NotReusable(f"{scorer.name} score out of range")
            weighted = score * scorer.weight
            scorer.weighted[row] = weighted
            total += weighted
        entry.totals[row] = total
        entry.best.add(row, total)

    def _normalize_one(self, entry: _Entry, scorer: _Scorer, pod: Pod, raw: int) -> int:
        """One row's normalized score, remembered per (raw, minimum, maximum): that is all a
        node-local normalizer reads, and a signature's state does not change."""
        key = (raw, *scorer.bounds())
        score = scorer.normalized.get(key)
        if score is None:
            score = int(self._normalize(entry, scorer, pod, np.array([raw], dtype=np.int64))[0])
            scorer.normalized[key] = score
        return score

    def _retotal(self, entry: _Entry, pod: Pod, rows: NDArray[np.intp]) -> Int64s:
        totals = np.zeros(rows.shape[0], dtype=np.int64)
        for scorer in entry.scorers:
            weighted = self._normalize(entry, scorer, pod, scorer.raw[rows]) * scorer.weight
            scorer.weighted[rows] = weighted
            totals += weighted
        entry.totals[rows] = totals
        return totals

    def _refresh(self, entry: _Entry, pod: Pod, nodes: NodeColumns) -> bool:
        """Bring the entry up to date; False when it must be rebuilt instead.

        A row whose only change is one more pod of this signature, with its look-ahead
        current, takes the look-ahead ("promoted"); any other changed row runs the plugins.
        """
        if entry.columns is not nodes or entry.epoch != nodes.shared_epoch:
            return False
        start = entry.seen - nodes.row_log_base
        if start < 0:
            return False
        if entry.inter_pod_epoch != nodes.inter_pod_epoch:
            entry.inter_pod_epoch = nodes.inter_pod_epoch
            # A mixed entry runs those plugins anyway (and learns there when they skip).
            if entry.pure and not self._still_pure(entry, pod, nodes):
                if not self._mixable:
                    return False
                entry.pure = False
        changes = nodes.row_log[start:]
        if changes:
            entry.seen = nodes.row_log_base + len(nodes.row_log)
            promoted, evaluated = self._sort_changes(entry, changes)
            if len(evaluated) * REBUILD_FRACTION > len(nodes):
                return False
            if len(promoted) == 1 and not evaluated:
                (row,) = promoted
                scores = [int(scorer.next_raw[row]) for scorer in entry.scorers]
                feasible = bool(entry.next_feasible[row])
                self._apply_row(entry, pod, row, feasible, int(entry.next_status_ids[row]), scores)
                self.rows_promoted += 1
            elif promoted:
                rows = np.array(sorted(promoted), dtype=np.intp)
                raws = [scorer.next_raw[rows] for scorer in entry.scorers]
                ahead = _Results(rows, entry.next_feasible[rows], entry.next_status_ids[rows], raws)
                self._apply(entry, pod, ahead)
                self.rows_promoted += len(promoted)
            if evaluated:
                rows = np.array(sorted(evaluated), dtype=np.intp)
                self._apply(entry, pod, self._evaluate(entry, pod, nodes, rows))
            changed = promoted | evaluated
            entry.next_valid[np.fromiter(changed, dtype=np.intp, count=len(changed))] = False
            entry.stale |= changed
            if len(entry.stale) >= LOOKAHEAD_BATCH:
                rows = np.array(sorted(entry.stale), dtype=np.intp)
                entry.stale.clear()
                self._look_ahead(entry, pod, nodes, rows)
        return entry.best.size > 0

    def _sort_changes(
        self, entry: _Entry, changes: list[tuple[int, str]]
    ) -> tuple[set[int], set[int]]:
        """(rows to promote from the look-ahead, rows to evaluate)."""
        placed = self._placed
        if len(changes) == 1:
            row, uid = changes[0]
            if uid and placed.get(uid) is entry and entry.next_valid[row]:
                del placed[uid]
                return {row}, set()
            return set(), {row}
        per_row = Counter(row for row, _ in changes)
        promoted: set[int] = set()
        evaluated: set[int] = set()
        for row, uid in changes:
            if per_row[row] == 1 and uid and placed.get(uid) is entry and entry.next_valid[row]:
                del placed[uid]
                promoted.add(row)
            else:
                evaluated.add(row)
        return promoted, evaluated


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


def _others(framework: Framework) -> set[str]:
    """The cycle's plugins that read other nodes (declared WHEN_SKIPPED)."""
    points: list[Sequence[tuple[str, object]]] = [
        framework.pre_filter_plugins,
        framework.filter_plugins,
        framework.pre_score_plugins,
        [(name, plugin) for name, plugin, _, _ in framework.score_plugins],
    ]
    return {
        name
        for plugins in points
        for name, plugin in plugins
        if getattr(plugin, "signature_reuse", None) == WHEN_SKIPPED
    }


def _others_filter_last(framework: Framework, others: set[str]) -> bool:
    """Whether every Filter that reads other nodes comes after every node-local one: then a
    node rejected by both is reported under the node-local plugin in either evaluation, and
    mixed entries give the full cycle's diagnosis."""
    names = [name for name, _ in framework.filter_plugins]
    first_other = next((i for i, name in enumerate(names) if name in others), len(names))
    return all(name in others for name in names[first_other:])
