"""NodeAffinity (upstream pkg/scheduler/framework/plugins/nodeaffinity).

PreFilter parses the pod's nodeSelector and required node affinity once per cycle; Filter
evaluates them (and the profile's addedAffinity) over all rows with numpy. PreScore parses the
preferred terms; Score sums the weights of the matching ones, plus addedAffinity's.
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.helper import default_normalize_score
from scheduling.plugins.nodeaffinity.selector import (
    IN,
    NODE_NAME_FIELD,
    PreferredTerms,
    RequiredNodeAffinity,
    Selector,
    compile_preferred,
    compile_required,
    compile_selector,
)
from shared.config.plugin_args import NodeAffinityArgs
from shared.models import NodeAffinity as NodeAffinitySpec
from shared.models import NodeSelector, Pod, PreferredSchedulingTerm

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


class NodeAffinityArgsError(ValueError):
    """addedAffinity in the NodeAffinity plugin args does not parse."""


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: RequiredNodeAffinity


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredTerms | None


_PRE_FILTER_KEY = StateKey[_PreFilterState]("PreFilter" + names.NODE_AFFINITY)
_PRE_SCORE_KEY = StateKey[_PreScoreState]("PreScore" + names.NODE_AFFINITY)


def _required_selector(pod: Pod) -> NodeSelector | None:
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required_during_scheduling_ignored_during_execution


def _preferred_terms(pod: Pod) -> list[PreferredSchedulingTerm]:
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return []
    return affinity.node_affinity.preferred_during_scheduling_ignored_during_execution


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    """The pod's nodeSelector AND required node affinity, parsed (upstream
    GetRequiredNodeAffinity); shared with plugins that honour node affinity (PodTopologySpread)."""
    return compile_required(pod.spec.node_selector, _required_selector(pod))


def _node_names_from_fields(selector: NodeSelector) -> tuple[PreFilterResult | None, Status]:
    """Upstream PreFilter narrowing: when every term pins metadata.name with In, only the
    union of those names can match; an empty union is a conflict."""
    node_names: set[str] | None = None
    for term in selector.node_selector_terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == NODE_NAME_FIELD and req.operator == IN:
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None, SUCCESS  # this term does not pin names; terms are ORed
        node_names = term_names if node_names is None else node_names | term_names
    if node_names is None:
        return None, SUCCESS
    if not node_names:
        return None, Status.unresolvable(ERR_REASON_CONFLICT, plugin=names.NODE_AFFINITY)
    return PreFilterResult(node_names), SUCCESS


class NodeAffinity:
    name: ClassVar[str] = names.NODE_AFFINITY
    # NormalizeScore scales by the maximum raw score (a PreFilter narrowing is not reused).
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def __init__(self, added_affinity: NodeAffinitySpec | None = None) -> None:
        self._added_selector: Selector | None = None
        self._added_preferred: PreferredTerms | None = None
        if added_affinity is None:
            return
        required = added_affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            self._added_selector = compile_selector(required)
            if self._added_selector.errors:
                raise NodeAffinityArgsError(
                    "parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                    + "; ".join(self._added_selector.errors)
                )
        preferred = added_affinity.preferred_during_scheduling_ignored_during_execution
        if preferred:
            self._added_preferred, errors = compile_preferred(preferred)
            if errors:
                raise NodeAffinityArgsError(
                    "parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: "
                    + "; ".join(errors)
                )

    # ------------------------------------------------------------------ filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        selector = _required_selector(pod)
        if selector is None and self._added_selector is None and not pod.spec.node_selector:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, _PreFilterState(required_node_affinity(pod)))
        if selector is None or not selector.node_selector_terms:
            return None, SUCCESS
        return _node_names_from_fields(selector)

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        failures: list[tuple[Status, NDArray[np.bool_]]] = []
        ok: NDArray[np.bool_] | None = None
        if self._added_selector is not None:
            ok = self._added_selector.mask(nodes, rows)
            if not ok.all():
                enforced = Status.unresolvable(ERR_REASON_ENFORCED, plugin=self.name)
                failures.append((enforced, ~ok))
        pre = state.get(_PRE_FILTER_KEY)
        # Without PreFilter state (PreFilter disabled) parse here, as upstream falls back.
        required = pre.required if pre is not None else required_node_affinity(pod)
        if ok is None:
            ok = required.mask(nodes, rows)
            rejected = ~ok
        elif ok.any():
            matched = required.mask(nodes, rows)
            rejected = ok & ~matched
            ok = ok & matched
        else:
            rejected = np.zeros_like(ok)
        if rejected.any():
            failures.append((Status.unresolvable(ERR_REASON_POD, plugin=self.name), rejected))
        if not failures:
            return None
        return FilterResult(ok, failures)

    # -------------------------------------------------------------------- scoring
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        preferred, status = self._pod_preferred(pod)
        if not status.is_success():
            return status
        if preferred is None and self._added_preferred is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(preferred))
        return SUCCESS

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        scores = np.zeros(nodes.size_of(rows), dtype=np.int64)
        if self._added_preferred is not None:
            self._added_preferred.score(nodes, rows, scores)
        pre = state.get(_PRE_SCORE_KEY)
        if pre is not None:
            preferred = pre.preferred
        else:  # PreScore disabled: parse here, as upstream falls back
            preferred, status = self._pod_preferred(pod)
            if not status.is_success():
                return status
        if preferred is not None:
            preferred.score(nodes, rows, scores)
        return scores

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        return default_normalize_score(scores)

    def _pod_preferred(self, pod: Pod) -> tuple[PreferredTerms | None, Status]:
        terms = _preferred_terms(pod)
        if not terms:
            return None, SUCCESS
        preferred, errors = compile_preferred(terms)
        if errors:
            return None, Status.error("; ".join(errors), plugin=self.name)
        return preferred, SUCCESS


def new(args: object | None, handle: Handle) -> NodeAffinity:
    """args: the profile's NodeAffinityArgs, or None for the defaults."""
    if args is None:
        return NodeAffinity()
    if not isinstance(args, NodeAffinityArgs):
        raise NodeAffinityArgsError(
            f"args are not of type NodeAffinityArgs, got {type(args).__name__}"
        )
    return NodeAffinity(args.added_affinity)


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = NodeAffinity
    _filter: type[FilterPlugin] = NodeAffinity
    _pre_score: type[PreScorePlugin] = NodeAffinity
    _score: type[ScorePlugin] = NodeAffinity
    _normalize: type[NormalizeScorePlugin] = NodeAffinity
