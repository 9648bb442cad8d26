"""LocalCluster: a whole cluster in one process (dry runs, in-process benchmarks, tests).

The ClusterCache every scheduler uses, loaded from objects instead of a store snapshot, and its
own binder: binding turns the pod's assumption into a binding in place (a worker's cache learns
of bindings from the change stream instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from scheduling.cache.cache import ClusterCache
from scheduling.framework.cluster_objects import EMPTY_CLUSTER, ClusterObjects
from shared.models import KubeObject, Node, Pod, PodDisruptionBudget, PodGroup
from shared.store import Snapshot

if TYPE_CHECKING:
    from scheduling.framework.extender import HTTPExtender


class BindError(RuntimeError):
    """The in-process binder cannot bind the pod (unknown node, already bound elsewhere)."""


class LocalCluster(ClusterCache):
    """Nodes, bound pods and budgets in one process; binds in place."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        cluster_objects: ClusterObjects = EMPTY_CLUSTER,
        pod_disruption_budgets: Iterable[PodDisruptionBudget] = (),
        extenders: Iterable[HTTPExtender] = (),
        *,
        pod_groups: Iterable[PodGroup] = (),
        pending: Iterable[Pod] = (),
    ) -> None:
        """`pods` are bound (spec.nodeName set); `pending` pods are known to the pod lister
        (`pods`, which Coscheduling counts gangs by) but not scheduled, and not nominated."""
        super().__init__(holder=None, extenders=extenders)
        objects: dict[str, list[KubeObject]] = {
            "Node": list(nodes),
            "Pod": list(pods),
            "PodDisruptionBudget": list(pod_disruption_budgets),
            "PodGroup": list(pod_groups),
        }
        self.load(Snapshot(0, objects))
        for pod in pending:
            self.pods.setdefault(pod.key, pod)
        self.cluster_objects = cluster_objects
        self.binder = self
        self.bound: dict[str, Pod] = {}
        """uid -> the pod as bound by this cluster's binder."""

    async def bind(self, pod: Pod, node_name: str) -> None:
        uid = pod.metadata.uid
        if uid in self.bound:
            raise BindError(f"pod {pod.key} is already bound to {self.bound[uid].spec.node_name}")
        if node_name not in self.columns.index:
            raise BindError(f'node "{node_name}" not found')
        held = self.assumed.get(uid)
        if held is not None and held.node != node_name:
            self.forget(uid)
        bound = self.assume(pod, node_name)
        self.assumed.pop(uid, None)  # counted from now on as bound, not assumed
        self.bound[uid] = bound
        self.pods[pod.key] = bound
        self.nominate(pod, "")

    def delete_pod(self, pod: Pod) -> None:
        """A bound or assumed pod is deleted (a preemption victim, say)."""
        uid = pod.metadata.uid
        self.bound.pop(uid, None)
        if self.pods.get(pod.key) is not None and self.pods[pod.key].metadata.uid == uid:
            del self.pods[pod.key]
        self._uncount(uid)
