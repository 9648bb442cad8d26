"""Args of the in-tree plugins, with upstream v1 defaults and validation (decoding them from
a configuration file: shared/config/args_decoding.py).

Sources: pkg/scheduler/apis/config/v1/defaults.go (SetDefaults_*Args) and
pkg/scheduler/apis/config/validation/validation_pluginargs.go (Validate*Args). Every class
has `set_defaults()` (idempotent) and `validate(path) -> list[str]` (field errors, empty when
valid). NodeAffinity and PodTopologySpread args hold shared.models objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.config import decode as dec
from shared.config.errors import duplicate, forbidden, invalid, not_supported, required
from shared.config.names import label_value_errors, qualified_name_errors
from shared.models import (
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySpreadConstraint,
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are 0..10 in the config; the plugin scales them to 0..100, as upstream."""

ARGS_API_VERSION = "kubescheduler.config.k8s.io/v1"

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _default_scoring_strategy() -> ScoringStrategy:
    return ScoringStrategy(type=LEAST_ALLOCATED, resources=_default_resources())


def _default_weights(resources: list[ResourceSpec]) -> None:
    for resource in resources:
        if resource.weight == 0:
            resource.weight = 1


# ---------------------------------------------------------------- NodeResourcesFit
@dataclass(slots=True, kw_only=True)
class ResourceSpec:
    name: str = ""
    weight: int = 0
    """1..100; 0 (or unset) becomes 1."""


@dataclass(slots=True, kw_only=True)
class UtilizationShapePoint:
    utilization: int = field(default=0, metadata=dec.INT32_FORMAT)
    """0..100 (percent of allocatable requested)."""
    score: int = field(default=0, metadata=dec.INT32_FORMAT)
    """0..10."""


