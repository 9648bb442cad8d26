"""`/metrics`, `/healthz` (alias `/livez`) and `/readyz` over HTTP, from the service's loop.

    health = HealthServer.from_env(os.environ)     # BERTH_METRICS_PORT; disabled when unset
    await health.start()
    ...                                             # connect, join the consumer group
    health.set_ready(True)                          # now /readyz answers 200
    ...
    health.set_ready(False, "draining")             # on SIGTERM, before the drain
    await health.stop()

The server runs in the service's own event loop (asyncio streams, no extra dependency) on
purpose: a wedged loop stops answering /healthz, and the liveness probe restarts the pod.
Readiness starts false ("starting"); liveness starts true. `set_live(False, reason)` makes the
liveness probe fail on a state the process cannot leave by itself.

Every response closes its connection (probes and scrapes open one per request anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from shared.env import ENV_METRICS_HOST, ENV_METRICS_PORT

log = logging.getLogger(__name__)

ENV_PORT = ENV_METRICS_PORT
"""Port of the /metrics, /healthz, /readyz server (0: any free port). Unset: no server, so
several services on one machine (`berth up`) never collide."""
ENV_HOST = ENV_METRICS_HOST
"""Address to listen on (default: every interface)."""

READ_TIMEOUT_SECONDS = 5.0
MAX_HEADER_LINES = 100
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HealthConfigError(ValueError):
    """BERTH_METRICS_PORT / BERTH_METRICS_HOST is not valid."""


@dataclass(frozen=True, slots=True)
class _Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


DEFAULT_HOST = "127.0.0.1"
"""Where the endpoint listens when $BERTH_METRICS_HOST is unset."""


class HealthServer:
    """One service's probe and scrape endpoint. `port=None`: disabled (start/stop do
    nothing, set_ready still records the state)."""

    def __init__(
        self,
        *,
        port: int | None = 0,
        host: str | None = None,
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.host = host
        self.registry = registry
        self._port = port
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ready = False
        self._ready_reason = "starting"
        self._live = True
        self._live_reason = ""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, registry: CollectorRegistry = REGISTRY
    ) -> HealthServer:
        raw = env.get(ENV_PORT, "").strip()
        port: int | None = None
        if raw:
            try:
                port = int(raw)
            except ValueError:
                raise HealthConfigError(f"{ENV_PORT}={raw!r}: not a port number") from None
            if not 0 <= port <= 65535:
                raise HealthConfigError(f"{ENV_PORT}={raw!r}: not a port number")
        # Loopback unless told (the chart tells the pod's IP): /metrics must not answer on
        # every interface of a node by default.
        host = env.get(ENV_HOST, "").strip() or DEFAULT_HOST
        return cls(port=port, host=host, registry=registry)

    # ----------------------------------------------------------------------- state
    @property
    def enabled(self) -> bool:
        return self._port is not None

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def live(self) -> bool:
        return self._live

    def set_ready(self, ready: bool, reason: str = "") -> None:
        """/readyz answers 200 when ready, else 503 with `reason`."""
        self._ready = ready
        self._ready_reason = "" if ready else (reason or "not ready")

    def set_live(self, live: bool, reason: str = "") -> None:
        """/healthz answers 200 when live, else 500 with `reason` (the pod is restarted)."""
        self._live = live
        self._live_reason = "" if live else (reason or "not live")

    # ------------------------------------------------------------------- lifecycle
    @property
    def port(self) -> int:
        """The port listened on (the chosen one when started with port 0)."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        if self._port is None:
            raise HealthConfigError("the health server is disabled")
        return self._port

    async def start(self) -> None:
        if self._port is None or self._server is not None:
            return
        self._server = await asyncio.start_server(self._handle, host=self.host, port=self._port)
        log.info("health: serving /metrics, /healthz, /readyz on port %d", self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        # A client that connected and says nothing must not hold the stop for the read timeout
        # (from 3.12 wait_closed also waits for open connections).
        for handler in list(self._handlers):
            handler.cancel()
        await server.wait_closed()

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --------------------------------------------------------------------- serving
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            try:
                method, path, headers = await asyncio.wait_for(
                    _read_request(reader), READ_TIMEOUT_SECONDS
                )
            except TimeoutError:
                response = _Response(408, b"request timeout\n")
                method = "GET"
            except (_BadRequestError, ValueError) as err:  # ValueError: a line over 64 KiB
                response = _Response(400, f"bad request: {err}\n".encode())
                method = "GET"
            else:
                response = self._respond(method, path, headers)
            writer.write(_encode(response, head_only=method == "HEAD"))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _respond(self, method: str, path: str, headers: Mapping[str, str]) -> _Response:
        if path not in ("/metrics", "/healthz", "/livez", "/readyz"):
            return _Response(404, b"not found\n")
        if method not in ("GET", "HEAD"):
            return _Response(405, b"method not allowed\n", headers=(("Allow", "GET, HEAD"),))
        if path == "/readyz":
            if self._ready:
                return _Response(200, b"ok\n")
            return _Response(503, f"not ready: {self._ready_reason}\n".encode())
        if path in ("/healthz", "/livez"):
            if self._live:
                return _Response(200, b"ok\n")
            return _Response(500, f"not live: {self._live_reason}\n".encode())
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(self.registry)
        if gzip_accepted(headers.get("accept-encoding", "")):
            return _Response(
                200, gzip.compress(body, 1), content_type, (("Content-Encoding", "gzip"),)
            )
        return _Response(200, body, content_type)


class _BadRequestError(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]]:
    line = await reader.readline()
    if not line:
        raise asyncio.IncompleteReadError(b"", None)
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequestError("malformed request line")
    method, target, _ = parts
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise _BadRequestError("malformed header line")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _BadRequestError("too many header lines")
    return method.upper(), target.split("?", 1)[0], headers


def _encode(response: _Response, *, head_only: bool) -> bytes:
    reason = _REASONS.get(response.status, "")
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in response.headers),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body
