"""Label and node selector semantics (upstream labels.Requirement and nodeaffinity tests)."""

import pytest

from shared.models import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    selector_matches,
)


def req(key: str, op: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key=key, operator=op, values=list(values))


def nreq(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=op, values=list(values))


LABELS = {"app": "web", "tier": "front", "gen": "3"}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param(LabelSelector(), {}, True, id="empty-selector-matches-empty-labels"),
        pytest.param(LabelSelector(), LABELS, True, id="empty-selector-matches-everything"),
        pytest.param(LabelSelector(match_labels={"app": "web"}), LABELS, True, id="match-labels"),
        pytest.param(
            LabelSelector(match_labels={"app": "web", "tier": "back"}),
            LABELS,
            False,
            id="match-labels-all-must-match",
        ),
        pytest.param(LabelSelector(match_labels={"x": ""}), LABELS, False, id="absent-key"),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "In", "web", "api")]), LABELS, True, id="in"
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "In", "api")]), LABELS, False, id="in-miss"
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("zone", "In", "a")]),
            LABELS,
            False,
            id="in-absent-key",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "NotIn", "api")]),
            LABELS,
            True,
            id="notin",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "NotIn", "web")]),
            LABELS,
            False,
            id="notin-hit",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("zone", "NotIn", "a")]),
            LABELS,
            True,
            id="notin-absent-key-matches",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "Exists")]), LABELS, True, id="exists"
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("zone", "Exists")]),
            LABELS,
            False,
            id="exists-absent",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("zone", "DoesNotExist")]),
            LABELS,
            True,
            id="does-not-exist",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "DoesNotExist")]),
            LABELS,
            False,
            id="does-not-exist-present",
        ),
        pytest.param(
            LabelSelector(
                match_labels={"app": "web"}, match_expressions=[req("tier", "In", "back")]
            ),
            LABELS,
            False,
            id="labels-and-expressions-anded",
        ),
        pytest.param(
            LabelSelector(match_expressions=[req("app", "Bogus", "web")]),
            LABELS,
            False,
            id="unknown-operator-never-matches",
        ),
    ],
)
def test_label_selector_matches(selector, labels, expected):
    assert selector.matches(labels) is expected
    assert selector_matches(selector, labels) is expected


def test_nil_label_selector_matches_nothing():
    assert selector_matches(None, LABELS) is False
    assert selector_matches(None, {}) is False


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        pytest.param(nreq("gen", "Gt", "2"), True, id="gt"),
        pytest.param(nreq("gen", "Gt", "3"), False, id="gt-equal"),
        pytest.param(nreq("gen", "Lt", "4"), True, id="lt"),
        pytest.param(nreq("gen", "Lt", "3"), False, id="lt-equal"),
        pytest.param(nreq("gen", "Gt", "-1"), True, id="gt-negative"),
        pytest.param(nreq("app", "Gt", "1"), False, id="gt-non-integer-label"),
        pytest.param(nreq("gen", "Gt", "x"), False, id="gt-non-integer-value"),
        pytest.param(nreq("gen", "Gt", "1", "2"), False, id="gt-two-values"),
        pytest.param(nreq("missing", "Lt", "10"), False, id="lt-absent-key"),
        pytest.param(nreq("gen", "In", "3"), True, id="in"),
        pytest.param(nreq("gen", "NotIn", "3"), False, id="notin"),
        pytest.param(nreq("gen", "Exists"), True, id="exists"),
        pytest.param(nreq("gen", "DoesNotExist"), False, id="does-not-exist"),
    ],
)
def test_node_selector_requirement(requirement, expected):
    assert requirement.matches(LABELS) is expected


def test_gt_uses_integer_not_string_order():
    assert nreq("cores", "Gt", "9").matches({"cores": "10"}) is True
    assert nreq("cores", "Lt", "9").matches({"cores": "10"}) is False


@pytest.mark.parametrize(
    ("term", "node_name", "expected"),
    [
        pytest.param(NodeSelectorTerm(), "n1", False, id="empty-term-matches-nothing"),
        pytest.param(
            NodeSelectorTerm(match_expressions=[nreq("app", "In", "web"), nreq("gen", "Gt", "1")]),
            "n1",
            True,
            id="expressions-anded-all-true",
        ),
        pytest.param(
            NodeSelectorTerm(match_expressions=[nreq("app", "In", "web"), nreq("gen", "Gt", "5")]),
            "n1",
            False,
            id="expressions-anded-one-false",
        ),
        pytest.param(
            NodeSelectorTerm(match_fields=[nreq("metadata.name", "In", "n1")]),
            "n1",
            True,
            id="match-fields-name-in",
        ),
        pytest.param(
            NodeSelectorTerm(match_fields=[nreq("metadata.name", "In", "n1")]),
            "n2",
            False,
            id="match-fields-name-in-miss",
        ),
        pytest.param(
            NodeSelectorTerm(match_fields=[nreq("metadata.name", "NotIn", "n1")]),
            "n2",
            True,
            id="match-fields-name-notin",
        ),
        pytest.param(
            NodeSelectorTerm(
                match_expressions=[nreq("app", "In", "web")],
                match_fields=[nreq("metadata.name", "In", "n2")],
            ),
            "n1",
            False,
            id="fields-and-expressions-anded",
        ),
        pytest.param(
            NodeSelectorTerm(match_fields=[nreq("metadata.uid", "In", "n1")]),
            "n1",
            False,
            id="unsupported-field-never-matches",
        ),
    ],
)
def test_node_selector_term(term, node_name, expected):
    assert term.matches(LABELS, node_name) is expected


def test_node_selector_terms_ored():
    miss = NodeSelectorTerm(match_expressions=[nreq("app", "In", "api")])
    hit = NodeSelectorTerm(match_expressions=[nreq("tier", "In", "front")])
    assert NodeSelector(node_selector_terms=[miss, hit]).matches(LABELS, "n1") is True
    assert NodeSelector(node_selector_terms=[miss]).matches(LABELS, "n1") is False
    assert NodeSelector(node_selector_terms=[]).matches(LABELS, "n1") is False
    assert NodeSelector(node_selector_terms=[NodeSelectorTerm(), hit]).matches(LABELS) is True
