"""Exponential backoff with jitter, for loops that retry a remote call.

    backoff = Backoff(initial=0.5, maximum=30.0)
    while True:
        try:
            await call()
            backoff.reset()
        except SomeError as e:
            await backoff.wait(f"call failed: {e}")   # logs the reason and the delay

The delay doubles up to `maximum`; each wait is a uniform draw in [delay/2, delay], which
spreads the replicas that lost the same server so they do not come back in step, and never
retries at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class Backoff:
    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next_delay(self) -> float:
        """The delay before the next try (and count this failure)."""
        ceiling = min(self.maximum, self.initial * self.factor**self.attempts)
        self.attempts += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0

    async def wait(self, reason: str, logger: logging.Logger = log) -> float:
        delay = self.next_delay()
        logger.warning("%s; retrying in %.1fs (attempt %d)", reason, delay, self.attempts)
        await asyncio.sleep(delay)
        return delay
