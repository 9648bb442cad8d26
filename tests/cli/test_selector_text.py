"""`berth get -l`: kubectl's label selector text."""

from __future__ import annotations

import pytest

from shared.models.selector_text import SelectorSyntaxError, parse_selector

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),  # != also matches pods without the key, as kubectl's
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("env in (prod, staging)", True),
        ("env notin (prod)", False),
        ("app, !spot", True),
        ("!app", False),
        ("env in (dev),app=web", False),
    ],
)
def test_selectors(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize("text", ["app=web=1", "env in (a,,b)", "=web", "app in prod", "a b"])
def test_malformed_selectors_are_refused(text: str) -> None:
    with pytest.raises(SelectorSyntaxError):
        parse_selector(text)
