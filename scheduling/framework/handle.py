"""FrameworkHandle: the Handle each Framework passes to its plugin factories.

The cluster's handle (scheduling/cache: nodes, binder, cluster objects, nominated pods,
budgets, extenders), every member forwarded explicitly, plus the framework itself
(`handle.framework`, for plugins such as preemption that run other extension points or reach
the waiting pods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from scheduling.framework.cluster_objects import (
    ClusterObjects,
)
from scheduling.framework.columns import NodeColumns
from scheduling.framework.extender import HTTPExtender
from scheduling.framework.interfaces import (
    Binder,
    ClusterHandle,
    FilterPlugin,
    PreFilterPlugin,
)
from shared.models import Pod, PodDisruptionBudget, PodGroup

if TYPE_CHECKING:
    from scheduling.framework.runtime import Framework


class FrameworkHandle:
    """The Handle of one Framework: the cluster's handle, plus the framework's own plugins."""

    __slots__ = ("_base", "framework")

    def __init__(self, base: ClusterHandle, framework: Framework) -> None:
        self._base = base
        self.framework = framework

    @property
    def base(self) -> ClusterHandle:
        """The cluster's handle this one wraps."""
        return self._base

    @property
    def nodes(self) -> NodeColumns:
        return self._base.nodes

    @property
    def binder(self) -> Binder:
        return self._base.binder

    @property
    def cluster_objects(self) -> ClusterObjects:
        return self._base.cluster_objects

    @property
    def nominated_pods(self) -> Mapping[str, Sequence[Pod]]:
        return self._base.nominated_pods

    @property
    def pod_disruption_budgets(self) -> Sequence[PodDisruptionBudget]:
        return self._base.pod_disruption_budgets

    @property
    def pod_groups(self) -> Mapping[str, PodGroup]:
        return self._base.pod_groups

    @property
    def pods(self) -> Mapping[str, Pod]:
        return self._base.pods

    @property
    def resource_version(self) -> int:
        return self._base.resource_version

    @property
    def extenders(self) -> Sequence[HTTPExtender]:
        return self._base.extenders

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
