"""What a kubelet checks before it runs a pod bound to its node by name (upstream
pkg/kubelet/lifecycle/predicate.go), beside the room on the node that the store checks
atomically (shared/store/lua/apply.lua): the node's labels against the pod's nodeSelector and
required node affinity, and its NoExecute taints against the pod's tolerations. Standalone
berth is the whole control plane, so a user's write of such a pod is refused with the
kubelet's reason instead of running where it cannot."""

from __future__ import annotations

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.plugins.nodeaffinity.node_affinity import required_node_affinity
from shared.models import Node, Pod, tolerates_taint

NO_EXECUTE = "NoExecute"


def kubelet_refusal(pod: Pod, node: Node) -> str:
    """The kubelet's reason and message for refusing `pod` on `node` ("" when it runs)."""
    if not bool(required_node_affinity(pod).mask(NodeColumns([node]), ALL_ROWS)[0]):
        return "NodeAffinity: node(s) didn't match Pod's node affinity/selector"
    for taint in node.spec.taints:
        if taint.effect == NO_EXECUTE and not tolerates_taint(pod.spec.tolerations, taint):
            return f"Taint: node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    return ""
