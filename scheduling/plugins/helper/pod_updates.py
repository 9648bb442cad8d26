"""PreFilterExtensions (upstream AddPod/RemovePod) for a plugin whose PreFilter state follows one
pod added to or removed from a node: InterPodAffinity and PodTopologySpread. Preemption (victims
removed) and nominated pods (added) call them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState, MissingStateError, StateKey
from scheduling.framework.status import SUCCESS, Status
from shared.models import Pod

UpdateWithPod = Callable[[Any, Pod, NodeColumns, int, int], Any]
"""Upstream updateWithPod: a new PreFilter state with `pod` added (1) or removed (-1) at `row`."""


class PodUpdates:
    """A base for such plugins, given as class keywords the key of its PreFilter state and its
    upstream updateWithPod (which returns a new state: CycleState.clone() is shallow, so a
    cloned state must not see the change):

        class InterPodAffinity(PodUpdates, prefilter_key=KEY, update=filtering.update_with_pod):
    """

    name: ClassVar[str]
    _pod_updates: ClassVar[tuple[StateKey[Any], UpdateWithPod]]

    def __init_subclass__(
        cls, *, prefilter_key: StateKey[Any], update: UpdateWithPod, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls._pod_updates = (prefilter_key, update)

    def add_pod(
        self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, nodes: NodeColumns, row: int
    ) -> Status:
        return self._update(state, pod_to_add, nodes, row, 1)

    def remove_pod(
        self,
        state: CycleState,
        pod_to_schedule: Pod,
        pod_to_remove: Pod,
        nodes: NodeColumns,
        row: int,
    ) -> Status:
        return self._update(state, pod_to_remove, nodes, row, -1)

    def _update(
        self, state: CycleState, other: Pod, nodes: NodeColumns, row: int, delta: int
    ) -> Status:
        key, update = self._pod_updates
        try:
            pre = state.read(key)
        except MissingStateError as exc:
            return Status.error(str(exc), plugin=self.name)
        state.write(key, update(pre, other, nodes, row, delta))
        return SUCCESS
