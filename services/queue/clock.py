"""Clocks: the queue reads time only through one, so tests drive it (no sleeps)."""

from __future__ import annotations

import time
from typing import Protocol

from services.queue.state import from_micros as from_micros
from services.queue.state import to_micros as to_micros


class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        self._now += seconds
        return self._now

    def set(self, now: float) -> None:
        self._now = now
