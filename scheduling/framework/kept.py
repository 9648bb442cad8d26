"""One scheduling signature's kept Filter and Score results, and how they are kept current.

An `Entry` holds, for every node row, the Filter verdict (and the rejecting status), each
node-local Score plugin's raw and weighted score, the totals and the best rows (BestRows);
and a look-ahead: the same results as they will be once one more pod of the signature is
bound on the row. `refresh_rows` brings the rows whose pods changed up to date: a row whose
only change is one more pod this entry placed takes its look-ahead, any other runs the
plugins on those rows only. See reuse.py for when an entry may answer a cycle.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    NormalizeScorePlugin,
    ScorePlugin,
)
from scheduling.framework.scratch import Scratch
from scheduling.framework.signature import BestRows, Signature, placed_signature
from scheduling.framework.status import Status
from shared.models import Pod

if TYPE_CHECKING:
    from scheduling.framework.outcomes import FilterOutcome
    from scheduling.framework.runtime import Framework

REBUILD_FRACTION = 8
"""More than 1/8 of the rows changed since a signature's last pod: its entry is rebuilt, or,
when it served no pod since it was built, the pod takes the full cycle (`ChurnedError`)."""
LOOKAHEAD_BATCH = 64
"""Rows whose look-ahead is recomputed together (one scratch copy of the columns)."""
SMALL_CHANGE = 64
"""Up to this many changed rows update the best-row structure row by row, else rebuild it."""
FEW_ROWS = 8
"""Up to this many promoted rows are applied one by one in plain Python (`apply_row`, ~5 µs
a row); more go through numpy at once (`apply`, whose fixed cost is ~50 µs): two workers
each find a row or two the other's pods changed before most of their pods."""

Int64s = NDArray[np.int64]


class NotReusable(Exception):
    """This pod's cycle cannot be served from an entry; the reason is counted."""


class NotReusableHere(NotReusable):
    """Nor can any pod of its signature's, until a shared change (`shared_epoch`)."""


class ChurnedError(NotReusable):
    """More than 1/REBUILD_FRACTION of the rows changed since the signature's last pod."""

    def __init__(self) -> None:
        super().__init__("rows churned since the signature's last pod")


def churned(changed_rows: int, all_rows: int) -> bool:
    """Whether an entry that saw `changed_rows` of `all_rows` change is not worth keeping."""
    return changed_rows * REBUILD_FRACTION > all_rows


@dataclass(slots=True)
class ReuseStats:
    """What the signature cache did (the bench prints them; tests check them)."""

    hits: int = 0
    builds: int = 0
    rows_evaluated: int = 0
    """Rows run through the Filter and Score plugins (builds, changed rows, look-ahead)."""
    rows_promoted: int = 0
    """Changed rows brought up to date from the look-ahead, without a plugin call."""
    mixed: int = 0
    """Cycles answered by a mixed entry (the plugins reading other nodes run in full)."""
    known_unreusable: int = 0
    """Fallbacks decided from an earlier pod of the signature, without running PreFilter."""
    fallbacks: Counter[str] = field(default_factory=Counter)
    """Why a cycle took the full path, by reason (e.g. "nominated pods")."""


@dataclass(slots=True, eq=False)
class Scorer:
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
class Results:
    """Filter and Score results of some rows (ascending), aligned with `rows`."""

    rows: NDArray[np.intp]
    feasible: NDArray[np.bool_]
    status_ids: NDArray[np.int32]
    """-1 where feasible, else the rejecting status's index in the entry's `statuses`."""
    raws: list[Int64s]
    """Per scorer, the raw score (0 where infeasible)."""


