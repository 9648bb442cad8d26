"""`/metrics`, `/healthz` (alias `/livez`) and `/readyz` over HTTP, from the service's loop.

    health = HealthServer.from_env(os.environ)     # BERTH_METRICS_PORT; disabled when unset
    await health.start()
    ...                                             # connect, join the consumer group
    health.set_ready(True)                          # now /readyz answers 200
    ...
    health.set_ready(False, "draining")             # on SIGTERM, before the drain
    await health.stop()

The server (aiohttp) runs in the service's own event loop on purpose: a wedged loop stops
answering /healthz, and the liveness probe restarts the pod. Readiness starts false
("starting"); liveness starts true. `set_live(False, reason)` makes the liveness probe fail on a
state the process cannot leave by itself.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated

from aiohttp import web
from msgspec import Meta
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from shared.runtime.env import ENV_METRICS_HOST, ENV_METRICS_PORT
from shared.runtime.settings import SettingsError, read, setting

log = logging.getLogger(__name__)

ENV_PORT = ENV_METRICS_PORT
"""Port of the /metrics, /healthz, /readyz server (0: any free port). Unset: no server, so
several services on one machine (`berth up`) never collide."""
ENV_HOST = ENV_METRICS_HOST
"""Address to listen on (default: every interface)."""

STOP_SECONDS = 0.5
"""How long stop() lets a request in progress finish (a silent client does not hold it)."""


class HealthConfigError(ValueError):
    """BERTH_METRICS_PORT / BERTH_METRICS_HOST is not valid."""


DEFAULT_HOST = "127.0.0.1"
"""Where the endpoint listens when $BERTH_METRICS_HOST is unset."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """Where a service serves /metrics, /healthz and /readyz (shared.runtime.settings reads
    them)."""

    port: Annotated[
        Annotated[int, Meta(ge=0, le=65535)] | None,
        setting(ENV_PORT, "port of /metrics, /healthz and /readyz (0: any free port; unset: off)"),
    ] = None
    host: Annotated[
        str, setting(ENV_HOST, "the address that server listens on (the chart: the pod's IP)")
    ] = DEFAULT_HOST


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
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._ready = False
        self._ready_reason = "starting"
        self._live = True
        self._live_reason = ""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, registry: CollectorRegistry = REGISTRY
    ) -> HealthServer:
        try:
            settings = read(MetricsSettings, env)
        except SettingsError as exc:
            raise HealthConfigError(str(exc)) from None
        # Loopback unless told (the chart tells the pod's IP): /metrics must not answer on
        # every interface of a node by default.
        return cls(port=settings.port, host=settings.host, registry=registry)

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
        if self._runner is not None and self._runner.addresses:
            return int(self._runner.addresses[0][1])
        if self._port is None:
            raise HealthConfigError("the health server is disabled")
        return self._port

    async def start(self) -> None:
        if self._port is None or self._runner is not None:
            return
        app = web.Application()
        for path, handler in (
            ("/metrics", self._metrics),
            ("/healthz", self._healthz),
            ("/livez", self._healthz),
            ("/readyz", self._readyz),
        ):
            app.router.add_get(path, handler)  # HEAD too; other methods: 405
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=STOP_SECONDS
        )
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, host=self.host, port=self._port)
        await self._site.start()
        log.info("health: serving /metrics, /healthz, /readyz on port %d", self.port)

    async def stop(self) -> None:
        if self._runner is None:
            return
        runner, self._runner, self._site = self._runner, None, None
        await runner.cleanup()

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
    async def _readyz(self, _request: web.Request) -> web.Response:
        if self._ready:
            return web.Response(text="ok\n")
        return web.Response(status=503, text=f"not ready: {self._ready_reason}\n")

    async def _healthz(self, _request: web.Request) -> web.Response:
        if self._live:
            return web.Response(text="ok\n")
        return web.Response(status=500, text=f"not live: {self._live_reason}\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        headers = {"Content-Type": content_type}
        if gzip_accepted(request.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body, 1)
            headers["Content-Encoding"] = "gzip"
        return web.Response(body=body, headers=headers)
