"""Whether a pod (anti-)affinity term matches a pod: the one plain definition.

Upstream pkg/scheduler/framework/types.go AffinityTerm.Matches, over a term as the scheduler
sees it (GetAffinityTerms / getNamespacesFromPodAffinityTerm):

- the pod's namespace is in the term's namespaces, or the namespace's labels match the
  namespaceSelector; an empty `namespaces` with a nil namespaceSelector means the owner pod's
  own namespace; a nil namespaceSelector matches no namespace, an empty one every namespace;
- and the pod's labels match the labelSelector: nil matches nothing, empty matches everything;
- matchLabelKeys / mismatchLabelKeys add ``key In (owner's value)`` / ``key NotIn (owner's
  value)`` to a non-nil labelSelector for the keys the owner pod carries. Upstream the
  kube-apiserver does this when the pod is created (applyMatchLabelKeysAndMismatchLabelKeys),
  so the scheduler sees the merged selector; berth has no such admission step and merges here.

The queue's wake-up check and the placement audit use these functions. The scheduler's
InterPodAffinity plugin matches a parsed form of the same terms, built once per pod for
speed (scheduling/plugins/podindex/terms.py); test_terms_agree.py there checks that it agrees
with this definition.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.models.pod import Pod, PodAffinityTerm
from shared.models.selectors import LabelSelector, LabelSelectorRequirement, selector_matches


def required_terms(pod: Pod, *, anti: bool = False) -> list[PodAffinityTerm]:
    """The pod's required affinity terms (anti: its required anti-affinity terms)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return []
    part = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    if part is None:
        return []
    return list(part.required_during_scheduling_ignored_during_execution)


ANY_NAMESPACE = "*"


def anti_affinity_scopes(pod: Pod) -> tuple[str, ...]:
    """The namespaces whose pods the pod's required anti-affinity terms can match, sorted
    (ANY_NAMESPACE for a term with a namespaceSelector: it may match any); () without such
    terms. While the pod is reserved or bound, placements of pods in these namespaces depend
    on where it is (upstream's existing-pods anti-affinity check); other pods' do not."""
    scopes: set[str] = set()
    for term in required_terms(pod, anti=True):
        if term.namespace_selector is not None:
            return (ANY_NAMESPACE,)
        scopes |= term_namespaces(term, pod.metadata.namespace)
    return tuple(sorted(scopes))


def term_namespaces(term: PodAffinityTerm, owner_namespace: str) -> frozenset[str]:
    """Upstream getNamespacesFromPodAffinityTerm: the listed namespaces; none listed and a nil
    namespaceSelector mean the owner pod's own namespace."""
    if not term.namespaces and term.namespace_selector is None:
        return frozenset((owner_namespace,))
    return frozenset(term.namespaces)


def term_label_selector(
    term: PodAffinityTerm, owner_labels: Mapping[str, str]
) -> LabelSelector | None:
    """The labelSelector with matchLabelKeys and mismatchLabelKeys applied for the owner's
    labels (a nil selector stays nil: it matches nothing either way)."""
    selector = term.label_selector
    if selector is None or not (term.match_label_keys or term.mismatch_label_keys):
        return selector
    extra = [
        LabelSelectorRequirement(key=key, operator="In", values=[owner_labels[key]])
        for key in term.match_label_keys
        if key in owner_labels
    ] + [
        LabelSelectorRequirement(key=key, operator="NotIn", values=[owner_labels[key]])
        for key in term.mismatch_label_keys
        if key in owner_labels
    ]
    if not extra:
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*selector.match_expressions, *extra],
    )


def term_namespace_matches(
    term: PodAffinityTerm,
    owner_namespace: str,
    namespace: str,
    namespace_labels: Mapping[str, str],
) -> bool:
    """The namespace half of AffinityTerm.Matches."""
    return namespace in term_namespaces(term, owner_namespace) or selector_matches(
        term.namespace_selector, namespace_labels
    )


def affinity_term_matches(
    term: PodAffinityTerm,
    owner: Pod,
    namespace: str,
    labels: Mapping[str, str],
    namespace_labels: Mapping[str, str],
) -> bool:
    """Upstream AffinityTerm.Matches: does `owner`'s term match a pod in `namespace` with
    `labels`? `namespace_labels` are that namespace's labels ({} when it does not exist)."""
    if not term_namespace_matches(term, owner.metadata.namespace, namespace, namespace_labels):
        return False
    return selector_matches(term_label_selector(term, owner.metadata.labels), labels)
