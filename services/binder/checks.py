"""The binder's re-checks, reusing the scheduler plugins' PreFilter + Filter on one row.

- Cross-node (InterPodAffinity, PodTopologySpread DoNotSchedule): PreFilter over the binder's
  whole view (every node and bound or assumed pod), Filter on the chosen node's row only.
- NodeAffinity, when the node changed since the worker saw it: PreFilter + Filter on a one-node
  NodeColumns of the current node.
- Coscheduling at Permit: whether gang pods wait for their PodGroup, with the profile's args.

Which plugins run, and with which args, follows the pod's profile (schedulerName) in the
KubeSchedulerConfiguration, as in the worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from scheduling.cache.cache import ClusterCache
from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, FilterResult, PreFilterPlugin
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.interpodaffinity.plugin import InterPodAffinity
from scheduling.plugins.nodeaffinity.node_affinity import NodeAffinity
from scheduling.plugins.noderesources.fit import compute_pod_resource_request
from scheduling.plugins.podindex import SelectorError
from scheduling.plugins.podtopologyspread.common import DO_NOT_SCHEDULE
from scheduling.plugins.podtopologyspread.plugin import PodTopologySpread
from shared.config import (
    CoschedulingArgs,
    ExtensionPoint,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesFitArgs,
    Plugins,
    PodTopologySpreadArgs,
    Profile,
    SchedulerConfiguration,
    default_config,
)
from shared.models import Node, Pod, required_terms


def enabled_at(plugins: Plugins, point: ExtensionPoint, name: str) -> bool:
    """Whether `name` runs at `point`: enabled there, or by MultiPoint and not disabled there."""
    at = plugins.at(point)
    if any(p.name == name for p in at.enabled):
        return True
    if any(p.name in (name, "*") for p in at.disabled):
        return False
    return any(p.name == name for p in plugins.multi_point.enabled)


def filter_enabled(plugins: Plugins, name: str) -> bool:
    """Whether `name` runs at Filter."""
    return enabled_at(plugins, ExtensionPoint.FILTER, name)


class FilteringPlugin(PreFilterPlugin, FilterPlugin, Protocol):
    """A plugin with both PreFilter and Filter (every plugin the binder re-runs)."""


def run_filter(plugin: FilteringPlugin, pod: Pod, columns: NodeColumns, row: int) -> Status:
    """PreFilter over `columns`, then Filter on `row`: the plugin's verdict for that node."""
    state = CycleState()
    pre_result, status = plugin.pre_filter(state, pod, columns)
    if status.is_skip():
        return SUCCESS
    if not status.is_success():
        return status.with_plugin(plugin.name)
    narrowed = pre_result.node_names if pre_result is not None else None
    if narrowed is not None and columns.names[row] not in narrowed:
        reason = "node(s) didn't satisfy plugin(s) [" + plugin.name + "]"
        return Status.unresolvable(reason, plugin=plugin.name)
    result = plugin.filter(state, pod, columns, np.array([row], dtype=np.intp))
    if result is None:
        return SUCCESS
    if isinstance(result, Status):
        return result.with_plugin(plugin.name)
    return _row_status(result, plugin.name)


def _row_status(result: FilterResult, plugin: str) -> Status:
    if bool(result.ok[0]):
        return SUCCESS
    for status, mask in result.failures:
        if bool(mask[0]):
            return status.with_plugin(plugin)
    return Status.unschedulable("rejected", plugin=plugin)


