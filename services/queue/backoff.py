"""Pod backoff (SPEC A28-A30), the same arithmetic as the Lua scripts use."""

from __future__ import annotations


def backoff_duration(attempts: int, initial: int, maximum: int) -> int:
    """min(initial * 2^(attempts-1), maximum); attempts <= 1 gives `initial`.

    Doubling with the `d > max - d` test, as upstream does to avoid overflow. Units are the
    caller's (the queue uses microseconds).
    """
    duration = initial
    for _ in range(1, attempts):
        if duration > maximum - duration:
            return maximum
        duration += duration
    return duration


def backoff_expiry(timestamp: int, attempts: int, initial: int, maximum: int) -> int:
    """Timestamp + backoff duration: the pod is backing off while this is after now."""
    return timestamp + backoff_duration(attempts, initial, maximum)
