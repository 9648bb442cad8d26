"""shared.observability.stats.BindingLog: pods bound per second over the window, and
enqueue-to-bound latency percentiles over the pods whose enqueue was seen, whatever order the feeds
arrive in."""

from __future__ import annotations

import pytest

from shared.observability.stats import BindingLog, percentile


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        pytest.param([], 50, 0.0, id="empty"),
        pytest.param([3.0, 1.0, 2.0], 50, 2.0, id="median"),
        pytest.param([float(i) for i in range(1, 101)], 99, 99.0, id="p99 of 100: nearest rank"),
        pytest.param([5.0], 99, 5.0, id="one value"),
    ],
)
def test_percentile(values: list[float], q: float, want: float) -> None:
    assert percentile(values, q) == want


def test_rate_and_latency_over_the_window() -> None:
    log = BindingLog(since=0.0, window=60.0)
    for i in range(100):
        log.enqueued(f"u{i}", 1000.0 + i)
    # 90 bound inside the window, each 0.5 s after its enqueue; 10 bound long before it.
    for i in range(10):
        log.bound(f"u{i}", 1000.0 + i + 0.5)
    for i in range(10, 100):
        log.bound(f"u{i}", 1000.0 + i + 0.5)
    stats = log.stats(now=1150.0)
    # The window is [1090, 1150]: bound at 1090.5 .. 1099.5 -> u90 .. u99.
    assert stats.bound == 10
    assert stats.pods_per_second == pytest.approx(10 / 60)
    assert stats.latency_p50_ms == pytest.approx(500.0)
    assert stats.latency_samples == 10


def test_outcome_before_its_schedule_request_still_counts() -> None:
    log = BindingLog(since=0.0)
    log.bound("late", 100.0)
    log.enqueued("late", 99.0)
    log.enqueued("late", 99.5)  # a later dispatch carries the same first-enqueue time
    stats = log.stats(now=101.0)
    assert stats.latency_p99_ms == pytest.approx(1000.0)


def test_unknown_enqueue_counts_in_the_rate_not_the_latency() -> None:
    log = BindingLog(since=95.0)
    log.bound("a", 100.0)
    log.bound("b", 100.0)
    log.enqueued("b", 99.0)
    stats = log.stats(now=105.0)
    assert (stats.bound, stats.latency_samples) == (2, 1)
    # The log is 10 s old: the rate is over 10 s, not the whole window.
    assert stats.pods_per_second == pytest.approx(0.2)
    assert stats.to_json()["windowSeconds"] == 10.0


def test_nothing_bound() -> None:
    stats = BindingLog(since=0.0).stats(now=100.0)
    assert stats.to_json() == {
        "windowSeconds": 60.0,
        "bound": 0,
        "podsPerSecond": 0.0,
        "latencySamples": 0,
        "latencyP50Ms": None,
        "latencyP99Ms": None,
    }


def test_old_enqueue_times_are_forgotten() -> None:
    log = BindingLog(since=0.0, horizon=100.0)
    log.enqueued("old", 1.0)
    log.enqueued("new", 150.0)
    log.prune(now=200.0)
    log.bound("old", 200.0)
    log.bound("new", 200.0)
    assert log.stats(now=200.0).latency_samples == 1
