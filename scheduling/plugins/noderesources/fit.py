"""NodeResourcesFit (upstream pkg/scheduler/framework/plugins/noderesources/fit.go).

PreFilter computes the pod's effective request once (containers summed, sidecars and init
containers as upstream resourcehelper.PodRequests, overhead added). Filter judges every row at
once, and when some row fails, a bit per insufficient resource turns each row's failure into
an integer key; the distinct keys (a handful, found with np.bincount) each get one Status
with all their reasons in upstream's order:
"Too many pods", cpu, memory, ephemeral-storage, then scalar resources (sorted by name; upstream
walks a Go map, so its order among several scalar resources is unspecified).

Status code, as current upstream (InsufficientResource.Unresolvable): UnschedulableAndUnresolvable
when the pod's request of an insufficient resource exceeds the node's allocatable outright (no
preemption can help there), Unschedulable otherwise. "Too many pods" alone is always Unschedulable.

Score uses the configured strategy (LeastAllocated, MostAllocated, RequestedToCapacityRatio)
over the configured resources, see allocation.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, MissingStateError, StateKey
from scheduling.framework.interfaces import (
    MAX_NODE_SCORE,
    FilterPlugin,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import SUCCESS, Code, Status
from scheduling.plugins import names
from scheduling.plugins.noderesources import allocation
from scheduling.plugins.noderesources.resource_names import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    is_extended_resource_name,
    is_scalar_resource_name,
)
from shared.config.plugin_args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    NodeResourcesFitArgs,
    ResourceSpec,
)
from shared.models import Pod
from shared.models.resources import non_zero_requests, pod_requests

TOO_MANY_PODS = "Too many pods"
PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_RESOURCES_FIT
PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_RESOURCES_FIT

Int64s = NDArray[np.int64]
Strategy = Callable[[Sequence[allocation.ResourceColumn], int], Int64s]
"""(scored resource columns, number of rows) -> one score per row."""


def insufficient_reason(resource: str) -> str:
    return f"Insufficient {resource}"


class FitArgsError(ValueError):
    """NodeResourcesFit args that upstream's NewFit rejects."""


@dataclass(frozen=True, slots=True)
class PodResourceRequest:
    """PreFilter state: what the pod asks for, and what the Filter checks."""

    requests: dict[str, int]
    """The effective request of every resource (upstream resourcehelper.PodRequests)."""
    checked: tuple[str, ...]
    """Resources the Filter checks, in reason order: positive requests of cpu, memory,
    ephemeral-storage, then scalar resources not ignored by the args."""
    amounts: tuple[int, ...]
    """The request of each checked resource."""


@dataclass(frozen=True, slots=True)
class ScoringRequest:
    """PreScore state: the pod's request of each configured scoring resource, in args order."""

    requests: tuple[int, ...]


_PRE_FILTER = StateKey[PodResourceRequest](PRE_FILTER_STATE_KEY)
_TOO_MANY_PODS_KEY = 2
"""Failure key of "Too many pods" alone (see the key layout in `Fit._failures`)."""
_BINCOUNT_MAX_RESOURCES = 10
"""Up to 2**12 distinct keys: counting them beats sorting."""
_PRE_SCORE = StateKey[ScoringRequest](PRE_SCORE_STATE_KEY)


