"""Label selectors parsed once into a hashable canonical form (apimachinery `labels.Selector`).

`parse_label_selector` follows metav1.LabelSelectorAsSelector:
- None (a nil selector) gives `None`, which matches nothing (labels.Nothing());
- an empty selector gives `LabelQuery(())`, which matches everything (labels.Everything());
- matchLabels become equality requirements, matchExpressions keep their operator; keys,
  values and value counts are validated as upstream's NewRequirement does.

A LabelQuery is hashable and canonical (requirements sorted, values sorted and unique), so
the per-selector caches in PodIndex are shared by every pod that carries the same selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.config.names import label_value_errors, qualified_name_errors
from shared.models import LabelSelector

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"


class SelectorError(ValueError):
    """A label selector that upstream's LabelSelectorAsSelector rejects."""


@dataclass(frozen=True, slots=True, order=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == IN:
            value = labels.get(self.key)
            return value is not None and value in self.values
        if self.operator == NOT_IN:
            value = labels.get(self.key)
            return value is None or value not in self.values
        if self.operator == EXISTS:
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelQuery:
    """A parsed, non-nil label selector: every requirement must hold; none means everything."""

    requirements: tuple[Requirement, ...] = ()

    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels) for req in self.requirements)

    def with_requirements(self, extra: list[Requirement]) -> LabelQuery:
        return LabelQuery(tuple(sorted(set(self.requirements) | set(extra))))


EVERYTHING = LabelQuery()


def query_matches(query: LabelQuery | None, labels: Mapping[str, str]) -> bool:
    """None is labels.Nothing()."""
    return query is not None and query.matches(labels)


def requirement(key: str, operator: str, values: list[str] | tuple[str, ...]) -> Requirement:
    """One validated requirement (upstream labels.NewRequirement)."""
    errors = qualified_name_errors(key)
    if errors:
        raise SelectorError(f"invalid label key {key!r}: {'; '.join(errors)}")
    if operator in (IN, NOT_IN):
        if not values:
            raise SelectorError(f"{key}: for 'in', 'notin' operators, values set can't be empty")
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            raise SelectorError(f"{key}: values set must be empty for exists and does not exist")
    else:
        raise SelectorError(f"{key}: {operator!r} is not a valid label selector operator")
    for value in values:
        errors = label_value_errors(value)
        if errors:
            raise SelectorError(f"invalid label value {value!r}: {'; '.join(errors)}")
    return Requirement(key, operator, tuple(sorted(set(values))))


def parse_label_selector(selector: LabelSelector | None) -> LabelQuery | None:
    if selector is None:
        return None
    reqs = [requirement(key, IN, (value,)) for key, value in selector.match_labels.items()]
    reqs += [requirement(e.key, e.operator, e.values) for e in selector.match_expressions]
    return LabelQuery(tuple(sorted(set(reqs))))


def equality_query(labels: Mapping[str, str]) -> LabelQuery:
    """labels.SelectorFromSet (no validation, as upstream's AsSelectorPreValidated)."""
    return LabelQuery(tuple(sorted(Requirement(k, IN, (v,)) for k, v in labels.items())))
