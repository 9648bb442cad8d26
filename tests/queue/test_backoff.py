"""SPEC A28-A30 and the worked example F12 (pure arithmetic)."""

from __future__ import annotations

import pytest

from services.queue.backoff import backoff_duration, backoff_expiry

S = 1_000_000  # microseconds


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        pytest.param(0, 1, id="0-attempts-initial"),
        pytest.param(1, 1, id="1"),
        pytest.param(2, 2, id="2"),
        pytest.param(3, 4, id="3"),
        pytest.param(4, 8, id="4"),
        pytest.param(5, 10, id="5-capped-from-16"),
        pytest.param(6, 10, id="6"),
        pytest.param(60, 10, id="60"),
    ],
)
def test_f12_backoff_table(attempts: int, seconds: int) -> None:
    assert backoff_duration(attempts, 1 * S, 10 * S) == seconds * S


@pytest.mark.parametrize(
    ("initial", "maximum"),
    [
        pytest.param(1, 10, id="defaults"),
        pytest.param(3, 100, id="odd"),
        pytest.param(7, 7, id="equal"),
        pytest.param(1, 2**62, id="huge-max-no-overflow"),
    ],
)
def test_a28_equals_min_of_doubling_and_max(initial: int, maximum: int) -> None:
    for attempts in range(0, 70):
        expected = min(initial * 2 ** max(attempts - 1, 0), maximum)
        assert backoff_duration(attempts, initial, maximum) == expected


def test_f12_requeued_at_t_with_three_attempts_expires_at_t_plus_4s() -> None:
    t = 1_700_000_000 * S
    assert backoff_expiry(t, 3, 1 * S, 10 * S) == t + 4 * S
