"""PodTopologySpread (upstream pkg/scheduler/framework/plugins/podtopologyspread).

Extension points: PreFilter (+ AddPod/RemovePod extensions for preemption), Filter, PreScore,
Score, NormalizeScore. Pods without constraints of their own get the cluster defaults
(PodTopologySpreadArgs: the system hostname/zone constraints, or a List), but only when a
Service or their controller (ReplicationController, ReplicaSet, StatefulSet) selects them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, MissingStateError, StateKey
from scheduling.framework.interfaces import (
    FilterPlugin,
    FilterResult,
    Handle,
    NormalizeScorePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from scheduling.framework.signature import WHEN_SKIPPED, Reuse
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.helper.pod_updates import PodUpdates
from scheduling.plugins.podindex import (
    ClusterObjects,
    SelectorError,
    cluster_objects_of,
)
from scheduling.plugins.podtopologyspread import filtering, scoring
from scheduling.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    SYSTEM_DEFAULT_CONSTRAINTS,
    Constraint,
    default_selector,
    filter_constraints,
    with_selector,
)
from shared.config.plugin_args import SYSTEM_DEFAULTING, PodTopologySpreadArgs
from shared.models import Pod, TopologySpreadConstraint

PRE_FILTER_KEY = StateKey[filtering.PreFilterState]("PreFilter" + names.POD_TOPOLOGY_SPREAD)
PRE_SCORE_KEY = StateKey[scoring.PreScoreState]("PreScore" + names.POD_TOPOLOGY_SPREAD)


class PodTopologySpreadArgsError(ValueError):
    """The plugin args are not PodTopologySpreadArgs or do not validate."""


class PodTopologySpread(PodUpdates, prefilter_key=PRE_FILTER_KEY, update=filtering.update_with_pod):
    # PreFilterExtensions from PodUpdates: preemption removes victims, nominated pods are added.
    name: ClassVar[str] = names.POD_TOPOLOGY_SPREAD
    # Counts matching pods across domains: reused only while PreFilter and PreScore skip.
    signature_reuse: ClassVar[Reuse] = WHEN_SKIPPED

    def __init__(
        self, args: PodTopologySpreadArgs | None = None, objects: ClusterObjects | None = None
    ) -> None:
        args = args if args is not None else PodTopologySpreadArgs()
        errors = args.validate("args")
        if errors:
            raise PodTopologySpreadArgsError("; ".join(errors))
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
            SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else tuple(args.default_constraints)
        )
        self._objects = objects if objects is not None else cluster_objects_of(None)

    def constraints(self, pod: Pod, action: str) -> list[Constraint]:
        """The pod's constraints for `action`, or the defaults when it has none (upstream
        getConstraints / buildDefaultConstraints). Raises SelectorError."""
        labels = pod.metadata.labels
        if pod.spec.topology_spread_constraints:
            return filter_constraints(pod.spec.topology_spread_constraints, labels, action)
        constraints = filter_constraints(self.default_constraints, labels, action)
        if not constraints:
            return []
        selector = default_selector(pod, self._objects)
        if selector.is_empty():
            return []
        return with_selector(constraints, selector)

    # ------------------------------------------------------------------ filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as exc:
            return None, Status.error(f"get constraints from pod: {exc}", plugin=self.name)
        if not constraints:
            return None, Status.skip()
        state.write(PRE_FILTER_KEY, filtering.compute(pod, nodes, constraints))
        return None, SUCCESS

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None:
        try:
            pre = state.read(PRE_FILTER_KEY)
        except MissingStateError as exc:
            return Status.error(str(exc), plugin=self.name)
        if not pre.constraints:
            return None
        return filtering.filter_rows(pre, pod, nodes, rows)

    # -------------------------------------------------------------------- scoring
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        if len(nodes) == 0:
            return Status.skip()
        # Only the pod's own constraints (or non-system defaults) require every topology key,
        # so that nodes without a zone label still get hostname spreading.
        require_all = bool(pod.spec.topology_spread_constraints) or not self.system_defaulted
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as exc:
            return Status.error(f"calculating preScoreState: {exc}", plugin=self.name)
        if not constraints:
            return Status.skip()
        state.write(PRE_SCORE_KEY, scoring.compute(pod, nodes, rows, constraints, require_all))
        return SUCCESS

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        try:
            pre = state.read(PRE_SCORE_KEY)
        except MissingStateError as exc:
            return Status.error(str(exc), plugin=self.name)
        return scoring.score_rows(pre, nodes, rows)

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64] | Status:
        try:
            pre = state.read(PRE_SCORE_KEY)
        except MissingStateError as exc:
            return Status.error(str(exc), plugin=self.name)
        return scoring.normalize(scores, pre.scored_ignored)


def new(args: object | None, handle: Handle) -> PodTopologySpread:
    """args: PodTopologySpreadArgs or None (defaults); the handle may expose cluster_objects."""
    if args is not None and not isinstance(args, PodTopologySpreadArgs):
        raise PodTopologySpreadArgsError(
            f"want args to be of type PodTopologySpreadArgs, got {type(args).__name__}"
        )
    return PodTopologySpread(args, cluster_objects_of(handle))


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = PodTopologySpread
    _filter: type[FilterPlugin] = PodTopologySpread
    _pre_score: type[PreScorePlugin] = PodTopologySpread
    _score: type[ScorePlugin] = PodTopologySpread
    _normalize: type[NormalizeScorePlugin] = PodTopologySpread