@dataclass(slots=True, kw_only=True)
class RequestedToCapacityRatioParam:
    shape: list[UtilizationShapePoint] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ScoringStrategy:
    type: str = ""
    """LeastAllocated, MostAllocated or RequestedToCapacityRatio; no default when the strategy
    is given (upstream only defaults a missing strategy as a whole)."""
    resources: list[ResourceSpec] = field(default_factory=list)
    """Empty means cpu and memory, weight 1 each."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None
    """Required with RequestedToCapacityRatio, forbidden otherwise."""


@dataclass(slots=True, kw_only=True)
class NodeResourcesFitArgs:
    ignored_resources: list[str] = field(default_factory=list)
    """Resources the Filter ignores (not scoring)."""
    ignored_resource_groups: list[str] = field(default_factory=list)
    """Resource name prefixes before '/' the Filter ignores, e.g. "example.com"."""
    scoring_strategy: ScoringStrategy = field(default_factory=_default_scoring_strategy)

    def set_defaults(self) -> None:
        if not self.scoring_strategy.resources:
            self.scoring_strategy.resources = _default_resources()
        _default_weights(self.scoring_strategy.resources)

    def validate(self, path: str) -> list[str]:
        errors: list[str] = []
        for i, name in enumerate(self.ignored_resources):
            errors += _label_name_errors(dec.index(dec.child(path, "ignoredResources"), i), name)
        for i, group in enumerate(self.ignored_resource_groups):
            group_path = dec.index(dec.child(path, "ignoredResourceGroups"), i)
            if "/" in group:
                errors.append(invalid(group_path, group, "resource group name can't contain '/'"))
            errors += _label_name_errors(group_path, group)
        strategy = self.scoring_strategy
        strategy_path = dec.child(path, "scoringStrategy")
        if strategy.type not in SCORING_STRATEGY_TYPES:
            type_path = dec.child(strategy_path, "type")
            errors.append(not_supported(type_path, strategy.type, sorted(SCORING_STRATEGY_TYPES)))
        errors += _resource_weight_errors(strategy.resources, dec.child(strategy_path, "resources"))
        ratio_path = dec.child(strategy_path, "requestedToCapacityRatio")
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            if strategy.requested_to_capacity_ratio is None:
                detail = "must be specified when type is RequestedToCapacityRatio"
                errors.append(required(ratio_path, detail))
            else:
                shape = strategy.requested_to_capacity_ratio.shape
                errors += _shape_errors(shape, dec.child(ratio_path, "shape"))
        elif strategy.requested_to_capacity_ratio is not None:
            detail = "must be nil when type is not RequestedToCapacityRatio"
            errors.append(forbidden(ratio_path, detail))
        return errors


def _resource_weight_errors(resources: list[ResourceSpec], path: str) -> list[str]:
    errors = []
    for i, resource in enumerate(resources):
        if not 0 < resource.weight <= 100:
            detail = f"resource weight of {resource.name} not in valid range (0, 100]"
            errors.append(invalid(dec.child(dec.index(path, i), "weight"), resource.weight, detail))
    return errors


def _shape_errors(shape: list[UtilizationShapePoint], path: str) -> list[str]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errors = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            point_path = dec.child(dec.index(path, i), "utilization")
            detail = "values must be sorted in increasing order"
            errors.append(invalid(point_path, shape[i].utilization, detail))
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            point_path = dec.child(dec.index(path, i), "utilization")
            errors.append(invalid(point_path, point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            detail = f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            errors.append(invalid(dec.child(dec.index(path, i), "score"), point.score, detail))
    return errors


# ---------------------------------------------------------------- NodeResourcesBalancedAllocation
@dataclass(slots=True, kw_only=True)
class NodeResourcesBalancedAllocationArgs:
    resources: list[ResourceSpec] = field(default_factory=_default_resources)
    """Empty means cpu and memory; every weight must be 1."""

    def set_defaults(self) -> None:
        if not self.resources:
            self.resources = _default_resources()
        _default_weights(self.resources)

    def validate(self, path: str) -> list[str]:
        errors = []
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            resource_path = dec.index(dec.child(path, "resources"), i)
            if resource.name in seen:
                errors.append(duplicate(dec.child(resource_path, "name"), resource.name))
            seen.add(resource.name)
            if resource.weight != 1:
                errors.append(
                    invalid(dec.child(resource_path, "weight"), resource.weight, "must be 1")
                )
        return errors


# ---------------------------------------------------------------- NodeAffinity
@dataclass(slots=True, kw_only=True)
class NodeAffinityArgs:
    added_affinity: NodeAffinity | None = None
    """ANDed with every pod's own node affinity; None (default) matches all nodes."""

    def set_defaults(self) -> None:
        pass

    def validate(self, path: str) -> list[str]:
        affinity = self.added_affinity
        if affinity is None:
            return []
        affinity_path = dec.child(path, "addedAffinity")
        errors: list[str] = []
        required_selector = affinity.required_during_scheduling_ignored_during_execution
        if required_selector is not None:
            terms_path = dec.child(
                dec.child(affinity_path, "requiredDuringSchedulingIgnoredDuringExecution"),
                "nodeSelectorTerms",
            )
            for i, term in enumerate(required_selector.node_selector_terms):
                errors += _node_selector_term_errors(term, dec.index(terms_path, i))
        preferred_path = dec.child(affinity_path, "preferredDuringSchedulingIgnoredDuringExecution")
        for i, preferred in enumerate(
            affinity.preferred_during_scheduling_ignored_during_execution
        ):
            # Upstream skips (does not parse) terms of weight 0.
            if preferred.weight != 0:
                errors += _node_selector_term_errors(
                    preferred.preference, dec.index(preferred_path, i)
                )
        return errors


_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_FIELD_OPERATORS = ("In", "NotIn")


def _node_selector_term_errors(term: NodeSelectorTerm, path: str) -> list[str]:
    """component-helpers nodeaffinity.newNodeSelectorTerm: what makes a term unparseable."""
    errors: list[str] = []
    for i, req in enumerate(term.match_expressions):
        errors += _label_requirement_errors(req, dec.index(dec.child(path, "matchExpressions"), i))
    for i, req in enumerate(term.match_fields):
        req_path = dec.index(dec.child(path, "matchFields"), i)
        if req.operator not in _FIELD_OPERATORS:
            op_path = dec.child(req_path, "operator")
            errors.append(not_supported(op_path, req.operator, _FIELD_OPERATORS))
        elif len(req.values) != 1:
            errors.append(
                invalid(dec.child(req_path, "values"), req.values, "must have one element")
            )
    return errors


