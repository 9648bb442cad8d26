"""The dashboard's HTTP side (aiohttp): the page, its static files and the JSON API.

GET /                      the page (static/index.html, dashboard.js, dashboard.css)
GET /api/clusterqueues     per ClusterQueue: quota, usage, borrowed, lent, share, pending
                           by reason (shared.quota_status); without ClusterQueues, the
                           tenant queues' counts ("tenants")
GET /api/pods?q=&namespace=  pods, pending first, with their reason (shared.pod_status)
GET /api/stats             pods bound per second over the last 60 s, enqueue-to-bound
                           latency p50/p99 (shared.stats, fed by feed.BindingFeed)
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from services.dashboard.data import DashboardData
from services.dashboard.feed import BindingFeed

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
DATA = web.AppKey("data", DashboardData)
FEED = web.AppKey("feed", BindingFeed)
NO_STORE = {"Cache-Control": "no-store"}


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers=NO_STORE)


async def index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers=NO_STORE)


async def cluster_queues(request: web.Request) -> web.Response:
    return _json(await request.app[DATA].cluster_queues())


async def pods(request: web.Request) -> web.Response:
    query = request.query.get("q", "")
    namespace = request.query.get("namespace", "")
    namespaces = [namespace] if namespace else None
    return _json(await request.app[DATA].pods(query, namespaces))


async def stats(request: web.Request) -> web.Response:
    now = time.time()
    body = request.app[FEED].log.stats(now).to_json()
    body["at"] = now
    return _json(body)


def make_app(data: DashboardData, feed: BindingFeed) -> web.Application:
    app = web.Application()
    app[DATA] = data
    app[FEED] = feed
    app.router.add_get("/", index)
    app.router.add_get("/api/clusterqueues", cluster_queues)
    app.router.add_get("/api/pods", pods)
    app.router.add_get("/api/stats", stats)
    app.router.add_static("/static/", STATIC)
    return app


class DashboardServer:
    """The app on a TCP site; `url` once started."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0 and self._runner.addresses:
            self.port = int(self._runner.addresses[0][1])
        log.info("dashboard: %s", self.url)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
