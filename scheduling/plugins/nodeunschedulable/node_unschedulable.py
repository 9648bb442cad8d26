"""NodeUnschedulable Filter (upstream pkg/scheduler/framework/plugins/nodeunschedulable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, FilterResult, Handle
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import Status
from scheduling.plugins import names
from shared.models import Pod, Taint, tolerates_taint

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

# A pod that tolerates this taint also tolerates `node.spec.unschedulable` (cordoned nodes carry
# it, and DaemonSet pods tolerate it).
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable:
    name: ClassVar[str] = names.NODE_UNSCHEDULABLE
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        if tolerates_taint(pod.spec.tolerations, UNSCHEDULABLE_TAINT):
            return None
        ok = ~nodes.unschedulable[rows]
        if ok.all():
            return None
        status = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=self.name)
        return FilterResult.from_mask(ok, status)


def new(args: object | None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


if TYPE_CHECKING:
    _filter: type[FilterPlugin] = NodeUnschedulable
