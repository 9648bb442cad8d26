"""TaintToleration (upstream pkg/scheduler/framework/plugins/tainttoleration).

Nodes share few distinct taint lists, so tolerations are evaluated once per distinct list
(`nodes.taint_sets`) and the verdicts reach the rows through one `take` on `taint_set_of`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, StateKey
from scheduling.framework.interfaces import (
    FilterPlugin,
    FilterResult,
    Handle,
    NormalizeScorePlugin,
    PreScorePlugin,
    ScorePlugin,
)
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.helper import default_normalize_score
from shared.models import Pod, Taint, Toleration, tolerates_taint

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
_DO_NOT_SCHEDULE = frozenset({NO_SCHEDULE, NO_EXECUTE})


def untolerated_taint_reason(taint: Taint) -> str:
    """The Filter reason, naming the first untolerated taint.

    Upstream v1.25-v1.34.1 wording; since v1.35 (and 1.34.2+, kubernetes#134740) upstream
    says only "node(s) had untolerated taint(s)" so as not to expose taint values.
    """
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def first_untolerated_taint(
    taints: tuple[Taint, ...], tolerations: list[Toleration]
) -> Taint | None:
    """Upstream FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc, in node order."""
    for taint in taints:
        if taint.effect in _DO_NOT_SCHEDULE and not tolerates_taint(tolerations, taint):
            return taint
    return None


def prefer_no_schedule_tolerations(tolerations: list[Toleration]) -> list[Toleration]:
    """Tolerations that can tolerate a PreferNoSchedule taint (an empty effect means all)."""
    return [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]


def count_intolerable_prefer_no_schedule(
    taints: tuple[Taint, ...], tolerations: list[Toleration]
) -> int:
    return sum(
        1
        for taint in taints
        if taint.effect == PREFER_NO_SCHEDULE and not tolerates_taint(tolerations, taint)
    )


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations_prefer_no_schedule: list[Toleration]


_PRE_SCORE_KEY = StateKey[_PreScoreState]("PreScore" + names.TAINT_TOLERATION)


class TaintToleration:
    name: ClassVar[str] = names.TAINT_TOLERATION
    # NormalizeScore scales by the maximum raw score.
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        tolerations = pod.spec.tolerations
        # Per distinct taint list: index into `reasons`, or -1 when every taint is tolerated.
        verdict = np.full(len(nodes.taint_sets), -1, dtype=np.int32)
        reasons: dict[str, int] = {}
        for set_id, taints in enumerate(nodes.taint_sets):
            taint = first_untolerated_taint(taints, tolerations)
            if taint is not None:
                verdict[set_id] = reasons.setdefault(untolerated_taint_reason(taint), len(reasons))
        if not reasons:
            return None
        per_row = verdict[nodes.taint_set_of[rows]]
        ok = per_row < 0
        if ok.all():
            return None
        failures = [
            (Status.unresolvable(reason, plugin=self.name), per_row == index)
            for reason, index in reasons.items()
        ]
        return FilterResult(ok, [(status, mask) for status, mask in failures if mask.any()])

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        tolerations = prefer_no_schedule_tolerations(pod.spec.tolerations)
        state.write(_PRE_SCORE_KEY, _PreScoreState(tolerations))
        return SUCCESS

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        pre = state.get(_PRE_SCORE_KEY)
        if pre is None:
            return Status.error(
                f"failed to read {_PRE_SCORE_KEY.name!r} from cycleState", plugin=self.name
            )
        tolerations = pre.tolerations_prefer_no_schedule
        counts = np.fromiter(
            (count_intolerable_prefer_no_schedule(ts, tolerations) for ts in nodes.taint_sets),
            dtype=np.int64,
            count=len(nodes.taint_sets),
        )
        return counts[nodes.taint_set_of[rows]]

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        # More intolerable PreferNoSchedule taints is worse: reverse.
        return default_normalize_score(scores, reverse=True)


def new(args: object | None, handle: Handle) -> TaintToleration:
    return TaintToleration()


if TYPE_CHECKING:
    _filter: type[FilterPlugin] = TaintToleration
    _pre_score: type[PreScorePlugin] = TaintToleration
    _score: type[ScorePlugin] = TaintToleration
    _normalize: type[NormalizeScorePlugin] = TaintToleration
