"""The binder's re-checks: the pod's profile's own Filter plugins, built through the registry
by the profile's Framework (the same expansion of the profile as the worker's), run on the one
proposed node.

- Check-and-reserve (Lua, authoritative) runs the node-local Filters whose state is the node's
  usage: NodeUnschedulable, TaintToleration, NodePorts, NodeResourcesFit (`node_checks`).
- The other node-local Filters (NodeAffinity, NodeName, any NODE_LOCAL plugin) run here on the
  node's row: on the binder's view, or on the node as it is now when it changed since the
  worker saw it.
- Filters that read other nodes' pods (WHEN_SKIPPED, or plugins that do not say: InterPodAffinity,
  PodTopologySpread) run here with their PreFilter over the binder's whole view, as of the
  reservation. A pod for which every one of them Skips at PreFilter, while no pod in the view
  has anti-affinity that can reach it, needs none of that (`check_alone`).
- Coscheduling at Permit: whether gang pods wait for their PodGroup, with the profile's args.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduling.cache.cache import ClusterCache
from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterPlugin, FilterResult, PreFilterPlugin
from scheduling.framework.pod_index import PodIndex
from scheduling.framework.registry import Registry
from scheduling.framework.runtime import Framework
from scheduling.framework.signature import NODE_LOCAL
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from scheduling.plugins.binding import compute_pod_resource_request, preemption_refusal
from scheduling.plugins.registry import in_tree_registry
from shared.config import (
    CoschedulingArgs,
    NodeResourcesFitArgs,
    Profile,
    SchedulerConfiguration,
    default_config,
)
from shared.models import Node, Pod
from shared.store.fields import NodeChecks

CHECKED_IN_STORE = (
    (NodeChecks.UNSCHEDULABLE, names.NODE_UNSCHEDULABLE),
    (NodeChecks.TAINTS, names.TAINT_TOLERATION),
    (NodeChecks.PORTS, names.NODE_PORTS),
    (NodeChecks.FIT, names.NODE_RESOURCES_FIT),
)
"""The Filters check-and-reserve runs (ReserveRequest.node_checks letters): their state is the
node's usage, which only the store counts exactly."""


def run_filter(
    name: str,
    pre: PreFilterPlugin | None,
    plugin: FilterPlugin,
    pod: Pod,
    columns: NodeColumns,
    row: int,
) -> Status:
    """The plugin's verdict for the node of `row`: its PreFilter (`pre`: the profile runs one)
    over `columns`, then its Filter on `row`."""
    state = CycleState()
    if pre is not None:
        pre_result, status = pre.pre_filter(state, pod, columns)
        if status.is_skip():
            return SUCCESS
        if not status.is_success():
            return status.with_plugin(name)
        narrowed = pre_result.node_names if pre_result is not None else None
        if narrowed is not None and columns.names[row] not in narrowed:
            reason = "node(s) didn't satisfy plugin(s) [" + name + "]"
            return Status.unresolvable(reason, plugin=name)
    result = plugin.filter(state, pod, columns, np.array([row], dtype=np.intp))
    if result is None:
        return SUCCESS
    if isinstance(result, Status):
        return result if result.is_success() else result.with_plugin(name)
    return _row_status(result, name)


def _row_status(result: FilterResult, plugin: str) -> Status:
    if bool(result.ok[0]):
        return SUCCESS
    for status, mask in result.failures:
        if bool(mask[0]):
            return status.with_plugin(plugin)
    return Status.unschedulable("rejected", plugin=plugin)


_Filter = tuple[str, PreFilterPlugin | None, FilterPlugin]


