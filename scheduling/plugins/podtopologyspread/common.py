"""Constraints as the plugin uses them (upstream podtopologyspread/common.go, plugin.go).

- `filter_constraints`: the pod's constraints for one action (DoNotSchedule for Filter,
  ScheduleAnyway for Score), with matchLabelKeys merged into the selector and the defaults
  minDomains 1, nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore;
- `default_selector`: upstream helper.DefaultSelector, from the Services selecting the pod and
  its controller (ReplicationController, ReplicaSet, StatefulSet);
- `Inclusion`: per-row masks of the nodes a constraint counts (nodeAffinityPolicy and
  nodeTaintsPolicy), computed at most once per cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.plugins.nodeaffinity import required_node_affinity
from scheduling.plugins.podindex import (
    ClusterObjects,
    LabelQuery,
    PodIndex,
    PodQuery,
    Requirement,
    equality_query,
    parse_label_selector,
)
from scheduling.plugins.podindex.selectors import IN, SelectorError
from scheduling.plugins.tainttoleration.taint_toleration import first_untolerated_taint
from shared.models import Pod, TopologySpreadConstraint

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(
        topology_key=HOSTNAME_LABEL, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=3
    ),
    TopologySpreadConstraint(
        topology_key=ZONE_LABEL, when_unsatisfiable=SCHEDULE_ANYWAY, max_skew=5
    ),
)
"""Upstream systemDefaultConstraints."""

_CORE_V1 = "v1"
_APPS_V1 = "apps/v1"


@dataclass(frozen=True, slots=True)
class Constraint:
    """A topologySpreadConstraint with its selector parsed (None matches no pod)."""

    max_skew: int
    topology_key: str
    selector: LabelQuery | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def query(self, namespace: str) -> PodQuery:
        return PodQuery(frozenset((namespace,)), self.selector)


def filter_constraints(
    constraints: list[TopologySpreadConstraint] | tuple[TopologySpreadConstraint, ...],
    pod_labels: Mapping[str, str],
    action: str,
) -> list[Constraint]:
    """Upstream filterTopologySpreadConstraints. Raises SelectorError."""
    result: list[Constraint] = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        selector = parse_label_selector(c.label_selector)
        if selector is not None and c.match_label_keys:
            extra = [
                Requirement(k, IN, (pod_labels[k],)) for k in c.match_label_keys if k in pod_labels
            ]
            if extra:
                selector = selector.with_requirements(extra)
        result.append(
            Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=selector,
                min_domains=1 if c.min_domains is None else c.min_domains,
                node_affinity_policy=c.node_affinity_policy or HONOR,
                node_taints_policy=c.node_taints_policy or IGNORE,
            )
        )
    return result


def _controller_requirements(pod: Pod, objects: ClusterObjects) -> tuple[str, list[Requirement]]:
    """("rc", labels) for a ReplicationController owner (its map merges with the services'),
    ("set", requirements) for a ReplicaSet or StatefulSet owner, ("", []) otherwise."""
    owner = next((o for o in pod.metadata.owner_references if o.controller), None)
    if owner is None:
        return "", []
    ns = pod.metadata.namespace
    if owner.api_version == _CORE_V1 and owner.kind == "ReplicationController":
        rc = objects.replication_controller_selector(ns, owner.name)
        return ("rc", list(equality_query(rc).requirements)) if rc is not None else ("", [])
    if owner.api_version == _APPS_V1 and owner.kind in ("ReplicaSet", "StatefulSet"):
        if owner.kind == "ReplicaSet":
            selector = objects.replica_set_selector(ns, owner.name)
        else:
            selector = objects.stateful_set_selector(ns, owner.name)
        try:
            query = parse_label_selector(selector)
        except SelectorError:
            return "", []
        return ("set", list(query.requirements)) if query is not None else ("", [])
    return "", []


def default_selector(pod: Pod, objects: ClusterObjects) -> LabelQuery:
    """Upstream helper.DefaultSelector: the selectors of the Services that select the pod,
    merged with its controller's selector."""
    label_set: dict[str, str] = {}
    labels = pod.metadata.labels
    for selector in objects.service_selectors(pod.metadata.namespace):
        if selector is not None and equality_query(selector).matches(labels):
            label_set.update(selector)
    kind, requirements = _controller_requirements(pod, objects)
    if kind == "rc":
        label_set.update((r.key, r.values[0]) for r in requirements)
        return equality_query(label_set)
    base = equality_query(label_set)
    if kind == "set":
        return base.with_requirements(requirements)
    return base


@dataclass(slots=True)
class Inclusion:
    """Which nodes a constraint counts for `pod` (upstream matchNodeInclusionPolicies),
    as masks over all rows, each computed at most once."""

    pod: Pod
    nodes: NodeColumns
    _affinity: NDArray[np.bool_] | None = field(default=None)
    _taints: NDArray[np.bool_] | None = field(default=None)

    def affinity_mask(self) -> NDArray[np.bool_]:
        if self._affinity is None:
            self._affinity = required_node_affinity(self.pod).mask(self.nodes, ALL_ROWS)
        return self._affinity

    def taints_mask(self) -> NDArray[np.bool_]:
        if self._taints is None:
            tolerations = self.pod.spec.tolerations
            ok = [first_untolerated_taint(ts, tolerations) is None for ts in self.nodes.taint_sets]
            self._taints = np.array(ok, dtype=np.bool_)[self.nodes.taint_set_of]
        return self._taints

    def mask(self, constraint: Constraint) -> NDArray[np.bool_] | None:
        """None when every node is included."""
        mask: NDArray[np.bool_] | None = None
        if constraint.node_affinity_policy == HONOR:
            mask = self.affinity_mask()
        if constraint.node_taints_policy == HONOR:
            taints = self.taints_mask()
            mask = taints if mask is None else mask & taints
        return mask


def row_included(constraint: Constraint, pod: Pod, nodes: NodeColumns, row: int) -> bool:
    """matchNodeInclusionPolicies for one node."""
    one: Rows = np.array([row], dtype=np.intp)
    if (
        constraint.node_affinity_policy == HONOR
        and not required_node_affinity(pod).mask(nodes, one)[0]
    ):
        return False
    if constraint.node_taints_policy == HONOR:
        taints = nodes.taint_sets[int(nodes.taint_set_of[row])]
        return first_untolerated_taint(taints, pod.spec.tolerations) is None
    return True


def has_all_keys(nodes: NodeColumns, constraints: list[Constraint]) -> NDArray[np.bool_]:
    """Per row: the node carries every constraint's topology key."""
    mask = np.ones(len(nodes), dtype=np.bool_)
    for key in dict.fromkeys(c.topology_key for c in constraints):
        mask &= nodes.label(key).codes >= 0
    return mask


class RowCounts:
    """Per-row counts of matching pods per distinct selector, for one pod's cycle (upstream
    countPodsMatchSelector: same namespace, not terminating, an empty selector counts 0)."""

    def __init__(self, pod: Pod, nodes: NodeColumns) -> None:
        self._namespace = pod.metadata.namespace
        self._nodes = nodes
        self._index = PodIndex.of(nodes)
        self._cache: dict[LabelQuery | None, NDArray[np.int64]] = {}

    def of(self, constraint: Constraint) -> NDArray[np.int64]:
        selector = constraint.selector
        counts = self._cache.get(selector)
        if counts is None:
            if selector is None or selector.is_empty():
                counts = np.zeros(len(self._nodes), dtype=np.int64)
            else:
                query = (constraint.query(self._namespace),)
                counts = self._index.row_counts(self._nodes, query, skip_terminating=True)
            self._cache[selector] = counts
        return counts


def with_selector(constraints: list[Constraint], selector: LabelQuery) -> list[Constraint]:
    return [replace(c, selector=selector) for c in constraints]
