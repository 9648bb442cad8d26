"""Pod (anti-)affinity terms parsed as upstream's framework.AffinityTerm.

A term matches a pod when the pod's namespace is in `namespaces` or its namespace's labels
match `namespace_selector`, and the pod's labels match `selector` (AffinityTerm.Matches).

The plain definition of that is shared.models.affinity (the queue and the audit use it); this
is its parsed form, built once per pod so that matching is cheap: the namespaces and the
merged label selector come from the shared helpers (term_namespaces, term_label_selector), and
test_terms_agree.py checks that matching agrees with affinity_term_matches.

Parsing (upstream GetAffinityTerms / getNamespacesFromPodAffinityTerm, plus the API server's
admission step for matchLabelKeys/mismatchLabelKeys):
- `namespaces` empty and `namespaceSelector` nil mean the owner pod's own namespace;
- a nil `namespaceSelector` matches no namespace, `{}` matches every namespace;
- matchLabelKeys add `key In (owner's value)` and mismatchLabelKeys `key NotIn (owner's value)`
  to a non-nil labelSelector, for the keys the owner pod carries (kube-apiserver does this
  when the pod is created; doing it again is harmless, the requirements are a set);
- one unparsable term drops every term of its list (upstream returns the error for the list).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.plugins.podindex.selectors import (
    LabelQuery,
    SelectorError,
    parse_label_selector,
    query_matches,
)
from shared.models import Affinity, Pod, PodAffinityTerm, WeightedPodAffinityTerm
from shared.models.affinity import term_label_selector, term_namespaces


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    namespaces: frozenset[str]
    namespace_selector: LabelQuery | None
    selector: LabelQuery | None
    topology_key: str

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        if namespace in self.namespaces or query_matches(self.namespace_selector, namespace_labels):
            return query_matches(self.selector, labels)
        return False

    def namespace_matches(self, namespace: str, namespace_labels: Mapping[str, str]) -> bool:
        return namespace in self.namespaces or query_matches(
            self.namespace_selector, namespace_labels
        )


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerms:
    """A pod's four term lists, parsed."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    errors: tuple[str, ...] = field(default=())

    def is_empty(self) -> bool:
        return not (
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


NO_TERMS = PodAffinityTerms()


def parse_term(pod: Pod, term: PodAffinityTerm) -> AffinityTerm:
    """Raises SelectorError when a selector does not parse."""
    return AffinityTerm(
        namespaces=term_namespaces(term, pod.metadata.namespace),
        namespace_selector=parse_label_selector(term.namespace_selector),
        selector=parse_label_selector(term_label_selector(term, pod.metadata.labels)),
        topology_key=term.topology_key,
    )


def _parse_list(pod: Pod, terms: list[PodAffinityTerm], errors: list[str]) -> list[AffinityTerm]:
    try:
        return [parse_term(pod, term) for term in terms]
    except SelectorError as exc:
        errors.append(str(exc))
        return []


def _parse_weighted(
    pod: Pod, terms: list[WeightedPodAffinityTerm], errors: list[str]
) -> list[WeightedAffinityTerm]:
    try:
        return [WeightedAffinityTerm(t.weight, parse_term(pod, t.pod_affinity_term)) for t in terms]
    except SelectorError as exc:
        errors.append(str(exc))
        return []


_PARSED_MAX = 1024
_parsed: dict[tuple[int, str, tuple[tuple[str, str], ...]], tuple[Affinity, PodAffinityTerms]] = {}
"""Recently parsed terms by (id of the affinity, namespace, labels); the affinity object is
kept with them, so its id cannot be reused while the entry lives. One cycle parses a pod's
terms up to three times (PreFilter, PreScore, the pod index) and a pod's copies (assumed,
bound) share its affinity object."""


def parse_pod_terms(pod: Pod) -> PodAffinityTerms:
    """The pod's terms (upstream NewPodInfo); `errors` lists the lists that failed to parse."""
    affinity = pod.spec.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return NO_TERMS
    meta = pod.metadata
    key = (id(affinity), meta.namespace, tuple(sorted(meta.labels.items())))
    known = _parsed.get(key)
    if known is not None and known[0] is affinity:
        return known[1]
    terms = _parse_pod_terms(pod, affinity)
    if len(_parsed) >= _PARSED_MAX:
        _parsed.clear()
    _parsed[key] = (affinity, terms)
    return terms


def _parse_pod_terms(pod: Pod, affinity: Affinity) -> PodAffinityTerms:
    errors: list[str] = []
    required: list[AffinityTerm] = []
    preferred: list[WeightedAffinityTerm] = []
    if affinity.pod_affinity is not None:
        spec = affinity.pod_affinity
        required = _parse_list(
            pod, spec.required_during_scheduling_ignored_during_execution, errors
        )
        preferred = _parse_weighted(
            pod, spec.preferred_during_scheduling_ignored_during_execution, errors
        )
    anti_required: list[AffinityTerm] = []
    anti_preferred: list[WeightedAffinityTerm] = []
    if affinity.pod_anti_affinity is not None:
        spec_anti = affinity.pod_anti_affinity
        anti_required = _parse_list(
            pod, spec_anti.required_during_scheduling_ignored_during_execution, errors
        )
        anti_preferred = _parse_weighted(
            pod, spec_anti.preferred_during_scheduling_ignored_during_execution, errors
        )
    return PodAffinityTerms(
        tuple(required),
        tuple(anti_required),
        tuple(preferred),
        tuple(anti_preferred),
        tuple(errors),
    )


def has_preferred_terms(pod: Pod) -> bool:
    """The incoming pod has preferred pod affinity or anti-affinity (upstream hasConstraints)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    pref = affinity.pod_affinity
    anti = affinity.pod_anti_affinity
    return bool(
        (pref is not None and pref.preferred_during_scheduling_ignored_during_execution)
        or (anti is not None and anti.preferred_during_scheduling_ignored_during_execution)
    )


__all__ = [
    "NO_TERMS",
    "AffinityTerm",
    "PodAffinityTerms",
    "SelectorError",
    "WeightedAffinityTerm",
    "has_preferred_terms",
    "parse_pod_terms",
    "parse_term",
]
