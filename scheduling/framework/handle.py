"""Handles: what the framework gives its plugins, and an in-process cluster behind them.

- `FrameworkHandle` is the Handle each Framework passes to its plugin factories: the cluster's
  NodeColumns and Binder, its ClusterObjects (namespaces, ...) when it has them, and the
  framework itself (`handle.framework`, for plugins such as preemption that run other
  extension points or reach the waiting pods).
- `LocalCluster` is a whole cluster in one process (dry runs, in-process benchmarks, tests):
  NodeColumns holding the bound pods, a Binder that binds into them, and the scheduler
  cache's assume/forget (a pod is accounted on its node from Reserve on, so the next cycle
  sees it even before its binding completes, as upstream's cache does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from scheduling.framework.cluster_objects import (
    EMPTY_CLUSTER,
    ClusterObjects,
    cluster_objects_of,
)
from scheduling.framework.columns import NodeColumns
from scheduling.framework.extender import HTTPExtender
from scheduling.framework.interfaces import (
    Binder,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
)
from shared.models import Node, Pod, PodDisruptionBudget

if TYPE_CHECKING:
    from scheduling.framework.runtime import Framework


class FrameworkHandle:
    """The Handle of one Framework: the cluster's Handle, plus the framework's own plugins.

    Any other attribute is read from the cluster's handle (plugins probe optional ones with
    getattr: `nominated_pods`, `pod_disruption_budgets`, `extenders`, ...).
    """

    __slots__ = ("_base", "framework")

    def __init__(self, base: Handle, framework: Framework) -> None:
        self._base = base
        self.framework = framework

    @property
    def base(self) -> Handle:
        """The cluster's Handle this one wraps."""
        return self._base

    @property
    def nodes(self) -> NodeColumns:
        return self._base.nodes

    @property
    def binder(self) -> Binder:
        return self._base.binder

    @property
    def cluster_objects(self) -> ClusterObjects:
        return cluster_objects_of(self._base)

    @property
    def filter_plugins(self) -> list[FilterPlugin]:
        """The profile's Filter plugins in order (per-node forms adapted)."""
        return [plugin for _, plugin in self.framework.filter_plugins]

    @property
    def pre_filter_plugins(self) -> list[PreFilterPlugin]:
        return [plugin for _, plugin in self.framework.pre_filter_plugins]

    @property
    def seed(self) -> int:
        """The seed of this scheduler's randomness (0 when unseeded)."""
        return self.framework.context.seed or 0

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._base, name)


class BindError(RuntimeError):
    """The in-process binder cannot bind the pod (unknown node, already bound elsewhere)."""


class LocalCluster:
    """Nodes and bound pods in one process; a Handle, a Binder and an assume/forget cache."""

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        cluster_objects: ClusterObjects = EMPTY_CLUSTER,
        pod_disruption_budgets: Iterable[PodDisruptionBudget] = (),
        extenders: Iterable[HTTPExtender] = (),
    ) -> None:
        self._nodes = NodeColumns(nodes, pods)
        self._cluster_objects = cluster_objects
        self.pod_disruption_budgets: list[PodDisruptionBudget] = list(pod_disruption_budgets)
        """Read by preemption (through the framework handle)."""
        self.extenders: list[HTTPExtender] = list(extenders)
        """The scheduler's extenders (`build_extenders(config.extenders)`), built once: read
        by every cycle (Filter and Score) and by preemption, through the framework handle."""
        self.assumed: dict[str, Pod] = {}
        """uid -> the pod as accounted on its node, between assume and bind (or forget)."""
        self.bound: dict[str, Pod] = {}
        """uid -> the pod as bound by this cluster's binder."""
        self._nominated: dict[str, tuple[str, Pod]] = {}

    # Handle
    @property
    def nodes(self) -> NodeColumns:
        return self._nodes

    @property
    def binder(self) -> Binder:
        return self

    @property
    def cluster_objects(self) -> ClusterObjects:
        return self._cluster_objects

    # cache
    def assume(self, pod: Pod, node_name: str) -> Pod:
        """Account the pod on the node now; returns the assumed copy (spec.nodeName set)."""
        assumed = with_node_name(pod, node_name)
        self._nodes.add_pod(assumed)
        self.assumed[pod.metadata.uid] = assumed
        self._nominated.pop(pod.metadata.uid, None)  # upstream DeleteNominatedPodIfExists
        return assumed

    def forget(self, pod: Pod) -> None:
        """Undo `assume` (the binding cycle failed)."""
        assumed = self.assumed.pop(pod.metadata.uid, None)
        if assumed is not None:
            self._nodes.remove_pod(assumed)

    def delete_pod(self, pod: Pod) -> None:
        """A bound or assumed pod is deleted (a preemption victim, say)."""
        uid = pod.metadata.uid
        current = self.assumed.pop(uid, None) or self.bound.pop(uid, None) or pod
        self._nodes.remove_pod(current)

    # nominator (upstream PodNominator): pods that preempted and wait for their node
    def nominate(self, pod: Pod, node_name: str) -> None:
        """Record (or, with "", clear) the pod's nominated node."""
        if node_name:
            self._nominated[pod.metadata.uid] = (node_name, pod)
        else:
            self._nominated.pop(pod.metadata.uid, None)

    @property
    def nominated_pods(self) -> dict[str, list[Pod]]:
        """Node name -> pods nominated there and not bound yet."""
        out: dict[str, list[Pod]] = {}
        for node_name, pod in self._nominated.values():
            out.setdefault(node_name, []).append(pod)
        return out

    # Binder
    async def bind(self, pod: Pod, node_name: str) -> None:
        uid = pod.metadata.uid
        if uid in self.bound:
            raise BindError(f"pod {pod.key} is already bound to {self.bound[uid].spec.node_name}")
        if node_name not in self._nodes.index:
            raise BindError(f'node "{node_name}" not found')
        assumed = self.assumed.pop(uid, None)
        if assumed is not None and assumed.spec.node_name != node_name:
            self._nodes.remove_pod(assumed)
            assumed = None
        if assumed is None:
            assumed = with_node_name(pod, node_name)
            self._nodes.add_pod(assumed)
        self.bound[uid] = assumed
        self._nominated.pop(uid, None)


def with_node_name(pod: Pod, node_name: str) -> Pod:
    """A copy of the pod bound to `node_name` (metadata and status shared, spec copied)."""
    return replace(pod, spec=replace(pod.spec, node_name=node_name))