class ProfileChecks:
    """The checks of one profile."""

    def __init__(self, profile: Profile, view: ClusterCache) -> None:
        plugins = profile.plugins
        self.scheduler_name = profile.scheduler_name
        self._view = view
        fit = profile.plugin_args(NodeResourcesFitArgs)
        self._fit_enabled = filter_enabled(plugins, names.NODE_RESOURCES_FIT)
        self.node_checks = "".join(
            letter
            for letter, plugin in (
                ("u", names.NODE_UNSCHEDULABLE),
                ("t", names.TAINT_TOLERATION),
                ("p", names.NODE_PORTS),
                ("f", names.NODE_RESOURCES_FIT),
            )
            if filter_enabled(plugins, plugin)
        )
        """The node-local Filters check-and-reserve runs for this profile (ReserveRequest)."""
        self._ignored = frozenset(fit.ignored_resources)
        self._ignored_groups = frozenset(fit.ignored_resource_groups)
        self.node_affinity: NodeAffinity | None = None
        if filter_enabled(plugins, names.NODE_AFFINITY):
            args = profile.plugin_args(NodeAffinityArgs)
            self.node_affinity = NodeAffinity(args.added_affinity)
        self.coscheduling: CoschedulingArgs | None = None
        """The profile's Coscheduling args when it runs Coscheduling at Permit (gangs wait on
        the store's counters); None: gang pods bind as ordinary pods."""
        if enabled_at(plugins, ExtensionPoint.PERMIT, names.COSCHEDULING):
            self.coscheduling = profile.plugin_args(CoschedulingArgs)
        self.cross_node: list[FilteringPlugin] = []
        objects = view.cluster_objects
        self._spread: PodTopologySpread | None = None
        if filter_enabled(plugins, names.POD_TOPOLOGY_SPREAD):
            self._spread = PodTopologySpread(profile.plugin_args(PodTopologySpreadArgs), objects)
            self.cross_node.append(self._spread)
        self._inter_pod = filter_enabled(plugins, names.INTER_POD_AFFINITY)
        if self._inter_pod:
            affinity = InterPodAffinity(profile.plugin_args(InterPodAffinityArgs), objects)
            self.cross_node.append(affinity)

    def fit_check(self, pod: Pod) -> tuple[tuple[str, int], ...]:
        if not self._fit_enabled:
            return ()
        request = compute_pod_resource_request(pod, self._ignored, self._ignored_groups)
        return tuple(zip(request.checked, request.amounts, strict=True))

    def check_node_static(self, pod: Pod, node: Node) -> Status:
        """NodeAffinity (incl. nodeSelector) against `node` as it is now."""
        if self.node_affinity is None:
            return SUCCESS
        return run_filter(self.node_affinity, pod, NodeColumns([node]), 0)

    def check_alone(self, pod: Pod, node: str, node_resource_version: int) -> Status | None:
        """What `check_cross_node` would answer for `pod` on `node`, when it can be told
        without the other nodes' pods: the pod has no cross-node constraint of its own (no
        required pod affinity or anti-affinity, no DoNotSchedule spread, after the profile's
        defaults) and the view counts no pod whose required anti-affinity can match pods of
        its namespace. Then only NodeAffinity remains, checked on the view's copy of the
        node, which must be the version the worker saw (`node_resource_version`). None: the
        full check is needed.

        The view may lag the store: pods with anti-affinity reserved since are counted by the
        store itself, which binds at once only while it counts none that can match the pod
        (reserve.lua)."""
        if self._inter_pod and (required_terms(pod) or required_terms(pod, anti=True)):
            return None
        if self._spread is not None:
            try:
                if self._spread.constraints(pod, DO_NOT_SCHEDULE):
                    return None
            except SelectorError:
                return None  # the full check reports it
        columns = self._view.columns
        if columns.repelled(pod.metadata.namespace):
            return None
        row = columns.index.get(node)
        if row is None or columns.nodes[row].metadata.resource_version != node_resource_version:
            return None
        if self.node_affinity is None:
            return SUCCESS
        return run_filter(self.node_affinity, pod, columns, row)

    def check_cross_node(self, pod: Pod, node: str) -> Status:
        """NodeAffinity (the node's labels: a proposal is not taken on trust), then
        InterPodAffinity and PodTopologySpread on `node`, over the binder's view."""
        if not self.cross_node and self.node_affinity is None:
            return SUCCESS
        columns = self._view.columns
        row = columns.index.get(node)
        if row is None:
            return Status.error(f"node {node!r} is not in the binder's view yet")
        plugins: list[FilteringPlugin] = [self.node_affinity] if self.node_affinity else []
        for plugin in [*plugins, *self.cross_node]:
            status = run_filter(plugin, pod, columns, row)
            if not status.is_success():
                return status
        return SUCCESS


class Checks:
    """ProfileChecks by schedulerName."""

    def __init__(self, config: SchedulerConfiguration | None, view: ClusterCache) -> None:
        config = config if config is not None else default_config()
        self._profiles = {p.scheduler_name: ProfileChecks(p, view) for p in config.profiles}
        self._first = next(iter(self._profiles.values()))

    def for_pod(self, pod: Pod) -> ProfileChecks:
        """The pod's profile (the first profile for a schedulerName no profile has)."""
        return self._profiles.get(pod.spec.scheduler_name, self._first)

    @property
    def profiles(self) -> Sequence[ProfileChecks]:
        return list(self._profiles.values())
