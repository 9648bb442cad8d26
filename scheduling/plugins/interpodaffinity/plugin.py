"""InterPodAffinity (upstream pkg/scheduler/framework/plugins/interpodaffinity).

Extension points: PreFilter (+ AddPod/RemovePod extensions for preemption), Filter, PreScore,
Score, NormalizeScore. The cross-node counting is done with numpy over the PodIndex (see
scheduling/plugins/podindex), never with a Python loop over pods x nodes.
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
from scheduling.plugins.interpodaffinity import filtering, scoring
from scheduling.plugins.podindex import (
    ClusterObjects,
    WeightedAffinityTerm,
    cluster_objects_of,
    has_preferred_terms,
    namespace_labels,
    parse_pod_terms,
)
from shared.config.plugin_args import InterPodAffinityArgs
from shared.models import Pod

PRE_FILTER_KEY = StateKey[filtering.PreFilterState]("PreFilter" + names.INTER_POD_AFFINITY)
PRE_SCORE_KEY = StateKey[scoring.PreScoreState]("PreScore" + names.INTER_POD_AFFINITY)


class InterPodAffinityArgsError(ValueError):
    """The plugin args are not InterPodAffinityArgs or do not validate."""


class InterPodAffinity(PodUpdates, prefilter_key=PRE_FILTER_KEY, update=filtering.update_with_pod):
    # PreFilterExtensions from PodUpdates: preemption removes victims, nominated pods are added.
    name: ClassVar[str] = names.INTER_POD_AFFINITY
    # Reads other nodes' pods: reused only while PreFilter and PreScore skip.
    signature_reuse: ClassVar[Reuse] = WHEN_SKIPPED

    def __init__(
        self, args: InterPodAffinityArgs | None = None, objects: ClusterObjects | None = None
    ) -> None:
        self.args = args if args is not None else InterPodAffinityArgs()
        errors = self.args.validate("args")
        if errors:
            raise InterPodAffinityArgsError("; ".join(errors))
        self._objects = objects if objects is not None else cluster_objects_of(None)

    # ------------------------------------------------------------------ filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        terms = parse_pod_terms(pod)
        if terms.errors:
            reason = "parsing pod: " + "; ".join(terms.errors)
            return None, Status.unresolvable(reason, plugin=self.name)
        affinity = tuple(
            filtering.merge_namespaces(t, self._objects) for t in terms.required_affinity
        )
        anti = tuple(
            filtering.merge_namespaces(t, self._objects) for t in terms.required_anti_affinity
        )
        labels = namespace_labels(self._objects, pod.metadata.namespace)
        pre = filtering.compute(pod, nodes, affinity, anti, labels)
        if pre.is_empty():
            return None, Status.skip()
        state.write(PRE_FILTER_KEY, pre)
        return None, SUCCESS

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None:
        try:
            pre = state.read(PRE_FILTER_KEY)
        except MissingStateError as exc:
            return Status.error(str(exc), plugin=self.name)
        return filtering.filter_rows(pre, nodes, rows)

    # -------------------------------------------------------------------- scoring
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        if nodes.size_of(rows) == 0:
            return Status.skip()
        has_constraints = has_preferred_terms(pod)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        terms = parse_pod_terms(pod)
        if terms.errors:
            return Status.error("failed to parse pod: " + "; ".join(terms.errors), plugin=self.name)
        preferred = self._merged(terms.preferred_affinity)
        preferred_anti = self._merged(terms.preferred_anti_affinity)
        labels = namespace_labels(self._objects, pod.metadata.namespace)
        pre = scoring.compute(
            pod, nodes, preferred, preferred_anti, labels, self.args.hard_pod_affinity_weight
        )
        if not pre.topology_score:
            return Status.skip()
        state.write(PRE_SCORE_KEY, pre)
        return SUCCESS

    def _merged(self, terms: tuple[WeightedAffinityTerm, ...]) -> tuple[WeightedAffinityTerm, ...]:
        return tuple(
            WeightedAffinityTerm(t.weight, filtering.merge_namespaces(t.term, self._objects))
            for t in terms
        )

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
        if not pre.topology_score:
            return scores
        return scoring.normalize(scores)


def new(args: object | None, handle: Handle) -> InterPodAffinity:
    """args: InterPodAffinityArgs or None (defaults); the handle may expose cluster_objects."""
    if args is not None and not isinstance(args, InterPodAffinityArgs):
        raise InterPodAffinityArgsError(
            f"want args to be of type InterPodAffinityArgs, got {type(args).__name__}"
        )
    return InterPodAffinity(args, cluster_objects_of(handle))


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = InterPodAffinity
    _filter: type[FilterPlugin] = InterPodAffinity
    _pre_score: type[PreScorePlugin] = InterPodAffinity
    _score: type[ScorePlugin] = InterPodAffinity
    _normalize: type[NormalizeScorePlugin] = InterPodAffinity
