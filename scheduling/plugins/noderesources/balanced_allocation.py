"""NodeResourcesBalancedAllocation (upstream noderesources/balanced_allocation.go, v1.35).

Favors nodes whose resource fractions (requested incl. the pod / allocatable, each capped at 1)
are close to each other: score = (1 - std) * 100, truncated. With cpu and memory that is
(1 - |cpuFraction - memFraction| / 2) * 100. Requests are the plain ones (upstream
useRequested=true), not the 100m / 200Mi non-zero defaults the Fit strategies use.

Differences from older versions:
- Upstream before v1.22 (genericScheduler's BalancedResourceAllocation) scored
  (1 - |cpuFraction - memFraction|) * 100 and gave 0 when a fraction reached 1; the std-dev
  form halves the difference and caps fractions instead.
- A pod requesting none of the resources (best effort) is skipped at PreScore
  (kubernetes#129138), so it gets no score from this plugin.
- Upstream master after v1.35 (kubernetes#135573) scores the change of balance instead:
  50 + (50 + scoreWithPod - scoreWithoutPod) / 2. Not adopted here (not in a release yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, StateKey
from scheduling.framework.interfaces import Handle, PreScorePlugin, ScorePlugin
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import SKIP, SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.noderesources import allocation
from shared.config.plugin_args import NodeResourcesBalancedAllocationArgs
from shared.models import Pod
from shared.models.resources import pod_requests

PRE_SCORE_STATE_KEY = "PreScore" + names.NODE_RESOURCES_BALANCED_ALLOCATION


@dataclass(frozen=True, slots=True)
class BalancedRequest:
    """PreScore state: the pod's request of each configured resource, in args order."""

    requests: tuple[int, ...]

    def is_best_effort(self) -> bool:
        return not any(self.requests)


_PRE_SCORE = StateKey[BalancedRequest](PRE_SCORE_STATE_KEY)


class BalancedAllocationArgsError(ValueError):
    """Args that are not NodeResourcesBalancedAllocationArgs."""


class BalancedAllocation:
    name: ClassVar[str] = names.NODE_RESOURCES_BALANCED_ALLOCATION
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self._resource_names = tuple(r.name for r in args.resources)
        # Weights do not matter for balance (upstream validation requires 1).
        self._ones = (1,) * len(self._resource_names)

    def _request(self, pod: Pod) -> BalancedRequest:
        requests = pod_requests(pod)
        return BalancedRequest(tuple(requests.get(name, 0) for name in self._resource_names))

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows) -> Status:
        request = self._request(pod)
        if request.is_best_effort():
            # Keeps best-effort pods from piling onto one node (kubernetes#129138).
            return SKIP
        state.write(_PRE_SCORE, request)
        return SUCCESS

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        request = state.get(_PRE_SCORE)
        if request is None:
            request = self._request(pod)
            if request.is_best_effort():
                return np.zeros(nodes.size_of(rows), dtype=np.int64)
        columns = allocation.allocation(
            nodes, rows, self._resource_names, self._ones, request.requests, use_requested=True
        )
        return allocation.balanced_allocation(columns, nodes.size_of(rows))


def new(args: object | None, handle: Handle) -> BalancedAllocation:
    """args: NodeResourcesBalancedAllocationArgs, or None for the defaults (cpu and memory)."""
    if args is None:
        args = NodeResourcesBalancedAllocationArgs()
    if not isinstance(args, NodeResourcesBalancedAllocationArgs):
        raise BalancedAllocationArgsError(
            "want args to be of type NodeResourcesBalancedAllocationArgs, "
            f"got {type(args).__name__}"
        )
    return BalancedAllocation(args)


if TYPE_CHECKING:
    _pre_score: type[PreScorePlugin] = BalancedAllocation
    _score: type[ScorePlugin] = BalancedAllocation
