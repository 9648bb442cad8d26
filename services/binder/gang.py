"""WaitOnPermit for coscheduling gangs whose members may wait in several binders.

The gang's state lives in the store (check-and-reserve counts members and permits the gang;
`Bindings.gang_reject` ends a generation). Each binder polls the state of the gangs it has
waiting members of, in one round trip per interval, and wakes those members.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Literal

from shared.runtime.retry import Retry
from shared.runtime.tasks import finish
from shared.store import Bindings

log = logging.getLogger(__name__)

Verdict = Literal["permit", "rejected", "timeout"]


@dataclass(slots=True)
class _Watch:
    generation: int
    state: str
    waiters: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def update(self, generation: int, state: str) -> None:
        if (generation, state) == (self.generation, self.state) or generation < self.generation:
            return
        self.generation, self.state = generation, state
        self.changed.set()
        self.changed = asyncio.Event()


class GangMonitor:
    def __init__(self, bindings: Bindings, poll_seconds: float) -> None:
        self._bindings = bindings
        self._poll_seconds = poll_seconds
        self._watches: dict[str, _Watch] = {}
        self._poller: asyncio.Task[None] | None = None
        self._closed = False

    def note(self, gang: str, generation: int, state: str) -> None:
        """What this binder learnt itself (a reservation that permitted the gang)."""
        watch = self._watches.get(gang)
        if watch is not None:
            watch.update(generation, state)

    async def wait(self, gang: str, generation: int, deadline: float) -> Verdict:
        """Until `generation` of `gang` is permitted ("permit"), is over without us
        ("rejected"), or the loop time reaches `deadline` ("timeout")."""
        loop = asyncio.get_running_loop()
        watch = self._watches.get(gang)
        if watch is None:
            watch = self._watches[gang] = _Watch(generation, "w")
        watch.waiters += 1
        self._ensure_poller()
        try:
            while True:
                if watch.generation > generation:
                    return "rejected"
                if watch.generation == generation and watch.state == "p":
                    return "permit"
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return "timeout"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watch.changed.wait(), remaining)
        finally:
            watch.waiters -= 1
            if watch.waiters == 0 and self._watches.get(gang) is watch:
                del self._watches[gang]

    def _ensure_poller(self) -> None:
        if self._closed:
            return
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll(), name="binder-gang-poller")

    async def _poll(self) -> None:
        retry = Retry("binder: reading gang states", log)
        while self._watches and not self._closed:
            gangs = list(self._watches)
            pause = self._poll_seconds
            try:
                states = await self._bindings.gang_states(gangs)
            except Exception as exc:  # noqa: BLE001 (Retry logs it)
                # A Redis hiccup: waiters keep their deadlines, try again.
                pause = max(pause, retry.failed(exc))
            else:
                retry.succeeded()
                for gang, (generation, state) in zip(gangs, states, strict=True):
                    watch = self._watches.get(gang)
                    if watch is not None:
                        watch.update(generation, state)
            await asyncio.sleep(pause)

    async def close(self) -> None:
        self._closed = True
        if self._poller is not None:
            await finish(self._poller, self._poll_seconds + 2.0)
