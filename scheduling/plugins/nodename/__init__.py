"""NodeName: a pod with spec.nodeName fits only the node of that name."""

from scheduling.plugins.nodename.node_name import ERR_REASON, NodeName, new

__all__ = ["ERR_REASON", "NodeName", "new"]
