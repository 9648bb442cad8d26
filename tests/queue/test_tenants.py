"""Weighted round-robin across tenants."""

from __future__ import annotations

from collections import Counter

import pytest

from services.queue.tenants import WeightedRoundRobin

WEIGHTS = {"a": 3, "b": 1, "c": 2}
WRR = WeightedRoundRobin(lambda t: WEIGHTS.get(t, 1))


def test_smooth_order_spreads_the_heavy_tenant() -> None:
    assert WRR.order(["a", "b"], 4) == ["a", "a", "b", "a"]


@pytest.mark.parametrize(
    ("tenants", "picks"),
    [
        pytest.param(["a", "b"], 40, id="3:1"),
        pytest.param(["a", "b", "c"], 60, id="3:1:2"),
    ],
)
def test_order_shares_follow_weights(tenants: list[str], picks: int) -> None:
    counts = Counter(WRR.order(tenants, picks))
    total = sum(WEIGHTS[t] for t in tenants)
    assert counts == {t: picks * WEIGHTS[t] // total for t in tenants}


def test_interleave_keeps_every_item_and_each_tenants_order() -> None:
    queues = {"a": ["a1", "a2", "a3", "a4", "a5"], "b": ["b1", "b2"], "empty": []}
    out = WRR.interleave(queues)
    assert sorted(item for _, item in out) == sorted(queues["a"] + queues["b"])
    assert [i for t, i in out if t == "a"] == queues["a"]
    assert [i for t, i in out if t == "b"] == queues["b"]
    # While both have items, b gets one turn in four.
    assert [t for t, _ in out[:4]] == ["a", "a", "b", "a"]
