"""Restarting the launcher's local Redis and broker when they die (`berth up`, and the
stacks of cli/supervisor.py).

A dead server is started again at once on the same port with the same command line (Redis:
the same 0600 config file, so the same data directory, whose AOF it reloads before it
answers). A server that dies again before it has run `STABLE_SECONDS` waits a growing pause
(`shared.runtime.retry.Backoff`, up to `MAX_PAUSE_SECONDS`) before its next start, and every death
and every failed start is logged with its exit status and the last line of its output.

`poll()` never waits for a server: it starts what is due and reports what happened since
the last poll: a server died (before it is started again), a server answers again. The
supervisor (cli/supervisor.py) decides what that means for the services.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Literal

from cli.servers import DevServers, LocalServer
from shared.runtime.retry import Backoff

log = logging.getLogger(__name__)

STABLE_SECONDS = 30.0
"""A server that ran this long before it died is restarted at once (its backoff resets)."""
MAX_PAUSE_SECONDS = 30.0


def last_line(server: LocalServer) -> str:
    lines = server.process.log_tail(500).strip().splitlines()
    return lines[-1] if lines else "(no output)"


@dataclass(frozen=True, slots=True)
class ServerEvent:
    what: Literal["died", "back"]
    """"died": noticed dead (it is started again at once or after its backoff); "back": it
    was started again and answers."""
    server: LocalServer


@dataclass(slots=True, eq=False)
class _Watched:
    server: LocalServer
    backoff: Backoff = field(
        default_factory=lambda: Backoff(initial=0.5, maximum=MAX_PAUSE_SECONDS)
    )
    started_at: float = field(default_factory=time.monotonic)
    due: float | None = None
    """When the dead server is started again (None: it runs, or is starting)."""
    starting_since: float | None = None
    """Started again, not answering yet."""
    slow_reported: bool = False
    quick_deaths: int = 0
    """Deaths in a row, each before the server had run STABLE_SECONDS."""


class ServerWatch:
    """Restarts `servers`' local processes (see the module docstring)."""

    def __init__(self, servers: DevServers) -> None:
        self.servers = servers
        self._watched = [_Watched(server) for server in servers.local]
        self.restarts: dict[str, int] = {server.name: 0 for server in servers.local}
        """Server name -> how many times it was restarted and answered again."""

    def poll(self, now: float | None = None) -> list[ServerEvent]:
        """Start the dead servers that are due; what happened since the last poll."""
        now = time.monotonic() if now is None else now
        events: list[ServerEvent] = []
        for watched in self._watched:
            self._step(watched, now, events)
        return events

    def _step(self, watched: _Watched, now: float, events: list[ServerEvent]) -> None:
        server, process = watched.server, watched.server.process
        if watched.starting_since is not None:
            if process.alive():
                if not server.probe():
                    if now - watched.starting_since > server.timeout and not watched.slow_reported:
                        watched.slow_reported = True
                        log.warning(
                            "%s restarted %.0fs ago and does not answer yet (loading its "
                            "data?): %s",
                            server.name,
                            now - watched.starting_since,
                            last_line(server),
                        )
                    return
                watched.starting_since = None
                self.restarts[server.name] += 1
                log.warning("%s answers again (pid %s)", server.name, process.pid)
                events.append(ServerEvent("back", server))
                return
            watched.starting_since = None
            pause = watched.backoff.next()
            watched.due = now + pause
            log.warning(
                "%s failed to restart (exit %s: %s); next attempt in %.1fs",
                server.name,
                process.returncode,
                last_line(server),
                pause,
            )
            return
        if process.alive():
            return
        if watched.due is None:
            events.append(ServerEvent("died", server))
            if now - watched.started_at >= STABLE_SECONDS:
                watched.backoff.reset()
                watched.quick_deaths = 0
            # The first death restarts at once (the services are waiting); a server that
            # keeps dying waits longer each time.
            pause = watched.backoff.next() if watched.quick_deaths else 0.0
            watched.quick_deaths += 1
            watched.due = now + pause
            log.warning(
                "%s exited (%s: %s); restarting it on the same port%s",
                server.name,
                process.returncode,
                last_line(server),
                f" in {pause:.1f}s" if pause else "",
            )
        if now < watched.due:
            return
        watched.due = None
        watched.started_at = watched.starting_since = now
        watched.slow_reported = False
        try:
            server.respawn()
        except OSError as exc:  # the binary vanished, say: try again later
            watched.starting_since = None
            watched.due = now + watched.backoff.next()
            log.warning("%s could not be started: %s", server.name, exc)
