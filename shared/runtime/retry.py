"""Retry loops: exponential backoff with jitter, and a logged reason for every pause.

Every loop of a service that talks to Redis or the broker retries through a `Retry`: a
failure is logged once per attempt with its reason (one line for an outage, the traceback
only for errors that are not an outage), the pause grows from `initial` to `maximum`, and
the first success after failures logs the recovery and resets the pause. Nothing spins:
the shortest pause is `initial`, and a loop that fails for ever ends up pausing `maximum`
between attempts.

    retry = Retry("queue: consuming outcomes", log)
    while not stop.is_set():
        try:
            ...
            retry.succeeded()
        except Exception as exc:
            await retry.pause(exc, stop)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


@cache
def outage_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean a server is away (down, restarting, unreachable), not a bug, for
    `except outage_errors() as exc:` (evaluated only when an exception is raised). Kafka's
    client is imported on the first call: a process that talks to Redis only (`berth get`)
    never loads it."""
    from aiokafka.errors import KafkaError

    return (
        RedisConnectionError,  # includes BusyLoadingError: a restarted Redis reading its AOF
        RedisTimeoutError,
        KafkaError,
        OSError,  # includes ConnectionError and TimeoutError
    )


def is_outage(exc: BaseException) -> bool:
    return isinstance(exc, outage_errors())


def is_redis_outage(exc: BaseException) -> bool:
    return isinstance(exc, RedisConnectionError | RedisTimeoutError)


def describe(exc: BaseException) -> str:
    """One line: the error's type and message (redis-py and aiokafka messages name the
    address they could not reach)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(slots=True)
class Backoff:
    """Pauses growing by `factor` from `initial` to `maximum`, each shortened by up to
    `jitter` of itself at random (replicas that failed together do not retry together)."""

    initial: float = 0.1
    maximum: float = 10.0
    factor: float = 2.0
    jitter: float = 0.2
    failures: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def next(self) -> float:
        """The pause after one more failure."""
        base = min(self.maximum, self.initial * self.factor**self.failures)
        self.failures += 1
        return base * (1.0 - self.jitter * self._rng.random())

    def reset(self) -> None:
        self.failures = 0


@dataclass(slots=True)
class Retry:
    """A retry loop's backoff and log lines (see the module docstring)."""

    what: str
    """What is being retried, for the log: "binder: following the change stream"."""
    log: logging.Logger
    backoff: Backoff = field(default_factory=Backoff)

    @property
    def failures(self) -> int:
        return self.backoff.failures

    def failed(self, exc: BaseException) -> float:
        """Log the failure and its reason; returns the pause before the next attempt."""
        pause = self.backoff.next()
        attempt = self.backoff.failures
        if is_outage(exc):
            self.log.warning(
                "%s failed (%s); retrying in %.1fs (attempt %d)",
                self.what,
                describe(exc),
                pause,
                attempt,
            )
        else:
            self.log.error(
                "%s failed; retrying in %.1fs (attempt %d)",
                self.what,
                pause,
                attempt,
                exc_info=exc,
            )
        return pause

    def succeeded(self) -> None:
        if self.backoff.failures:
            self.log.warning("%s works again after %d failures", self.what, self.failures)
            self.backoff.reset()

    async def pause(self, exc: BaseException, stop: asyncio.Event | None = None) -> None:
        """Log `exc`, then sleep the backoff (less when `stop` is set meanwhile)."""
        seconds = self.failed(exc)
        if stop is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


_T = TypeVar("_T")


async def until_answered(
    what: str,
    log: logging.Logger,
    attempt: Callable[[], Awaitable[_T]],
    stop: asyncio.Event | None = None,
) -> _T | None:
    """`attempt()`'s result, retried with backoff while it fails because a server is away
    (other errors are raised); None when `stop` is set first."""
    retry = Retry(what, log)
    while stop is None or not stop.is_set():
        try:
            result = await attempt()
        except outage_errors() as exc:
            await retry.pause(exc, stop)
            continue
        retry.succeeded()
        return result
    return None


class OutageGate:
    """One server's availability, shared by the many tasks that call it (the binder's
    proposals): the first call that meets an outage closes the gate and starts one probe
    (logged, growing pauses); every call waits at the gate until the probe is answered, then
    runs (again). One log line per probe, not one per waiting task."""

    def __init__(self, what: str, log: logging.Logger, probe: Callable[[], Awaitable[object]]):
        self._retry = Retry(what, log)
        self._probe = probe
        self._open = asyncio.Event()
        self._open.set()
        self._probing: asyncio.Task[None] | None = None

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def wait(self) -> None:
        """Until the server answers (at once while the gate is open)."""
        await self._open.wait()

    def trip(self, exc: BaseException) -> None:
        """A caller met an outage: close the gate until the probe is answered."""
        if self._probing is None or self._probing.done():
            self._open.clear()
            self._probing = asyncio.create_task(self._probe_until_answered(exc))

    async def call(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """`attempt()` once the gate is open, again after every outage it meets."""
        while True:
            await self._open.wait()
            try:
                return await attempt()
            except outage_errors() as exc:
                self.trip(exc)

    async def _probe_until_answered(self, exc: BaseException) -> None:
        while True:
            await self._retry.pause(exc)
            try:
                await self._probe()
            except outage_errors() as again:
                exc = again
                continue
            self._retry.succeeded()
            self._open.set()
            return

    async def close(self) -> None:
        if self._probing is not None and not self._probing.done():
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing
        self._open.set()
