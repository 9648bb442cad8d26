"""Label and node selectors with upstream matching semantics.

Label selectors (metav1.LabelSelector):
- an empty selector (no matchLabels, no matchExpressions) matches everything;
- a nil selector (None) matches nothing, as metav1.LabelSelectorAsSelector(nil) returns
  labels.Nothing(). Use `selector_matches(None, labels)` where a field may be nil: pod
  (anti-)affinity terms, topology spread constraints, policy/v1 PDB selectors and
  namespaceSelector all follow this rule upstream.

Node selectors (v1.NodeSelector, component-helpers nodeaffinity):
- requirements inside one term are ANDed; the terms of a selector are ORed;
- a term with neither matchExpressions nor matchFields matches nothing;
- a selector with no terms matches nothing;
- Gt/Lt compare integers; a label value that is not an integer never matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
# The only field a NodeSelectorTerm.matchFields may select on.
NODE_FIELD_NAME = "metadata.name"


def _requirement_matches(
    key: str, operator: str, values: list[str], labels: Mapping[str, str]
) -> bool:
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels or len(values) != 1:
            return False
        have = _parse_int(labels[key])
        want = _parse_int(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _parse_int(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits only, 64-bit range.
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    if not -(2**63) <= value < 2**63:
        return None
    return value


@dataclass(slots=True, kw_only=True)
class LabelSelectorRequirement:
    key: str = ""
    operator: str = ""
    values: list[str] = field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return _requirement_matches(self.key, self.operator, self.values, labels)


@dataclass(slots=True, kw_only=True)
class LabelSelector:
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Empty selector matches everything (upstream labels.Everything())."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Upstream LabelSelectorAsSelector semantics: None matches nothing, {} matches all."""
    return selector is not None and selector.matches(labels)


@dataclass(slots=True, kw_only=True)
class NodeSelectorRequirement:
    key: str = ""
    operator: str = ""
    values: list[str] = field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return _requirement_matches(self.key, self.operator, self.values, labels)

    def matches_field(self, node_name: str) -> bool:
        """Field selectors support only metadata.name with In/NotIn (validation enforces it)."""
        if self.key != NODE_FIELD_NAME:
            return False
        if self.operator == "In":
            return node_name in self.values
        if self.operator == "NotIn":
            return node_name not in self.values
        return False


@dataclass(slots=True, kw_only=True)
class NodeSelectorTerm:
    match_expressions: list[NodeSelectorRequirement] = field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.match_expressions and not self.match_fields

    def matches(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        """Expressions and fields ANDed; an empty term matches nothing (like upstream)."""
        if self.is_empty():
            return False
        if not all(req.matches(labels) for req in self.match_expressions):
            return False
        return all(req.matches_field(node_name) for req in self.match_fields)


@dataclass(slots=True, kw_only=True)
class NodeSelector:
    node_selector_terms: list[NodeSelectorTerm] = field(default_factory=list)

    def matches(self, labels: Mapping[str, str], node_name: str = "") -> bool:
        """Terms ORed; no terms matches nothing."""
        return any(term.matches(labels, node_name) for term in self.node_selector_terms)
