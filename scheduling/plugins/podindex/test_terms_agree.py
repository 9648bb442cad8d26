"""The parsed affinity terms (podindex AffinityTerm, InterPodAffinity's namespace-merged form
and the PodIndex query built from it) agree with the one plain definition,
shared.models.affinity_term_matches (upstream AffinityTerm.Matches): a table of the upstream
rules, then many seeded random terms, owners, pods and namespaces."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

import pytest

from scheduling.plugins.interpodaffinity.filtering import merge_namespaces, pod_query
from scheduling.plugins.podindex import StaticClusterObjects, parse_term
from shared.models import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
    affinity_term_matches,
)
from tests.builders import label_selector, make_namespace, make_pod

NAMESPACE_LABELS: dict[str, dict[str, str]] = {
    "a": {"team": "x"},
    "b": {"team": "y", "env": "prod"},
    "c": {},
}
UNKNOWN_NAMESPACE = "gone"
"""A namespace without a Namespace object: its labels read as {}."""
KEYS = ("app", "tier", "v")
VALUES = ("1", "2")

Matcher = Callable[[PodAffinityTerm, Pod, str, Mapping[str, str]], bool]


def shared_matches(term: PodAffinityTerm, owner: Pod, ns: str, labels: Mapping[str, str]) -> bool:
    return affinity_term_matches(term, owner, ns, labels, NAMESPACE_LABELS.get(ns, {}))


def parsed_matches(term: PodAffinityTerm, owner: Pod, ns: str, labels: Mapping[str, str]) -> bool:
    return parse_term(owner, term).matches(ns, labels, NAMESPACE_LABELS.get(ns, {}))


OBJECTS = StaticClusterObjects([make_namespace(ns, lb) for ns, lb in NAMESPACE_LABELS.items()])


def merged_matches(term: PodAffinityTerm, owner: Pod, ns: str, labels: Mapping[str, str]) -> bool:
    """InterPodAffinity's form for the incoming pod's terms: the namespaceSelector unrolled
    into namespaces over the existing Namespaces, then matched without namespace labels."""
    return merge_namespaces(parse_term(owner, term), OBJECTS).matches(ns, labels, {})


def query_matches(term: PodAffinityTerm, owner: Pod, ns: str, labels: Mapping[str, str]) -> bool:
    """The merged term as the PodIndex query that counts matching bound pods."""
    return pod_query(merge_namespaces(parse_term(owner, term), OBJECTS)).matches(ns, labels)


MATCHERS = [
    pytest.param(shared_matches, id="shared"),
    pytest.param(parsed_matches, id="podindex"),
    pytest.param(merged_matches, id="interpodaffinity-merged"),
    pytest.param(query_matches, id="podindex-query"),
]
MERGED = (merged_matches, query_matches)

OWNER = make_pod("owner").namespace("a").label("app", "1").label("tier", "2").obj()
APP_1 = label_selector({"app": "1"})


def term(
    selector: LabelSelector | None = APP_1,
    namespaces: list[str] | None = None,
    namespace_selector: LabelSelector | None = None,
    match: list[str] | None = None,
    mismatch: list[str] | None = None,
) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=selector,
        namespaces=namespaces or [],
        topology_key="zone",
        namespace_selector=namespace_selector,
        match_label_keys=match or [],
        mismatch_label_keys=mismatch or [],
    )


TABLE = [
    pytest.param(term(), "a", {"app": "1"}, True, id="own-namespace-by-default"),
    pytest.param(term(), "b", {"app": "1"}, False, id="other-namespace-not-by-default"),
    pytest.param(
        term(namespace_selector=LabelSelector()), "b", {"app": "1"}, True, id="empty-ns-selector"
    ),
    pytest.param(
        term(namespace_selector=LabelSelector()),
        UNKNOWN_NAMESPACE,
        {"app": "1"},
        True,
        id="empty-ns-selector-unknown-namespace",
    ),
    pytest.param(term(namespaces=["b"]), "a", {"app": "1"}, False, id="list-excludes-owner"),
    pytest.param(term(namespaces=["b"]), "b", {"app": "1"}, True, id="listed"),
    pytest.param(
        term(namespaces=["b"], namespace_selector=label_selector({"team": "x"})),
        "a",
        {"app": "1"},
        True,
        id="list-or-selector",
    ),
    pytest.param(
        term(namespace_selector=label_selector({"team": "y"})),
        "a",
        {"app": "1"},
        False,
        id="selector-alone-excludes-owner",
    ),
    pytest.param(term(selector=None), "a", {"app": "1"}, False, id="nil-selector-nothing"),
    pytest.param(term(selector=LabelSelector()), "a", {}, True, id="empty-selector-everything"),
    pytest.param(term(match=["tier"]), "a", {"app": "1", "tier": "2"}, True, id="match-key"),
    pytest.param(term(match=["tier"]), "a", {"app": "1", "tier": "3"}, False, id="match-key-diff"),
    pytest.param(term(match=["v"]), "a", {"app": "1"}, True, id="match-key-owner-lacks"),
    pytest.param(term(mismatch=["tier"]), "a", {"app": "1", "tier": "2"}, False, id="mismatch"),
    pytest.param(term(mismatch=["tier"]), "a", {"app": "1"}, True, id="mismatch-absent"),
    pytest.param(
        term(selector=None, match=["app"]), "a", {"app": "1"}, False, id="keys-keep-nil-nothing"
    ),
]


@pytest.mark.parametrize("matches", MATCHERS)
@pytest.mark.parametrize(("the_term", "namespace", "labels", "want"), TABLE)
def test_upstream_rules(
    matches: Matcher,
    the_term: PodAffinityTerm,
    namespace: str,
    labels: dict[str, str],
    want: bool,
) -> None:
    if matches in MERGED and namespace == UNKNOWN_NAMESPACE:
        pytest.skip("the merged form lists existing namespaces only, as upstream's")
    assert matches(the_term, OWNER, namespace, labels) is want


def _labels(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(VALUES) for key in KEYS if rng.random() < 0.7}


def _selector(rng: random.Random, keys: tuple[str, ...]) -> LabelSelector | None:
    """nil, empty, or random matchLabels and matchExpressions (valid ones: what the API
    admits; the parsed form rejects the others)."""
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.3:
        return LabelSelector()
    match_labels = {key: rng.choice(VALUES) for key in keys if rng.random() < 0.2}
    expressions = []
    for _ in range(rng.randint(0, 1)):
        operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        values = (
            rng.sample(VALUES, rng.randint(1, len(VALUES))) if operator in ("In", "NotIn") else []
        )
        expressions.append(
            LabelSelectorRequirement(key=rng.choice(keys), operator=operator, values=values)
        )
    return LabelSelector(match_labels=match_labels, match_expressions=expressions)


def _random_term(rng: random.Random) -> PodAffinityTerm:
    return term(
        selector=_selector(rng, KEYS),
        namespaces=rng.sample(sorted(NAMESPACE_LABELS), rng.randint(0, 2))
        if rng.random() < 0.5
        else [],
        namespace_selector=_selector(rng, ("team", "env")),
        match=rng.sample(KEYS, rng.randint(0, 2)),
        mismatch=rng.sample(KEYS, rng.randint(0, 1)),
    )


def test_random_terms_agree() -> None:
    rng = random.Random(20240611)
    namespaces = [*NAMESPACE_LABELS, UNKNOWN_NAMESPACE]
    outcomes = {True: 0, False: 0}
    for _ in range(4000):
        the_term = _random_term(rng)
        owner = make_pod("owner").namespace(rng.choice(namespaces)).obj()
        owner.metadata.labels.update(_labels(rng))
        namespace = rng.choice(namespaces)
        labels = _labels(rng)
        want = shared_matches(the_term, owner, namespace, labels)
        outcomes[want] += 1
        case = (the_term, owner.metadata.namespace, owner.metadata.labels, namespace, labels)
        assert parsed_matches(the_term, owner, namespace, labels) is want, case
        if namespace != UNKNOWN_NAMESPACE:
            assert merged_matches(the_term, owner, namespace, labels) is want, case
            assert query_matches(the_term, owner, namespace, labels) is want, case
    # Both answers are well represented, or the comparison says little.
    assert min(outcomes.values()) > 400, outcomes
