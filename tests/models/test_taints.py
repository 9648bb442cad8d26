"""Toleration.tolerates, ported from upstream core/v1 TestTolerationToleratesTaint."""

import pytest

from shared.models import Taint, Toleration, tolerates_taint


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        pytest.param(
            Toleration(key="foo", operator="Exists", effect="NoSchedule"),
            Taint(key="foo", effect="NoSchedule"),
            True,
            id="exists-same-key-effect-taint-without-value",
        ),
        pytest.param(
            Toleration(key="foo", operator="Exists", effect="NoSchedule"),
            Taint(key="foo", value="bar", effect="NoSchedule"),
            True,
            id="exists-ignores-value",
        ),
        pytest.param(
            Toleration(key="foo", operator="Equal", value="bar", effect="NoSchedule"),
            Taint(key="foo", value="bar", effect="NoSchedule"),
            True,
            id="equal-same-value",
        ),
        pytest.param(
            Toleration(key="foo", operator="Equal", value="value1", effect="NoSchedule"),
            Taint(key="foo", value="value2", effect="NoSchedule"),
            False,
            id="equal-different-value",
        ),
        pytest.param(
            Toleration(key="foo", operator="", value="bar", effect="NoSchedule"),
            Taint(key="foo", value="bar", effect="NoSchedule"),
            True,
            id="empty-operator-means-equal",
        ),
        pytest.param(
            Toleration(key="foo", value="bar", effect="NoSchedule"),
            Taint(key="foo", value="bar", effect="NoSchedule"),
            True,
            id="default-operator-is-equal",
        ),
        pytest.param(
            Toleration(key="foo", operator="Equal", value="bar", effect="NoExecute"),
            Taint(key="foo", value="bar", effect="NoSchedule"),
            False,
            id="different-effect",
        ),
        pytest.param(
            Toleration(key="foo", operator="Exists"),
            Taint(key="foo", value="bar", effect="PreferNoSchedule"),
            True,
            id="empty-effect-matches-all-effects",
        ),
        pytest.param(
            Toleration(operator="Exists"),
            Taint(key="anything", value="v", effect="NoExecute"),
            True,
            id="empty-key-exists-matches-everything",
        ),
        pytest.param(
            Toleration(operator="Exists", effect="NoSchedule"),
            Taint(key="anything", effect="NoExecute"),
            False,
            id="empty-key-exists-still-checks-effect",
        ),
        pytest.param(
            Toleration(key="foo", operator="Exists", effect="NoSchedule"),
            Taint(key="bar", effect="NoSchedule"),
            False,
            id="different-key",
        ),
        pytest.param(
            Toleration(key="foo", operator="Gt", value="1"),
            Taint(key="foo", value="2", effect="NoSchedule"),
            False,
            id="unknown-operator",
        ),
    ],
)
def test_tolerates(toleration, taint, expected):
    assert toleration.tolerates(taint) is expected


def test_tolerates_taint_any():
    taint = Taint(key="k", value="v", effect="NoSchedule")
    assert tolerates_taint(
        [Toleration(key="x", operator="Exists"), Toleration(key="k", value="v")], taint
    )
    assert not tolerates_taint([Toleration(key="x", operator="Exists")], taint)
    assert not tolerates_taint([], taint)
