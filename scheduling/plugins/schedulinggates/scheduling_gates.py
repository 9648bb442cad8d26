"""SchedulingGates PreEnqueue (upstream pkg/scheduler/framework/plugins/schedulinggates)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from scheduling.framework.interfaces import Handle, PreEnqueuePlugin
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from shared.models import Pod


class SchedulingGates:
    name: ClassVar[str] = names.SCHEDULING_GATES

    def pre_enqueue(self, pod: Pod) -> Status:
        gates = pod.spec.scheduling_gates
        if not gates:
            return SUCCESS
        # Go formats the []string with %v: "[foo bar]".
        listed = " ".join(gate.name for gate in gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{listed}]", plugin=self.name)


def new(args: object | None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


if TYPE_CHECKING:
    _pre_enqueue: type[PreEnqueuePlugin] = SchedulingGates
