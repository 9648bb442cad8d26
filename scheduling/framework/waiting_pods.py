"""Pods held at Permit (upstream runtime/waiting_pods_map.go), for asyncio.

A Permit plugin that answers Wait(timeout) leaves the pod waiting until every waiting plugin
allows it, any plugin rejects it, or a plugin's timeout passes (a rejection naming that
plugin). The pod is therefore rejected at the shortest timeout unless the plugins that asked
for it allow it first. Allow/Reject never block; `wait()` is awaited by the binding cycle.

Deadlines are on a monotonic clock (injectable for tests); no timer exists outside `wait()`,
so RunPermit stays synchronous and needs no running event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

from scheduling.framework.status import SUCCESS, Status
from shared.models import Pod

MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0
"""Upstream maxTimeout: a Permit plugin may not hold a pod longer."""


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String() prints it: "5s", "1.5s", "10m0s", "100ms"."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size or unit == "ns":
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    secs = _trim(rest / 1e9)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


class WaitingPod:
    """One pod waiting at Permit: the plugins it still waits for, with their deadlines."""

    __slots__ = ("_clock", "_event", "_pending", "_result", "_timeouts", "pod")

    def __init__(
        self,
        pod: Pod,
        plugin_timeouts: dict[str, float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pod = pod
        self._clock = clock
        now = clock()
        self._timeouts = {
            name: min(timeout, MAX_PERMIT_TIMEOUT_SECONDS)
            for name, timeout in plugin_timeouts.items()
        }
        self._pending: dict[str, float] = {
            name: now + timeout for name, timeout in self._timeouts.items()
        }
        self._result: Status | None = None if self._pending else SUCCESS
        self._event: asyncio.Event | None = None

    @property
    def timeout(self) -> float:
        """The shortest timeout the Permit plugins asked for, in seconds."""
        return min(self._timeouts.values(), default=0.0)

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    @property
    def result(self) -> Status | None:
        """Success once allowed by all, the rejection once rejected, None while waiting."""
        return self._result

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go; it is released once no plugin is left to allow it."""
        self._pending.pop(plugin, None)
        if not self._pending:
            self._finish(SUCCESS)

    def reject(self, plugin: str, message: str) -> None:
        """The pod is unschedulable; `plugin` ("" when nobody in particular) is recorded."""
        self._finish(Status.unschedulable(message, plugin=plugin))

    def expire(self) -> bool:
        """Reject the pod if a plugin's deadline has passed; True if it did."""
        if self._result is not None:
            return False
        now = self._clock()
        for plugin, deadline in self._pending.items():
            if deadline <= now:
                self.time_out(plugin)
                return True
        return False

    def time_out(self, plugin: str | None = None) -> None:
        """Reject as if `plugin`'s timeout (default: the earliest pending one) had passed."""
        if self._result is not None or not self._pending:
            return
        if plugin is None:
            plugin = min(self._pending, key=self._pending.__getitem__)
        waited = go_duration(self._timeouts[plugin])
        self.reject(plugin, f"rejected due to timeout after waiting {waited} at plugin {plugin}")

    def _finish(self, status: Status) -> None:
        if self._result is not None:
            return
        self._result = status
        if self._event is not None:
            self._event.set()

    async def wait(self) -> Status:
        """Block until allowed, rejected or timed out."""
        if self._event is None:
            self._event = asyncio.Event()
            if self._result is not None:
                self._event.set()
        while self._result is None:
            remaining = min(self._pending.values()) - self._clock()
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._event.wait(), remaining)
            self.expire()
        return self._result


class WaitingPods:
    """uid -> WaitingPod, for the pods of one framework (upstream waitingPodsMap)."""

    __slots__ = ("_pods",)

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, waiting: WaitingPod) -> None:
        self._pods[waiting.pod.metadata.uid] = waiting

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)
