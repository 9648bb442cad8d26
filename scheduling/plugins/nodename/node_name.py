"""NodeName Filter (upstream pkg/scheduler/framework/plugins/nodename).

Upstream implements only Filter: there is no PreFilter narrowing to the named node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, FilterResult, Handle
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import Status
from scheduling.plugins import names
from shared.models import Pod

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name: ClassVar[str] = names.NODE_NAME
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | None:
        wanted = pod.spec.node_name
        if not wanted:
            return None
        row = nodes.index.get(wanted, -1)
        ok = nodes.row_indices(rows) == row
        if ok.all():
            return None
        return FilterResult.from_mask(ok, Status.unresolvable(ERR_REASON, plugin=self.name))


def new(args: object | None, handle: Handle) -> NodeName:
    return NodeName()


if TYPE_CHECKING:
    _filter: type[FilterPlugin] = NodeName