class ProfileChecks:
    """The checks of one profile."""

    def __init__(
        self, profile: Profile, view: ClusterCache, registry: Registry | None = None
    ) -> None:
        self.scheduler_name = profile.scheduler_name
        self._view = view
        framework = Framework(
            profile, registry if registry is not None else in_tree_registry(), view, reuse=False
        )
        filters = [name for name, _ in framework.filter_plugins]
        self.node_checks = "".join(letter for letter, name in CHECKED_IN_STORE if name in filters)
        """The node-local Filters check-and-reserve runs for this profile (ReserveRequest)."""
        fit = profile.plugin_args(NodeResourcesFitArgs)
        self._fit_enabled = names.NODE_RESOURCES_FIT in filters
        self._ignored = frozenset(fit.ignored_resources)
        self._ignored_groups = frozenset(fit.ignored_resource_groups)
        pre_filters = dict(framework.pre_filter_plugins)
        in_store = {name for _, name in CHECKED_IN_STORE}
        self.filters: list[_Filter] = [
            (name, pre_filters.get(name), plugin)
            for name, plugin in framework.filter_plugins
            if name not in in_store
        ]
        """The Filters this binder runs, in the profile's order."""
        self._framework = framework
        self._pod_index = PodIndex(listen=False)
        self._node_local = [f for f in self.filters if _node_local(f[2])]
        self._cross_node = [f for f in self.filters if not _node_local(f[2])]
        self.coscheduling: CoschedulingArgs | None = None
        """The profile's Coscheduling args when it runs Coscheduling at Permit (gangs wait on
        the store's counters); None: gang pods bind as ordinary pods."""
        if any(name == names.COSCHEDULING for name, _ in framework.permit_plugins):
            self.coscheduling = profile.plugin_args(CoschedulingArgs)

    def fit_check(self, pod: Pod) -> tuple[tuple[str, int], ...]:
        if not self._fit_enabled:
            return ()
        request = compute_pod_resource_request(pod, self._ignored, self._ignored_groups)
        return tuple(zip(request.checked, request.amounts, strict=True))

    def check_node_static(self, pod: Pod, node: Node) -> Status:
        """The node-local Filters that check-and-reserve does not run (NodeAffinity with the
        nodeSelector, NodeName, ...) against `node` as it is now."""
        return _first_failure(self._node_local, pod, NodeColumns([node]), 0)

    def check_alone(self, pod: Pod, node: str, node_resource_version: int) -> Status | None:
        """What `check_cross_node` would answer for `pod` on `node`, when it can be told
        without the other nodes' pods: every Filter that reads other nodes Skips at PreFilter
        for the pod (no required pod affinity or anti-affinity, no DoNotSchedule spread after
        the profile's defaults, ...) and the view counts no pod whose required anti-affinity
        can match pods of its namespace. Then only the node-local Filters remain, run on the
        view's copy of the node, which must be the version the worker saw
        (`node_resource_version`). None: the full check is needed.

        The view may lag the store: pods with anti-affinity reserved since are counted by the
        store itself, which binds at once only while it counts none that can match the pod
        (reserve.lua)."""
        columns = self._view.columns
        if columns.repelled(pod.metadata.namespace):
            return None
        for _, pre, _ in self._cross_node:
            if pre is None or not pre.pre_filter(CycleState(), pod, columns)[1].is_skip():
                return None
        row = columns.index.get(node)
        if row is None or columns.nodes[row].metadata.resource_version != node_resource_version:
            return None
        return _first_failure(self._node_local, pod, columns, row)

    def preemption_refusal(self, pod: Pod, node: str, victims: Sequence[Pod]) -> str:
        """Why the binder's view does not justify evicting `victims` on `node` for `pod`
        ("" when it does: scheduling.plugins.defaultpreemption.justify)."""
        return preemption_refusal(
            self._framework, pod, self._view.columns, node, victims, self._pod_index
        )

    def check_cross_node(self, pod: Pod, node: str) -> Status:
        """The Filters check-and-reserve does not run, on `node` over the binder's view: the
        node-local ones on the node's labels (a proposal is not taken on trust), then
        InterPodAffinity, PodTopologySpread and the like, in the profile's order."""
        if not self.filters:
            return SUCCESS
        columns = self._view.columns
        row = columns.index.get(node)
        if row is None:
            return Status.error(f"node {node!r} is not in the binder's view yet")
        return _first_failure(self.filters, pod, columns, row)


def _node_local(plugin: object) -> bool:
    """Whether the plugin says its verdict on a node reads that node alone (a plugin that
    does not say is taken to read other nodes)."""
    return getattr(plugin, "signature_reuse", None) == NODE_LOCAL


def _first_failure(filters: Sequence[_Filter], pod: Pod, columns: NodeColumns, row: int) -> Status:
    for name, pre, plugin in filters:
        status = run_filter(name, pre, plugin, pod, columns, row)
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