def _label_requirement_errors(req: NodeSelectorRequirement, path: str) -> list[str]:
    """labels.NewRequirement checks for a node selector requirement."""
    if req.operator not in _LABEL_OPERATORS:
        return [not_supported(dec.child(path, "operator"), req.operator, _LABEL_OPERATORS)]
    errors = []
    key_errors = qualified_name_errors(req.key)
    if key_errors:
        errors.append(invalid(dec.child(path, "key"), req.key, "; ".join(key_errors)))
    values_path = dec.child(path, "values")
    if req.operator in ("In", "NotIn") and not req.values:
        detail = "for 'in', 'notin' operators, values set can't be empty"
        errors.append(invalid(values_path, req.values, detail))
    if req.operator in ("Exists", "DoesNotExist") and req.values:
        detail = "values set must be empty for exists and does not exist"
        errors.append(invalid(values_path, req.values, detail))
    if req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            detail = "for 'Gt', 'Lt' operators, exactly one value is required"
            errors.append(invalid(values_path, req.values, detail))
        for i, value in enumerate(req.values):
            if not _is_int64(value):
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                errors.append(invalid(dec.index(values_path, i), value, detail))
    for i, value in enumerate(req.values):
        value_errors = label_value_errors(value)
        if value_errors:
            errors.append(invalid(dec.index(values_path, i), value, "; ".join(value_errors)))
    return errors


def _is_int64(text: str) -> bool:
    body = text[1:] if text[:1] in ("+", "-") else text
    return bool(body) and body.isascii() and body.isdigit() and -(2**63) <= int(text) < 2**63