def compute_pod_resource_request(
    pod: Pod,
    ignored_resources: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> PodResourceRequest:
    requests = pod_requests(pod)
    checked = [name for name in (CPU, MEMORY, EPHEMERAL_STORAGE) if requests.get(name, 0) > 0]
    scalars = sorted(
        name
        for name, value in requests.items()
        if value > 0
        and is_scalar_resource_name(name)
        and not _ignored(name, ignored_resources, ignored_groups)
    )
    checked.extend(scalars)
    amounts = tuple(requests[name] for name in checked)
    return PodResourceRequest(requests, tuple(checked), amounts)


def _ignored(name: str, ignored_resources: frozenset[str], ignored_groups: frozenset[str]) -> bool:
    """ignoredResources / ignoredResourceGroups apply to extended resources only."""
    if not is_extended_resource_name(name):
        return False
    return name in ignored_resources or name.split("/", 1)[0] in ignored_groups


class Fit:
    """Checks that a node has room for the pod's requests, and scores how full it would be."""

    name: ClassVar[str] = names.NODE_RESOURCES_FIT
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self._ignored_resources = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self._resources: tuple[ResourceSpec, ...] = tuple(strategy.resources)
        self._resource_names = tuple(r.name for r in self._resources)
        self._weights = tuple(r.weight for r in self._resources)
        self.strategy_type = strategy.type
        self._strategy = _strategy(args)
        self._statuses: dict[int, Status] = {}
        self._statuses_for: tuple[str, ...] = ()

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        request = compute_pod_resource_request(pod, self._ignored_resources, self._ignored_groups)
        state.write(_PRE_FILTER, request)
        return None, SUCCESS

    # --------------------------------------------------------------------- Filter
    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None:
        try:
            request = state.read(_PRE_FILTER)
        except MissingStateError:
            return Status.error(
                f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name
            )
        pods_col = nodes.resource_index[PODS]
        # len(pods) + 1 > allowed pods
        too_many = nodes.requested[rows, pods_col] >= nodes.allocatable[rows, pods_col]
        if not request.checked:
            if not too_many.any():
                return None
            return FilterResult.from_mask(~too_many, self._status(_TOO_MANY_PODS_KEY))
        columns = self._checked_columns(request, nodes, rows)
        failed = too_many.copy()
        insufficient: list[NDArray[np.bool_]] = []
        for amount, (allocatable, requested) in zip(request.amounts, columns, strict=True):
            short = amount > allocatable - requested
            failed |= short
            insufficient.append(short)
        if not failed.any():
            return None
        return self._failures(request, columns, too_many, insufficient, failed)

    def _failures(
        self,
        request: PodResourceRequest,
        columns: list[tuple[Int64s, Int64s]],
        too_many: NDArray[np.bool_],
        insufficient: list[NDArray[np.bool_]],
        failed: NDArray[np.bool_],
    ) -> FilterResult:
        """One Status per distinct failure combination, keyed by bits per row:
        bit 0 = unresolvable, bit 1 = too many pods, bit j+2 = checked resource j."""
        key = too_many.astype(np.int64) << 1
        for j, (amount, short, (allocatable, _)) in enumerate(
            zip(request.amounts, insufficient, columns, strict=True)
        ):
            key |= short.astype(np.int64) << (j + 2)
            key |= short & (amount > allocatable)
        if self._statuses_for != request.checked:
            self._statuses = {}
            self._statuses_for = request.checked
        failing = key[failed]
        if len(request.checked) <= _BINCOUNT_MAX_RESOURCES:
            distinct = np.flatnonzero(np.bincount(failing)).tolist()
        else:
            distinct = np.unique(failing).tolist()
        failures = [(self._status(value, request.checked), key == value) for value in distinct]
        return FilterResult(~failed, failures)

    def _checked_columns(
        self, request: PodResourceRequest, nodes: NodeColumns, rows: Rows
    ) -> list[tuple[Int64s, Int64s]]:
        """(allocatable, requested) per checked resource; zeros for a resource no node has."""
        columns = []
        for name in request.checked:
            col = nodes.resource_index.get(name)
            if col is None:
                zeros = np.zeros(nodes.size_of(rows), dtype=np.int64)
                columns.append((zeros, zeros))
            else:
                columns.append((nodes.allocatable[rows, col], nodes.requested[rows, col]))
        return columns

    def _status(self, key: int, checked: Sequence[str] = ()) -> Status:
        """The Status of one failure combination (see the key layout in `filter`)."""
        status = self._statuses.get(key)
        if status is None:
            reasons: list[str] = [TOO_MANY_PODS] if key & 2 else []
            reasons.extend(
                insufficient_reason(name) for j, name in enumerate(checked) if key >> (j + 2) & 1
            )
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key & 1 else Code.UNSCHEDULABLE
            status = Status(code, tuple(reasons), self.name)
            self._statuses[key] = status
        return status

    # ------------------------------------------------------------------- PreScore
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        state.write(_PRE_SCORE, self._scoring_request(pod))
        return SUCCESS

    def _scoring_request(self, pod: Pod) -> ScoringRequest:
        # The scoring strategies see cpu/memory with the non-zero defaults (useRequested=false).
        requests = non_zero_requests(pod)
        return ScoringRequest(tuple(requests.get(name, 0) for name in self._resource_names))

    # ---------------------------------------------------------------------- Score
    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        if not self._resources:
            return Status.error("resources not found", self.name)
        request = state.get(_PRE_SCORE)
        if request is None:
            request = self._scoring_request(pod)
        columns = allocation.allocation(
            nodes,
            rows,
            self._resource_names,
            self._weights,
            request.requests,
            use_requested=False,
        )
        return self._strategy(columns, nodes.size_of(rows))


def _strategy(args: NodeResourcesFitArgs) -> Strategy:
    strategy = args.scoring_strategy
    if strategy.type == LEAST_ALLOCATED:
        return allocation.least_allocated
    if strategy.type == MOST_ALLOCATED:
        return allocation.most_allocated
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        ratio = strategy.requested_to_capacity_ratio
        if ratio is None or not ratio.shape:
            raise FitArgsError("requestedToCapacityRatio shape must be specified")
        # Shape scores are 0..10 in the config, the plugin works on 0..100.
        scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
        table = allocation.broken_linear_table(
            [(point.utilization, point.score * scale) for point in ratio.shape]
        )

        def requested_to_capacity_ratio(
            columns: Sequence[allocation.ResourceColumn], size: int
        ) -> Int64s:
            return allocation.requested_to_capacity_ratio(columns, size, table)

        return requested_to_capacity_ratio
    raise FitArgsError(f"scoring strategy {strategy.type} is not supported")


def new(args: object | None, handle: Handle) -> Fit:
    """args: NodeResourcesFitArgs, or None for the defaults (LeastAllocated, cpu and memory)."""
    if args is None:
        args = NodeResourcesFitArgs()
    if not isinstance(args, NodeResourcesFitArgs):
        got = type(args).__name__
        raise FitArgsError(f"want args to be of type NodeResourcesFitArgs, got {got}")
    return Fit(args)


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = Fit
    _filter: type[FilterPlugin] = Fit
    _pre_score: type[PreScorePlugin] = Fit
    _score: type[ScorePlugin] = Fit
