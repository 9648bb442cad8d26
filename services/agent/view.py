"""The agent's view of the cluster: nodes and bound pods, from a store snapshot and the
change stream (pending pods and reservations are not its business)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.models import Node, Pod
from shared.store import Change, Snapshot


@dataclass
class AgentView:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    """Bound pods by key."""
    by_node: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: Snapshot) -> AgentView:
        view = cls()
        for node in snapshot.nodes:
            view.nodes[node.metadata.name] = node
        for pod in snapshot.pods:
            view.put_pod(pod)
        return view

    def put_pod(self, pod: Pod) -> tuple[Pod | None, bool]:
        """Keep the pod if bound; (the previous copy, whether it is newly bound: a new uid
        or a first binding)."""
        old = self.pods.get(pod.key)
        if not pod.spec.node_name:
            if old is not None:
                self.drop_pod(pod.key)
            return old, False
        if old is not None and old.spec.node_name != pod.spec.node_name:
            self.by_node.get(old.spec.node_name, set()).discard(pod.key)
        self.pods[pod.key] = pod
        self.by_node.setdefault(pod.spec.node_name, set()).add(pod.key)
        fresh = old is None or old.metadata.uid != pod.metadata.uid
        return old, fresh

    def drop_pod(self, key: str) -> Pod | None:
        old = self.pods.pop(key, None)
        if old is not None:
            keys = self.by_node.get(old.spec.node_name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_node[old.spec.node_name]
        return old

    def apply(self, change: Change) -> list[Pod]:
        """Apply one change; returns pods newly bound by it."""
        if change.kind == "Node":
            name = change.key
            if change.op == "delete":
                self.nodes.pop(name, None)
            elif isinstance(change.object, Node):
                self.nodes[name] = change.object
            return []
        if change.kind != "Pod":
            return []
        if change.op == "delete" or not change.node_name:
            # Gone, or not bound (put back to waiting, too): the body need not be read
            # (the service follows with these bodies skipped).
            self.drop_pod(change.key)
            return []
        if isinstance(change.object, Pod):
            _, fresh = self.put_pod(change.object)
            if fresh and change.object.spec.node_name:
                return [change.object]
        return []

    def pods_on(self, node: str) -> list[Pod]:
        return [self.pods[k] for k in sorted(self.by_node.get(node, ()))]
