"""NodeUnschedulable: nodes with spec.unschedulable reject pods that do not tolerate it."""

from scheduling.plugins.nodeunschedulable.node_unschedulable import (
    ERR_REASON_UNSCHEDULABLE,
    UNSCHEDULABLE_TAINT,
    NodeUnschedulable,
    new,
)

__all__ = ["ERR_REASON_UNSCHEDULABLE", "UNSCHEDULABLE_TAINT", "NodeUnschedulable", "new"]
