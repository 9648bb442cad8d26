"""API-server validation of selectors and affinity: label selectors, node selector terms and
requirements (labels and fields), node affinity, pod (anti-)affinity terms and weights
(upstream pkg/apis/core/validation, metav1validation)."""

from __future__ import annotations

from shared.models.field_checks import fail, unsupported
from shared.models.pod import NodeAffinity, PodAffinityTerm, WeightedPodAffinityTerm
from shared.models.selectors import (
    LABEL_OPERATORS,
    NODE_FIELD_NAME,
    NODE_SELECTOR_OPERATORS,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)


def validate_label_selector(selector: LabelSelector | None, path: str) -> None:
    if selector is None:
        return
    for key in selector.match_labels:
        if not key:
            raise fail(f"{path}.matchLabels", "label key must not be empty")
    for i, req in enumerate(selector.match_expressions):
        p = f"{path}.matchExpressions[{i}]"
        if not req.key:
            raise fail(f"{p}.key", "Required value")
        if req.operator not in LABEL_OPERATORS:
            raise unsupported(f"{p}.operator", req.operator, LABEL_OPERATORS)
        _check_values(req.operator, req.values, p)


def _check_values(operator: str, values: list[str], path: str) -> None:
    if operator in ("In", "NotIn") and not values:
        raise fail(
            f"{path}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        raise fail(
            f"{path}.values",
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise fail(
                f"{path}.values",
                "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
            )
        text = values[0]
        body = text[1:] if text[:1] in ("+", "-") else text
        if not (body.isascii() and body.isdigit()):
            raise fail(f"{path}.values[0]", f'Invalid value: "{text}": must be an integer')


def _validate_node_requirement(req: NodeSelectorRequirement, path: str) -> None:
    if not req.key:
        raise fail(f"{path}.key", "Required value")
    if req.operator not in NODE_SELECTOR_OPERATORS:
        raise unsupported(f"{path}.operator", req.operator, NODE_SELECTOR_OPERATORS)
    _check_values(req.operator, req.values, path)


def _validate_field_requirement(req: NodeSelectorRequirement, path: str) -> None:
    if req.key != NODE_FIELD_NAME:
        raise unsupported(f"{path}.key", req.key, (NODE_FIELD_NAME,))
    if req.operator not in ("In", "NotIn"):
        raise unsupported(f"{path}.operator", req.operator, ("In", "NotIn"))
    if len(req.values) != 1:
        raise fail(
            f"{path}.values",
            "Required value: must be only one value when `operator` is 'In' or 'NotIn' "
            "for node field selector",
        )


def validate_node_selector_term(term: NodeSelectorTerm, path: str) -> None:
    for i, req in enumerate(term.match_expressions):
        _validate_node_requirement(req, f"{path}.matchExpressions[{i}]")
    for i, req in enumerate(term.match_fields):
        _validate_field_requirement(req, f"{path}.matchFields[{i}]")


def _check_weight(weight: int, path: str) -> None:
    if not 1 <= weight <= 100:
        raise fail(f"{path}.weight", f"Invalid value: {weight}: must be in the range 1-100")


def validate_node_affinity(affinity: NodeAffinity, path: str) -> None:
    required = affinity.required_during_scheduling_ignored_during_execution
    if required is not None:
        p = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        if not required.node_selector_terms:
            raise fail(
                f"{p}.nodeSelectorTerms",
                "Required value: must have at least one node selector term",
            )
        for i, term in enumerate(required.node_selector_terms):
            validate_node_selector_term(term, f"{p}.nodeSelectorTerms[{i}]")
    for i, pref in enumerate(affinity.preferred_during_scheduling_ignored_during_execution):
        p = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        _check_weight(pref.weight, p)
        validate_node_selector_term(pref.preference, f"{p}.preference")


def _validate_pod_affinity_term(term: PodAffinityTerm, path: str) -> None:
    # As upstream validatePodAffinityTerm: an empty topologyKey is an error in required and
    # preferred terms.
    if not term.topology_key:
        raise fail(f"{path}.topologyKey", "Required value: can not be empty")
    validate_label_selector(term.label_selector, f"{path}.labelSelector")
    validate_label_selector(term.namespace_selector, f"{path}.namespaceSelector")
    if (term.match_label_keys or term.mismatch_label_keys) and term.label_selector is None:
        raise fail(
            f"{path}.matchLabelKeys",
            "Forbidden: must not be specified when labelSelector is not set",
        )
    overlap = set(term.match_label_keys) & set(term.mismatch_label_keys)
    if overlap:
        key = sorted(overlap)[0]
        raise fail(
            f"{path}.matchLabelKeys",
            f'Invalid value: "{key}": exists in both matchLabelKeys and mismatchLabelKeys',
        )


def validate_pod_affinity(
    required: list[PodAffinityTerm], preferred: list[WeightedPodAffinityTerm], path: str
) -> None:
    for i, term in enumerate(required):
        _validate_pod_affinity_term(
            term, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
        )
    for i, weighted in enumerate(preferred):
        p = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        _check_weight(weighted.weight, p)
        _validate_pod_affinity_term(weighted.pod_affinity_term, f"{p}.podAffinityTerm")