@dataclass(slots=True, eq=False)
class Entry:
    """One signature's kept results on every node, and how they are kept current."""

    framework: Framework
    signature: Signature
    """The signature whose pods it serves."""
    stats: ReuseStats
    state: CycleState
    columns: NodeColumns
    epoch: int
    seen: int
    """Absolute position in the columns' row log up to which this entry is current."""
    scorers: list[Scorer]
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
    hits: int = 0
    """Pods it served since it was built: one that served none before its rows churned
    sends its signature cold (reuse.py `_current`)."""

    # ----------------------------------------------------------- evaluating
    def evaluate(self, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]) -> Results:
        """Run the Filter and Score plugins on `rows` of `nodes`."""
        outcome = self.framework.run_filter_plugins(self.state, pod, nodes, rows)
        if not outcome.status.is_success():
            raise NotReusable("Filter failed")
        return self.results(pod, nodes, rows, outcome)

    def results(
        self,
        pod: Pod,
        nodes: NodeColumns,
        rows: NDArray[np.intp],
        outcome: FilterOutcome,
    ) -> Results:
        self.stats.rows_evaluated += int(rows.shape[0])
        ok = nodes.row_indices(outcome.feasible)
        feasible = np.zeros(rows.shape[0], dtype=np.bool_)
        feasible[np.searchsorted(rows, ok)] = True
        status_ids = np.full(rows.shape[0], -1, dtype=np.int32)
        for status, rejected in outcome.rejections:
            status_id = self.status_index.get(status)
            if status_id is None:
                status_id = self.status_index[status] = len(self.statuses)
                self.statuses.append(status)
            status_ids[np.searchsorted(rows, rejected)] = status_id
        raws = []
        for scorer in self.scorers:
            raw = np.zeros(rows.shape[0], dtype=np.int64)
            raws.append(raw)
            if ok.shape[0] == 0:
                continue  # nothing to score (the full cycle scores feasible nodes only)
            scores = scorer.plugin.score(self.state, pod, nodes, ok)
            if isinstance(scores, Status) or scores.shape[0] != ok.shape[0]:
                raise NotReusable(f"{scorer.name} Score failed")
            raw[feasible] = scores
        return Results(rows, feasible, status_ids, raws)

    def look_ahead(self, pod: Pod, nodes: NodeColumns, rows: NDArray[np.intp]) -> None:
        """Evaluate `rows` as they will be once one more pod of the signature is bound on
        each: the next pod's binding then updates its row without a plugin call."""
        scratch = Scratch(nodes)
        scratch.add_pod_to_rows(rows, pod)
        ahead = self.evaluate(pod, scratch.columns, rows)
        self.next_feasible[rows] = ahead.feasible
        self.next_status_ids[rows] = ahead.status_ids
        for scorer, raw in zip(self.scorers, ahead.raws, strict=True):
            scorer.next_raw[rows] = raw
        self.next_valid[rows] = True

    def normalize(self, scorer: Scorer, pod: Pod, raw: Int64s) -> Int64s:
        """The normalized scores of `raw`, a subset of the scored rows: normalized together
        with the minimum and maximum over all of them, which is all a node-local
        normalizer reads."""
        if scorer.normalizer is None:
            return in_range(scorer.name, raw)
        low, high = scorer.bounds()
        together = np.concatenate((raw, np.array([low, high], dtype=np.int64)))
        scores = normalized(scorer.name, scorer.normalizer, self.state, pod, together)
        return in_range(scorer.name, scores[: raw.shape[0]])

    # ------------------------------------------------------------- updating
    def apply(self, pod: Pod, results: Results) -> None:
        """Make `results` the entry's current view of their rows."""
        rows, feasible = results.rows, results.feasible
        was = rows[self.feasible[rows]]
        small = rows.shape[0] <= SMALL_CHANGE
        if small:
            for row in was.tolist():
                self.best.remove(row, int(self.totals[row]))
        old_ids = self.status_ids[rows]
        self.status_rows.subtract(old_ids[old_ids >= 0].tolist())
        self.status_rows.update(results.status_ids[~feasible].tolist())
        self.status_ids[rows] = results.status_ids
        self.feasible[rows] = feasible
        renormalize = not small
        for scorer, raw in zip(self.scorers, results.raws, strict=True):
            if scorer.normalizer is not None:
                before = scorer.bounds()
                scorer.values.subtract(scorer.raw[was].tolist())
                scorer.values += Counter()  # drop the rows' old values that reached 0
                scorer.values.update(raw[feasible].tolist())
                renormalize = renormalize or scorer.bounds() != before
            scorer.raw[rows] = raw
        if renormalize:
            self.renormalize(pod)
            return
        now = rows[feasible]
        totals = self.retotal(pod, now)
        for row, total in zip(now.tolist(), totals.tolist(), strict=True):
            self.best.add(row, total)

    def apply_row(
        self, pod: Pod, row: int, feasible: bool, status_id: int, raws: list[int]
    ) -> None:
        """`_apply` for one row, in plain Python (numpy's per-call cost dominates there)."""
        was = bool(self.feasible[row])
        if was:
            self.best.remove(row, int(self.totals[row]))
        old_id = int(self.status_ids[row])
        if old_id >= 0:
            self.status_rows[old_id] -= 1
        if not feasible:
            self.status_rows[status_id] += 1
        self.status_ids[row] = status_id
        self.feasible[row] = feasible
        renormalize = False
        for scorer, raw in zip(self.scorers, raws, strict=True):
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
            self.renormalize(pod)
            return
        if not feasible:
            return
        total = 0
        for scorer, raw in zip(self.scorers, raws, strict=True):
            score = raw if scorer.normalizer is None else self.normalize_one(scorer, pod, raw)
            if not MIN_NODE_SCORE <= score <= MAX_NODE_SCORE:
                raise NotReusable(f"{scorer.name} score out of range")
            weighted = score * scorer.weight
            scorer.weighted[row] = weighted
            total += weighted
        self.totals[row] = total
        self.best.add(row, total)

    def renormalize(self, pod: Pod) -> None:
        """A normalizer's minimum or maximum moved (or many rows changed): every feasible
        row's score is recomputed and the best-row structure rebuilt."""
        every = np.flatnonzero(self.feasible).astype(np.intp)
        self.retotal(pod, every)
        self.best = BestRows(every, self.totals[every])

    def normalize_one(self, scorer: Scorer, pod: Pod, raw: int) -> int:
        """One row's normalized score, remembered per (raw, minimum, maximum): that is all a
        node-local normalizer reads, and a signature's state does not change."""
        key = (raw, *scorer.bounds())
        score = scorer.normalized.get(key)
        if score is None:
            score = int(self.normalize(scorer, pod, np.array([raw], dtype=np.int64))[0])
            scorer.normalized[key] = score
        return score

    def retotal(self, pod: Pod, rows: NDArray[np.intp]) -> Int64s:
        totals = np.zeros(rows.shape[0], dtype=np.int64)
        for scorer in self.scorers:
            weighted = self.normalize(scorer, pod, scorer.raw[rows]) * scorer.weight
            scorer.weighted[rows] = weighted
            totals += weighted
        self.totals[rows] = totals
        return totals

    def refresh_rows(self, pod: Pod, nodes: NodeColumns, placed: dict[str, Entry]) -> bool:
        """Bring the rows whose pods changed up to date (the caller checked the epochs);
        False when no row is feasible (the entry is rebuilt); ChurnedError when too many
        changed.

        A row whose only change is one more pod of this signature, with its look-ahead
        current, takes the look-ahead ("promoted"); any other changed row runs the plugins.
        """
        changes = nodes.row_log[self.seen - nodes.row_log_base :]
        if changes:
            self.seen = nodes.row_log_base + len(nodes.row_log)
            promoted, evaluated = self.sort_changes(changes, placed, nodes)
            if churned(len(evaluated), len(nodes)):
                raise ChurnedError
            if promoted and len(promoted) <= FEW_ROWS:
                for row in sorted(promoted):
                    scores = [int(scorer.next_raw[row]) for scorer in self.scorers]
                    feasible = bool(self.next_feasible[row])
                    self.apply_row(pod, row, feasible, int(self.next_status_ids[row]), scores)
                self.stats.rows_promoted += len(promoted)
            elif promoted:
                rows = np.array(sorted(promoted), dtype=np.intp)
                raws = [scorer.next_raw[rows] for scorer in self.scorers]
                ahead = Results(rows, self.next_feasible[rows], self.next_status_ids[rows], raws)
                self.apply(pod, ahead)
                self.stats.rows_promoted += len(promoted)
            if evaluated:
                rows = np.array(sorted(evaluated), dtype=np.intp)
                self.apply(pod, self.evaluate(pod, nodes, rows))
            changed = promoted | evaluated
            self.next_valid[np.fromiter(changed, dtype=np.intp, count=len(changed))] = False
            self.stale |= changed
            if len(self.stale) >= LOOKAHEAD_BATCH:
                rows = np.array(sorted(self.stale), dtype=np.intp)
                self.stale.clear()
                self.look_ahead(pod, nodes, rows)
        return self.best.size > 0

    def sort_changes(
        self, changes: list[tuple[int, str]], placed: dict[str, Entry], nodes: NodeColumns
    ) -> tuple[set[int], set[int]]:
        """(rows to promote from the look-ahead, rows to evaluate). A row whose only change
        is one more pod of this signature is promoted: a pod this entry placed, or one
        another worker (or another entry) placed whose signature is this one's, which on
        two workers is every other pod of a batch of like pods."""
        per_row = Counter(row for row, _ in changes) if len(changes) > 1 else None
        promoted: set[int] = set()
        evaluated: set[int] = set()
        for row, uid in changes:
            alone = per_row is None or per_row[row] == 1
            if alone and uid and self.next_valid[row] and self._one_more(row, uid, placed, nodes):
                promoted.add(row)
            else:
                evaluated.add(row)
        return promoted, evaluated

    def _one_more(self, row: int, uid: str, placed: dict[str, Entry], nodes: NodeColumns) -> bool:
        """Whether the pod `uid` counted on `row` is one more pod of this signature."""
        by = placed.get(uid)
        if by is self:
            del placed[uid]
            return True
        if by is not None:
            return False  # this worker placed it for another signature
        for pod in reversed(nodes.pods_by_node[row]):  # it was just added: near the end
            if pod.metadata.uid == uid:
                return placed_signature(pod) == self.signature
        return False


def normalized(
    name: str, normalizer: NormalizeScorePlugin, state: CycleState, pod: Pod, raw: Int64s
) -> Int64s:
    """`normalizer`'s scores for `raw` (NotReusable when it fails: the full cycle reports)."""
    out = normalizer.normalize_score(state, pod, raw)
    if isinstance(out, Status):
        raise NotReusable(f"{name} NormalizeScore failed")
    return out.astype(np.int64, copy=False)


def in_range(name: str, scores: Int64s) -> Int64s:
    """`scores`, when every one is in [MIN_NODE_SCORE, MAX_NODE_SCORE] (as RunScorePlugins
    requires); else NotReusable, and the full cycle reports the plugin's error."""
    if scores.shape[0] and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
        raise NotReusable(f"{name} score out of range")
    return scores
