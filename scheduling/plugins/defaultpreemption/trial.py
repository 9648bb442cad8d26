"""One node of a scratch copy on which pods are taken off and given back, as upstream's
SelectVictimsOnNode does on a copy of the cycle state: the PreFilter plugins that read other
pods (InterPodAffinity, PodTopologySpread) are told of every move through their extensions,
so the Filter plugins judge the node as it would be. The dry run (evaluator) and the binder's
check of a proposed preemption (justify) both move pods this way."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.framework.cycle_state import CycleState
from scheduling.framework.nominated import (
    FilterContext,
    PreFilterExtensions,
    run_filters_with_nominated_pods,
)
from scheduling.framework.pod_index import PodIndex
from scheduling.framework.scratch import Scratch
from scheduling.framework.status import SUCCESS, Status
from shared.models import Pod


class NodeTrial:
    """Moves on `row` of `scratch`, on a clone of `state`; `close()` puts back what was taken."""

    def __init__(
        self,
        ctx: FilterContext,
        state: CycleState,
        pod: Pod,
        extensions: Sequence[PreFilterExtensions],
        scratch: Scratch,
        index: PodIndex,
        row: int,
    ) -> None:
        self._ctx = ctx
        self.state = state.clone()
        self._pod = pod
        self._extensions = extensions
        self._scratch = scratch
        self._index = index
        self._row = row
        self._one = np.array([row], dtype=np.intp)
        self.removed: list[int] = []

    def take(self, slot: int) -> Status:
        """The pod of `slot` leaves the node."""
        self._scratch.remove_slots(np.array([slot], dtype=np.intp))
        self.removed.append(slot)
        victim = self._index.pod(slot)
        for ext in self._extensions:
            status = ext.remove_pod(self.state, self._pod, victim, self._scratch.columns, self._row)
            if not status.is_success():
                return Status.error(
                    f'running RemovePod on PreFilter plugin "{ext.name}": {status.message()}'
                )
        return SUCCESS

    def give_back(self, slot: int) -> Status:
        """The pod of `slot`, taken before, runs on the node again."""
        self._scratch.restore_slots(np.array([slot], dtype=np.intp))
        self.removed.remove(slot)
        victim = self._index.pod(slot)
        for ext in self._extensions:
            status = ext.add_pod(self.state, self._pod, victim, self._scratch.columns, self._row)
            if not status.is_success():
                return Status.error(
                    f'running AddPod on PreFilter plugin "{ext.name}": {status.message()}'
                )
        return SUCCESS

    def fits(self) -> Status:
        """The Filter plugins' verdict on the node as it stands (nominated pods counted)."""
        out = run_filters_with_nominated_pods(
            self._ctx, self.state, self._pod, self._scratch, self._one
        )
        return SUCCESS if bool(out.ok[0]) else out.status_at(0)

    def close(self) -> None:
        if self.removed:
            self._scratch.restore_slots(np.array(self.removed, dtype=np.intp))
            self.removed = []
