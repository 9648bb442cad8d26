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
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    Diagnosis,
)
from scheduling.framework.kept import (
    ChurnedError,
    Entry,
    NotReusable,
    NotReusableHere,
    ReuseStats,
    Scorer,
    churned,
    in_range,
    normalized,
)
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
    from scheduling.framework.runtime import Framework

MAX_SIGNATURES = 256
"""Entries kept per profile (least recently used dropped): each holds a few arrays of N."""
LOOKAHEAD_BATCH = 64
"""Rows whose look-ahead is recomputed together (one scratch copy of the columns)."""
SMALL_CHANGE = 64
"""Up to this many changed rows update the best-row structure row by row, else rebuild it."""
MAX_PLACED = 1 << 16
"""Placements remembered for their look-ahead (older ones are evaluated when they bind)."""

Int64s = NDArray[np.int64]


class SignatureCache:
    """Per profile: signature -> the Filter and Score results of every node, kept current."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self._entries: OrderedDict[Signature, Entry] = OrderedDict()
        self._placed: OrderedDict[str, Entry] = OrderedDict()
        """uid -> the entry that chose the pod's node (its binding there is one step ahead)."""
        self._cold: OrderedDict[Signature, tuple[NodeColumns, int]] = OrderedDict()
        """signature -> (columns, row-log position at its last pod): its pods take the full
        cycle, without an entry, while more than 1/REBUILD_FRACTION of the rows change
        between two of them (`_warm`)."""
        self._unreusable: OrderedDict[Signature, tuple[NodeColumns, int, int, str]] = OrderedDict()
        """signature -> (columns, shared and inter-pod epochs, reason): known not reusable
        until either moves."""
        self.stats = ReuseStats()
        self._blocker = _unreusable_plugin(framework)
        self._others = _others(framework)
        """Names of the plugins evaluated in full each cycle unless they skip."""
        self._mixable = _others_filter_last(framework, self._others)
        self._other_filters = self._others & _names(
            framework.pre_filter_plugins, framework.filter_plugins
        )
        """Those at PreFilter or Filter: pure entries need every one of them to skip."""
        self._other_scores = self._others & _names(
            framework.pre_score_plugins, [(n, p) for n, p, _, _ in framework.score_plugins]
        )
        """Those at PreScore or Score: pure entries need every one of them to skip."""
        self._last: Entry | None = None
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
        self._cold.clear()
        self._unreusable.clear()
        self._placed.clear()

    def select(self, state: CycleState, pod: Pod, nodes: NodeColumns) -> tuple[int, int] | None:
        """(chosen row, feasible nodes) from the entry of the pod's signature, with `state`
        filled as PreFilter and PreScore would fill it; None: run the full cycle (which
        also reports whatever made this one give up)."""
        try:
            signature = self._eligible(pod, nodes)
        except NotReusable as reason:
            self.stats.fallbacks[str(reason)] += 1
            return None
        try:
            entry = self._current(signature, pod, nodes)
        except NotReusableHere as reason:
            # Until an epoch moves, this signature goes straight to the full path.
            epochs = (nodes.shared_epoch, nodes.inter_pod_epoch)
            self._unreusable[signature] = (nodes, *epochs, str(reason))
            if len(self._unreusable) > MAX_SIGNATURES:
                self._unreusable.popitem(last=False)
            self.stats.fallbacks[str(reason)] += 1
            return None
        except NotReusable as reason:
            self.stats.fallbacks[str(reason)] += 1
            return None
        except Exception as err:  # noqa: BLE001 - a plugin bug: the full cycle reports it
            self._entries.pop(signature, None)
            self.stats.fallbacks[f"a plugin raised {type(err).__name__}"] += 1
            return None
        self._last = entry
        self._last_rejections = []
        if not entry.pure:
            work = CycleState()  # the caller's state stays clean if this gives up
            try:
                chosen = self._select_mixed(entry, work, pod, nodes)
            except NotReusable as reason:
                self.stats.fallbacks[str(reason)] += 1
                return None
            except Exception as err:  # noqa: BLE001 - a plugin bug: the full cycle reports it
                self.stats.fallbacks[f"a plugin raised {type(err).__name__}"] += 1
                return None
            state.merge(work)
            self._remember(pod, entry)
            return chosen
        state.merge(entry.state)
        top = entry.best.top()
        if entry.best.size == 1 or len(top) == 1:
            row = int(top[0])
        else:
            # select_host: the k-th of the tied rows in ascending order, k drawn only on a tie.
            row = int(top[int(self.framework.context.rng.integers(len(top)))])
        self._remember(pod, entry)
        return row, entry.best.size

    def _remember(self, pod: Pod, entry: Entry) -> None:
        """The entry placed this pod: its binding is one step of the entry's look-ahead."""
        self._placed[pod.metadata.uid] = entry
        if len(self._placed) > MAX_PLACED:
            self._placed.popitem(last=False)

    def _current(self, signature: Signature, pod: Pod, nodes: NodeColumns) -> Entry:
        """The signature's entry, brought up to date or built. An entry whose update fails
        part way is dropped (the next pod of the signature builds a new one). One that would
        re-evaluate more than 1/REBUILD_FRACTION of the rows is rebuilt if it served pods
        since it was built (its signature's pods come together: a LocalQueue's batch);
        else it is dropped and the signature goes cold, its pods taking the full cycle
        (`_warm`): a build costs the full cycle's Filter and Score work and more, and on 19
        nodes with 90 signatures taking turns, rebuilding for every pod made reuse cost
        2.7x the full cycle."""
        entry = self._entries.get(signature)
        if entry is None:
            self._warm(signature, nodes)
        else:
            try:
                if self._refresh(entry, pod, nodes):
                    self._entries.move_to_end(signature)
                    self.stats.hits += 1
                    entry.hits += 1
                    return entry
            except ChurnedError:
                self._entries.pop(signature, None)
                if not entry.hits:
                    self._cool(signature, nodes)
                    raise
            except BaseException:
                self._entries.pop(signature, None)
                raise
        self._entries.pop(signature, None)
        entry = self._build(signature, pod, nodes)
        self._entries[signature] = entry
        if len(self._entries) > MAX_SIGNATURES:
            self._entries.popitem(last=False)
        return entry

    def _cool(self, signature: Signature, nodes: NodeColumns) -> None:
        """The signature's pods take the full cycle until two come closer together."""
        self._cold[signature] = (nodes, nodes.row_log_base + len(nodes.row_log))
        self._cold.move_to_end(signature)
        if len(self._cold) > MAX_SIGNATURES:
            self._cold.popitem(last=False)

    def _warm(self, signature: Signature, nodes: NodeColumns) -> None:
        """A cold signature's pod builds an entry when at most 1/REBUILD_FRACTION of the
        rows changed since the signature's last pod; else ChurnedError, and it stays cold."""
        cold = self._cold.get(signature)
        if cold is None:
            return
        columns, since = cold
        if columns is nodes:
            if since < nodes.row_log_base:  # the log was trimmed past it: many changes
                self._cool(signature, nodes)
                raise ChurnedError
            changed = {row for row, _ in nodes.row_log[since - nodes.row_log_base :]}
            if churned(len(changed), len(nodes)):
                self._cool(signature, nodes)
                raise ChurnedError
        del self._cold[signature]

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

    def _refresh(self, entry: Entry, pod: Pod, nodes: NodeColumns) -> bool:
        """Bring the entry up to date; False when it must be rebuilt instead."""
        if entry.columns is not nodes or entry.epoch != nodes.shared_epoch:
            return False
        if entry.seen < nodes.row_log_base:
            return False  # the log was trimmed past what the entry saw
        if entry.inter_pod_epoch != nodes.inter_pod_epoch:
            entry.inter_pod_epoch = nodes.inter_pod_epoch
            # A mixed entry runs those plugins anyway (and learns there when they skip).
            rows = np.flatnonzero(entry.feasible).astype(np.intp) if entry.pure else None
            if rows is not None and self._first_other_not_skipping(pod, nodes, rows):
                if not self._mixable:
                    return False
                entry.pure = False
        return entry.refresh_rows(pod, nodes, self._placed)

    # ------------------------------------------------------------ eligibility
    def _eligible(self, pod: Pod, nodes: NodeColumns) -> Signature:
        framework = self.framework
        if self._blocker:
            raise NotReusable(f"{self._blocker} does not declare signature_reuse")
        signature = pod_signature(pod)
        if signature is None:
            raise NotReusable("nominated node")
        spec = pod.spec
        affinity = spec.affinity
        if not self._mixable and (
            spec.topology_spread_constraints
            or (affinity is not None and (affinity.pod_affinity or affinity.pod_anti_affinity))
        ):
            # Its own terms keep InterPodAffinity or PodTopologySpread from skipping: known
            # without running PreFilter.
            raise NotReusable("inter-pod affinity or spread terms")
        known = self._unreusable.get(signature)
        if known is not None and known[:3] == (nodes, nodes.shared_epoch, nodes.inter_pod_epoch):
            self.stats.known_unreusable += 1
            raise NotReusable(known[3])
        if framework.extenders():
            raise NotReusable("extenders")
        if framework.nominated_pods():
            raise NotReusable("nominated pods")
        if not framework.has_score_plugins():
            raise NotReusable("no score plugins")
        num_nodes = len(nodes)
        if self._to_find(self._percentage(framework), num_nodes) < num_nodes:
            raise NotReusable("percentageOfNodesToScore below 100")
        return signature

    # ------------------------------------------------------------- building
    def _build(self, signature: Signature, pod: Pod, nodes: NodeColumns) -> Entry:
        framework = self.framework
        state = CycleState()
        pre = framework.run_pre_filter_plugins(state, pod, nodes)
        if not pre.status.is_success():
            if pre.status.plugin in self._others:
                raise NotReusable(f"{pre.status.plugin} PreFilter rejected")
            raise NotReusableHere("PreFilter rejected")
        if pre.result is not None and pre.result.node_names is not None:
            raise NotReusableHere("PreFilter narrowed the nodes")
        others = self._others
        filter_skips = state.skip_filter_plugins
        pure = self._all_skip(self._other_filters, filter_skips)
        # The kept results are the node-local plugins' only.
        local_filter_skips = filter_skips - others
        state.skip_filter_plugins = local_filter_skips | others
        outcome = framework.run_filter_plugins(state, pod, nodes, ALL_ROWS)
        if not outcome.status.is_success():
            raise NotReusable("Filter failed")
        feasible_rows = nodes.row_indices(outcome.feasible)
        if feasible_rows.shape[0] == 0:
            raise NotReusable("no node fits")
        status = framework.run_pre_score_plugins(state, pod, nodes, feasible_rows)
        if not status.is_success():
            raise NotReusableHere("PreScore failed")
        pure = pure and self._all_skip(self._other_scores, state.skip_score_plugins)
        local_score_skips = state.skip_score_plugins - others
        state.skip_score_plugins = local_score_skips | others
        n = len(nodes)
        entry = Entry(
            framework=framework,
            signature=signature,
            stats=self.stats,
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
            other = self._first_other_not_skipping(pod, nodes, feasible_rows)
            other = other or "a plugin reading other nodes"
            raise NotReusableHere(f"{other} did not skip")
        skip = state.skip_score_plugins
        for name, plugin, weight, normalizer in framework.score_plugins:
            if not (skip and name in skip):
                raw, weighted, ahead = (np.zeros(n, dtype=np.int64) for _ in range(3))
                entry.scorers.append(Scorer(name, plugin, weight, normalizer, raw, weighted, ahead))
        every_row = np.arange(n, dtype=np.intp)
        entry.apply(pod, entry.results(pod, nodes, every_row, outcome))
        entry.look_ahead(pod, nodes, every_row)
        self.stats.builds += 1
        return entry

    @staticmethod
    def _all_skip(names: set[str], skipped: set[str]) -> bool:
        return names <= skipped

    def _first_other_not_skipping(
        self, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]
    ) -> str:
        """The first plugin reading other nodes that does not Skip at PreFilter, or at
        PreScore over `rows`, for `pod` now ("" when all do), asked on a probe state."""
        probe = CycleState()
        for name, plugin in self.framework.pre_filter_plugins:
            if name in self._others and plugin.pre_filter(probe, pod, nodes)[1].code != Code.SKIP:
                return name
        for name, pre_score in self.framework.pre_score_plugins:
            if (
                name in self._others
                and pre_score.pre_score(probe, pod, nodes, rows).code != Code.SKIP
            ):
                return name
        return ""

    # ------------------------------------------------------------ mixed entries
    def _select_mixed(
        self, entry: Entry, state: CycleState, pod: Pod, nodes: NodeColumns
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
            elif not status.is_success() or (
                narrowed is not None and narrowed.node_names is not None
            ):
                raise NotReusable(f"{name} PreFilter did not succeed")
        candidates = np.flatnonzero(entry.feasible).astype(np.intp)
        # Only the others' Filters, in profile order, on the rows the node-local ones kept.
        state.skip_filter_plugins = self._local_names | filter_skips
        outcome = framework.run_filter_plugins(state, pod, nodes, candidates)
        state.skip_filter_plugins = filter_skips
        if not outcome.status.is_success():
            raise NotReusable("Filter failed")
        feasible = nodes.row_indices(outcome.feasible)
        if feasible.shape[0] == 0:
            raise NotReusable("no node fits")
        self._last_rejections = list(outcome.rejections)
        self.stats.mixed += 1
        if feasible.shape[0] == 1:
            return int(feasible[0]), 1
        score_skips = set(entry.local_skips[1])
        for name, pre_score in framework.pre_score_plugins:
            if name in others:
                status = pre_score.pre_score(state, pod, nodes, feasible)
                if status.code == Code.SKIP:
                    score_skips.add(name)
                elif not status.is_success():
                    raise NotReusable(f"{name} PreScore failed")
        state.skip_score_plugins = score_skips
        if self._all_skip(self._other_filters, filter_skips) and self._all_skip(
            self._other_scores, score_skips
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
                scores = normalized(scorer.name, scorer.normalizer, state, pod, kept)
                totals += in_range(scorer.name, scores) * scorer.weight
        for name, score_plugin, weight, normalizer in framework.score_plugins:
            if name not in others or name in score_skips:
                continue
            raw = score_plugin.score(state, pod, nodes, feasible)
            if isinstance(raw, Status) or raw.shape[0] != feasible.shape[0]:
                raise NotReusable(f"{name} Score failed")
            scores = raw.astype(np.int64, copy=False)
            if normalizer is not None:
                scores = normalized(name, normalizer, state, pod, scores)
            totals += in_range(name, scores) * weight
        return int(feasible[self._select_host(totals, framework.context.rng)]), int(
            feasible.shape[0]
        )


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


def _names(*points: Sequence[tuple[str, object]]) -> set[str]:
    return {name for plugins in points for name, _ in plugins}
