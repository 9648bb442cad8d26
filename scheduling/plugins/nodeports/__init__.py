"""NodePorts: rejects nodes where a host port the pod wants is already taken."""

from scheduling.plugins.nodeports.node_ports import ERR_REASON, NodePorts, new

__all__ = ["ERR_REASON", "NodePorts", "new"]
