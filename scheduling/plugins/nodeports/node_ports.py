"""NodePorts (upstream pkg/scheduler/framework/plugins/nodeports).

PreFilter collects the host ports the pod wants (shared.models.host_ports): every port with
hostPort > 0 of the regular containers and of the restartable init containers (sidecars run for
the pod's whole life; upstream schedutil.GetHostPorts). A pod without host ports skips the
Filter.

Filter, with upstream HostPortInfo.CheckConflict semantics (empty hostIP means 0.0.0.0, empty
protocol TCP): a wanted 0.0.0.0 port conflicts with that (protocol, port) on any IP; a wanted
specific IP conflicts with the same IP or with 0.0.0.0. Only nodes that already use a wanted
(protocol, port) are visited, through `NodeColumns.used_ports`; every other row passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import BIND_ALL_HOST_IP, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState, MissingStateError, StateKey
from scheduling.framework.interfaces import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
)
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import SKIP, SUCCESS, Status
from scheduling.plugins import names
from shared.models import HostPort, Pod, host_ports

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_PORTS


@dataclass(frozen=True, slots=True)
class WantedPorts:
    """PreFilter state."""

    ports: tuple[HostPort, ...]


_PRE_FILTER = StateKey[WantedPorts](PRE_FILTER_STATE_KEY)
_NO_ROWS: NDArray[np.intp] = np.zeros(0, dtype=np.intp)


def conflicting_rows(nodes: NodeColumns, wanted: HostPort) -> NDArray[np.intp]:
    """Rows whose used ports conflict with `wanted` (upstream HostPortInfo.CheckConflict)."""
    by_row = nodes.used_ports.get((wanted.protocol, wanted.port))
    if not by_row:
        return _NO_ROWS
    if wanted.host_ip == BIND_ALL_HOST_IP:
        return np.fromiter(by_row, dtype=np.intp, count=len(by_row))
    hits = (wanted.host_ip, BIND_ALL_HOST_IP)
    return np.fromiter(
        (row for row, ips in by_row.items() if hits[0] in ips or hits[1] in ips), dtype=np.intp
    )


class NodePorts:
    name: ClassVar[str] = names.NODE_PORTS
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns
    ) -> tuple[PreFilterResult | None, Status]:
        ports = host_ports(pod)
        if not ports:
            return None, SKIP
        state.write(_PRE_FILTER, WantedPorts(ports))
        return None, SUCCESS

    def filter(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> FilterResult | Status | None:
        try:
            wanted = state.read(_PRE_FILTER)
        except MissingStateError:
            return Status.error(
                f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found', self.name
            )
        conflict: NDArray[np.bool_] | None = None
        for port in wanted.ports:
            hits = conflicting_rows(nodes, port)
            if hits.size:
                if conflict is None:
                    conflict = np.zeros(len(nodes), dtype=np.bool_)
                conflict[hits] = True
        if conflict is None:
            return None
        ok = ~conflict[rows]
        if ok.all():
            return None
        return FilterResult.from_mask(ok, Status.unschedulable(ERR_REASON, plugin=self.name))


def new(args: object | None, handle: Handle) -> NodePorts:
    return NodePorts()


if TYPE_CHECKING:
    _pre_filter: type[PreFilterPlugin] = NodePorts
    _filter: type[FilterPlugin] = NodePorts