# ---------------------------------------------------------------- InterPodAffinity
@dataclass(slots=True, kw_only=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = field(default=1, metadata=dec.INT32_FORMAT)
    """Score weight of existing pods' required affinity to the incoming pod; 0..100."""
    ignore_preferred_terms_of_existing_pods: bool = False
    """Ignore existing pods' preferred terms unless the incoming pod has inter-pod affinity."""

    def set_defaults(self) -> None:
        pass

    def validate(self, path: str) -> list[str]:
        weight = self.hard_pod_affinity_weight
        if not 0 <= weight <= 100:
            weight_path = dec.child(path, "hardPodAffinityWeight")
            return [invalid(weight_path, weight, "not in valid range [0, 100]")]
        return []


# ---------------------------------------------------------------- PodTopologySpread
@dataclass(slots=True, kw_only=True)
class PodTopologySpreadArgs:
    default_constraints: list[TopologySpreadConstraint] = field(default_factory=list)
    """Applied to pods without constraints of their own, when defaulting_type is List."""
    defaulting_type: str = SYSTEM_DEFAULTING
    """System (built-in hostname/zone constraints) or List (default_constraints)."""

    def set_defaults(self) -> None:
        if not self.defaulting_type:
            self.defaulting_type = SYSTEM_DEFAULTING

    def validate(self, path: str) -> list[str]:
        errors = []
        type_path = dec.child(path, "defaultingType")
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            supported = (SYSTEM_DEFAULTING, LIST_DEFAULTING)
            errors.append(not_supported(type_path, self.defaulting_type, supported))
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errors.append(
                invalid(type_path, self.defaulting_type, "when .defaultConstraints are not empty")
            )
        constraints_path = dec.child(path, "defaultConstraints")
        for i in range(len(self.default_constraints)):
            errors += _default_constraint_errors(self.default_constraints, i, constraints_path)
        return errors


_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")


def _default_constraint_errors(
    constraints: list[TopologySpreadConstraint], i: int, constraints_path: str
) -> list[str]:
    constraint = constraints[i]
    path = dec.index(constraints_path, i)
    errors = []
    if constraint.max_skew <= 0:
        detail = "not in valid range (0, inf)"
        errors.append(invalid(dec.child(path, "maxSkew"), constraint.max_skew, detail))
    key_path = dec.child(path, "topologyKey")
    if not constraint.topology_key:
        errors.append(required(key_path, "can not be empty"))
    else:
        errors += _label_name_errors(key_path, constraint.topology_key)
    when_path = dec.child(path, "whenUnsatisfiable")
    if not constraint.when_unsatisfiable:
        errors.append(required(when_path, "can not be empty"))
    elif constraint.when_unsatisfiable not in _WHEN_UNSATISFIABLE:
        errors.append(not_supported(when_path, constraint.when_unsatisfiable, _WHEN_UNSATISFIABLE))
    if constraint.label_selector is not None:
        detail = "constraint must not define a selector, as they deduced for each pod"
        errors.append(forbidden(dec.child(path, "labelSelector"), detail))
    for other in constraints[:i]:
        if (other.topology_key, other.when_unsatisfiable) == (
            constraint.topology_key,
            constraint.when_unsatisfiable,
        ):
            pair = f"{{{constraint.topology_key}, {constraint.when_unsatisfiable}}}"
            errors.append(duplicate(path, pair))
            break
    return errors


# ---------------------------------------------------------------- DefaultPreemption
@dataclass(slots=True, kw_only=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = field(default=10, metadata=dec.INT32_FORMAT)
    """Dry-run preemption on at least this percentage of nodes (0..100)."""
    min_candidate_nodes_absolute: int = field(default=100, metadata=dec.INT32_FORMAT)
    """... and at least this many nodes (>= 0); both 0 is invalid."""

    def set_defaults(self) -> None:
        pass

    def validate(self, path: str) -> list[str]:
        errors = []
        percentage_path = dec.child(path, "minCandidateNodesPercentage")
        absolute_path = dec.child(path, "minCandidateNodesAbsolute")
        percentage = self.min_candidate_nodes_percentage
        absolute = self.min_candidate_nodes_absolute
        if not 0 <= percentage <= 100:
            errors.append(invalid(percentage_path, percentage, "not in valid range [0, 100]"))
        if absolute < 0:
            errors.append(invalid(absolute_path, absolute, "not in valid range [0, inf)"))
        if percentage == 0 and absolute == 0:
            errors.append(
                invalid(
                    percentage_path,
                    0,
                    "cannot be zero at the same time as minCandidateNodesAbsolute",
                )
            )
            errors.append(
                invalid(
                    absolute_path,
                    0,
                    "cannot be zero at the same time as minCandidateNodesPercentage",
                )
            )
        return errors


# ---------------------------------------------------------------- Coscheduling
DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60
"""scheduler-plugins' DefaultWaitTime: how long placed gang members wait for the rest when
neither the PodGroup nor the args say (0 in either counts as unset)."""


@dataclass(slots=True, kw_only=True)
class CoschedulingArgs:
    """scheduler-plugins CoschedulingArgs (apis/config/v1, defaults SetDefaults_CoschedulingArgs,
    validation ValidateCoschedulingArgs). Not a kube-scheduler plugin: berth's default profile
    enables Coscheduling (see shared/config/defaults.py), so these args are defaulted there."""

    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS
    """How long placed members wait at Permit for the rest of their gang, unless the
    PodGroup's spec.scheduleTimeoutSeconds says otherwise; >= 0 (0: the 60 s default)."""
    pod_group_backoff_seconds: int = 0
    """Upstream's PostFilter backs a failed PodGroup off this long; >= 0. berth has no
    Coscheduling PostFilter: accepted and validated, with no effect yet."""

    def set_defaults(self) -> None:
        pass

    def validate(self, path: str) -> list[str]:
        errors = []
        for key, value in (
            ("permitWaitingTimeSeconds", self.permit_waiting_time_seconds),
            ("podGroupBackoffSeconds", self.pod_group_backoff_seconds),
        ):
            if value < 0:
                # Upstream's wording, although 0 is valid.
                errors.append(invalid(dec.child(path, key), value, "must be greater than 0"))
        return errors


# ---------------------------------------------------------------- registry of args types
TypedPluginArgs = (
    NodeResourcesFitArgs
    | NodeResourcesBalancedAllocationArgs
    | NodeAffinityArgs
    | InterPodAffinityArgs
    | PodTopologySpreadArgs
    | DefaultPreemptionArgs
    | CoschedulingArgs
)
PluginArgs = TypedPluginArgs | dict[str, Any]
"""Typed args for in-tree plugins; the raw mapping for any other plugin."""

ARGS_BY_PLUGIN: dict[str, type[TypedPluginArgs]] = {
    "Coscheduling": CoschedulingArgs,
    "DefaultPreemption": DefaultPreemptionArgs,
    "InterPodAffinity": InterPodAffinityArgs,
    "NodeAffinity": NodeAffinityArgs,
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "NodeResourcesFit": NodeResourcesFitArgs,
    "PodTopologySpread": PodTopologySpreadArgs,
}
"""Plugins whose args berth decodes, defaults and validates (upstream VolumeBindingArgs and
DynamicResourcesArgs belong to plugins berth does not have: kept as raw mappings).
Coscheduling's are scheduler-plugins' CoschedulingArgs (same apiVersion)."""


def _label_name_errors(path: str, name: str) -> list[str]:
    """metav1validation.ValidateLabelName: one error per problem."""
    return [invalid(path, name, error) for error in qualified_name_errors(name)]
