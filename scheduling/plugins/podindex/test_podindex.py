"""PodIndex and the parsed selectors/terms it is built on."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.plugins.podindex import (
    EVERYTHING,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    LabelQuery,
    PodIndex,
    PodQuery,
    SelectorError,
    StaticClusterObjects,
    cluster_objects_of,
    domain_sums,
    namespace_labels,
    parse_label_selector,
    parse_pod_terms,
)
from shared.models import LabelSelector, LabelSelectorRequirement, Pod, PodAffinityTerm
from tests.builders import label_selector, make_namespace, make_node, make_pod


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        pytest.param(None, {"a": "1"}, False, id="nil-matches-nothing"),
        pytest.param(LabelSelector(), {}, True, id="empty-matches-everything"),
        pytest.param(label_selector({"a": "1"}), {"a": "1", "b": "2"}, True, id="match-labels"),
        pytest.param(label_selector({"a": "1"}), {"a": "2"}, False, id="match-labels-value"),
        pytest.param(label_selector({}, ("a", "In", ["1", "2"])), {"a": "2"}, True, id="in"),
        pytest.param(label_selector({}, ("a", "NotIn", ["1"])), {}, True, id="notin-absent-key"),
        pytest.param(label_selector({}, ("a", "Exists", [])), {"a": ""}, True, id="exists"),
        pytest.param(label_selector({}, ("a", "DoesNotExist", [])), {"a": ""}, False, id="dne"),
        pytest.param(
            label_selector({"a": "1"}, ("a", "In", ["2"])), {"a": "1"}, False, id="contradiction"
        ),
    ],
)
def test_parse_label_selector(
    selector: LabelSelector | None, labels: dict[str, str], want: bool
) -> None:
    query = parse_label_selector(selector)
    assert (query is not None and query.matches(labels)) == want


@pytest.mark.parametrize(
    "requirement",
    [
        pytest.param(
            LabelSelectorRequirement(key="a", operator="In", values=[]), id="in-no-values"
        ),
        pytest.param(
            LabelSelectorRequirement(key="a", operator="Exists", values=["x"]), id="exists-values"
        ),
        pytest.param(LabelSelectorRequirement(key="a", operator="Gt", values=["1"]), id="gt"),
        pytest.param(LabelSelectorRequirement(key="a b", operator="Exists"), id="bad-key"),
        pytest.param(
            LabelSelectorRequirement(key="a", operator="In", values=["{{x}}"]), id="bad-value"
        ),
    ],
)
def test_invalid_selectors(requirement: LabelSelectorRequirement) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(LabelSelector(match_expressions=[requirement]))


def test_canonical_queries_are_equal_and_hashable() -> None:
    a = parse_label_selector(label_selector({"x": "1"}, ("y", "In", ["b", "a"])))
    b = parse_label_selector(label_selector({}, ("y", "In", ["a", "b", "a"]), ("x", "In", ["1"])))
    assert a == b
    assert hash(a) == hash(b)
    assert parse_label_selector(LabelSelector()) == EVERYTHING


def test_parse_pod_terms_defaults_and_label_keys() -> None:
    pod = (
        make_pod("p")
        .namespace("ns")
        .labels(app="web", rev="7")
        .pod_affinity("zone", label_selector({"app": "web"}))
        .pod_affinity("zone", label_selector({}), namespaces=["other"], anti=True)
        .pod_affinity("zone", None, weight=3, namespace_selector=LabelSelector())
        .obj()
    )
    assert pod.spec.affinity is not None
    assert pod.spec.affinity.pod_affinity is not None
    required = pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    required[0].match_label_keys = ["rev", "absent"]
    required[0].mismatch_label_keys = ["app"]
    terms = parse_pod_terms(pod)
    affinity = terms.required_affinity[0]
    assert affinity.namespaces == frozenset({"ns"})
    assert affinity.selector is not None
    assert {(r.key, r.operator, r.values) for r in affinity.selector.requirements} == {
        ("app", "In", ("web",)),
        ("rev", "In", ("7",)),
        ("app", "NotIn", ("web",)),
    }
    anti = terms.required_anti_affinity[0]
    assert anti.namespaces == frozenset({"other"})
    assert anti.namespace_selector is None
    preferred = terms.preferred_affinity[0]
    assert preferred.weight == 3
    assert preferred.term.selector is None
    assert preferred.term.namespace_matches("anything", {})


def test_invalid_term_drops_its_list() -> None:
    bad = PodAffinityTerm(label_selector=label_selector({}, ("a", "In", [])), topology_key="zone")
    pod = make_pod("p").pod_affinity("zone", label_selector({"a": "1"})).obj()
    assert pod.spec.affinity is not None
    assert pod.spec.affinity.pod_affinity is not None
    pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.append(bad)
    terms = parse_pod_terms(pod)
    assert terms.required_affinity == ()
    assert len(terms.errors) == 1


def _brute_counts(nodes: NodeColumns, query: PodQuery, skip_terminating: bool) -> list[int]:
    out = []
    for pods in nodes.pods_by_node:
        n = 0
        for p in pods:
            if skip_terminating and p.metadata.deletion_timestamp is not None:
                continue
            if query.matches(p.metadata.namespace, p.metadata.labels):
                n += 1
        out.append(n)
    return out


def test_row_counts_follow_random_binds_and_removals() -> None:
    rng = random.Random(7)
    names = [f"n{i}" for i in range(12)]
    nodes = NodeColumns(
        [make_node(n).label("zone", f"z{i % 3}").obj() for i, n in enumerate(names)]
    )
    queries = [
        PodQuery(frozenset({"default"}), LabelQuery()),
        PodQuery(frozenset({"default"}), parse_label_selector(label_selector({"app": "a"}))),
        PodQuery(None, parse_label_selector(label_selector({}, ("app", "In", ["a", "b"])))),
        PodQuery(
            frozenset({"other"}), parse_label_selector(label_selector({}, ("app", "Exists", [])))
        ),
    ]
    index = PodIndex.of(nodes)
    bound: list[Pod] = []
    for step in range(400):
        if bound and rng.random() < 0.35:
            nodes.remove_pod(bound.pop(rng.randrange(len(bound))))
        else:
            builder = (
                make_pod(f"p{step}")
                .namespace(rng.choice(["default", "other"]))
                .labels(app=rng.choice(["a", "b", "c"]))
                .node(rng.choice(names))
            )
            if rng.random() < 0.2:
                builder.terminating()
            if rng.random() < 0.3:
                builder.pod_affinity("zone", label_selector({"app": "a"}), anti=True)
            pod = builder.obj()
            nodes.add_pod(pod)
            bound.append(pod)
        if step == 200:
            nodes.add_node(make_node("late").label("zone", "z9").obj())  # rows rebuilt
            names.append("late")
        if step % 10 == 0:
            for query in queries:
                for skip in (False, True):
                    got = index.row_counts(nodes, (query,), skip_terminating=skip)
                    assert got.tolist() == _brute_counts(nodes, query, skip)
    assert PodIndex.of(nodes) is index
    assert len(index) == sum(len(p) for p in nodes.pods_by_node)
    with_terms = sum(1 for p in bound if p.spec.affinity is not None)
    assert index.kind_entries[REQUIRED_ANTI_AFFINITY] == with_terms


def test_term_hits() -> None:
    nodes = NodeColumns(
        [make_node("a").label("zone", "z1").obj(), make_node("b").label("zone", "z2").obj()]
    )
    nodes.add_pod(
        make_pod("e1")
        .node("a")
        .pod_affinity("zone", label_selector({"app": "web"}), anti=True)
        .pod_affinity("zone", label_selector({"app": "web"}), anti=True, weight=7)
        .obj()
    )
    nodes.add_pod(make_pod("e2").node("b").pod_affinity("zone", label_selector({"app": "x"})).obj())
    index = PodIndex.of(nodes)
    web = make_pod("in").labels(app="web").obj()
    hits = index.term_hits(nodes, web, {}, (REQUIRED_ANTI_AFFINITY, PREFERRED_ANTI_AFFINITY))
    assert set(hits) == {"zone"}
    assert sorted(hits["zone"].kinds.tolist()) == [REQUIRED_ANTI_AFFINITY, PREFERRED_ANTI_AFFINITY]
    assert sorted(hits["zone"].weights.tolist()) == [0, 7]
    assert index.term_hits(nodes, web, {}, (REQUIRED_AFFINITY,)) == {}


def test_domain_sums_leaves_missing_slot_zero() -> None:
    nodes = NodeColumns(
        [
            make_node("a").label("zone", "z1").obj(),
            make_node("b").obj(),
            make_node("c").label("zone", "z1").obj(),
        ]
    )
    sums = domain_sums(nodes, "zone", np.array([2, 5, 1], dtype=np.int64))
    assert sums.tolist() == [3, 0]
    assert sums[nodes.label("zone").codes].tolist() == [3, 0, 3]


def test_cluster_objects() -> None:
    objects = StaticClusterObjects(namespace_list=[make_namespace("ns", {"team": "a"})])
    assert namespace_labels(objects, "ns") == {"team": "a"}
    assert namespace_labels(objects, "missing") == {}

    class Handle:
        cluster_objects = objects

    assert cluster_objects_of(Handle()) is objects
    assert list(cluster_objects_of(object()).namespaces()) == []


def test_shallow_copy_gets_its_own_index() -> None:
    nodes = NodeColumns([make_node("a").obj()], [make_pod("e").labels(app="x").node("a").obj()])
    index = PodIndex.of(nodes)
    copy_ = copy.copy(nodes)
    copy_.pods_by_node = [[]]  # the copy's pods differ (a scratch without the pod)
    other = PodIndex.of(copy_)
    assert other is not index
    query = (PodQuery(None, EVERYTHING),)
    assert other.row_counts(copy_, query, skip_terminating=False).tolist() == [0]
    assert index.row_counts(nodes, query, skip_terminating=False).tolist() == [1]
    assert nodes.pod_listeners.count(index) == 1
