"""The dashboard's HTTP side (aiohttp): the page, its static files and the JSON API, which is
also the stack's API front door when it has a tokens file (services/dashboard/auth.py).

    GET /                      the page (static/index.html, dashboard.js, dashboard.css)
    GET /api/clusterqueues     per ClusterQueue: quota, usage, borrowed, lent, share, pending
                               by reason (services.queue.quota.status); without ClusterQueues, the
                               tenant queues' counts ("tenants")
    GET /api/pods?q=&namespace=&limit=  pods, pending first, with their reason
                               (services.queue.pod_status); limit=0: all of them
    GET /api/stats             pods bound per second over the last 60 s, enqueue-to-bound
                               latency p50/p99 (shared.observability.stats, fed by feed.BindingFeed)
    GET /api/nodes             nodes with their usage (`berth get nodes`)
    GET /api/queues            tenant queue counts and worker heartbeats (`berth get queues`)
    GET /api/events?limit=     recent pod Events of the simulated cluster (services/agent);
                               ?pod=NS/NAME: that pod's Events and its end
    POST /api/apply            manifests (YAML or JSON) into the store, all or nothing
    DELETE /api/objects/{kind}/{name}?namespace=NS

Without a tokens file the API reads for anyone who can reach it (loopback by default) and
refuses writes (clients then write to Redis directly). With one, every /api request needs
`Authorization: Bearer TOKEN`: 401 for none or an unknown one, 403 (with the reason) for
anything outside the token's namespaces, or a cluster object without an admin token. The page
itself is static and asks for a token when the API answers 401.

In a cluster (Kubernetes mode) every /api request needs a token too: one of the tokens file,
or a Kubernetes user's, which the API server authenticates and RBAC limits
(services/dashboard/kube_auth.py); 503 when the API server cannot answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import web

from scheduling.kubelet import kubelet_refusal
from services.dashboard.auth import Identity, Tokens, namespace_refusal, refusal
from services.dashboard.data import MAX_PODS, DashboardData
from services.dashboard.events import MAX_EVENTS, pod_events, recent_events
from services.dashboard.feed import BindingFeed
from services.dashboard.kube_auth import KubeAuthenticator
from shared.kube.client import KubeApiError, KubeUnavailableError
from shared.models import ManifestError, load_manifest_text
from shared.models.schema import KIND_BY_CLASS, KIND_BY_NAME
from shared.store import StoreError
from shared.store.objects import apply_manifests, delete_object

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
DATA = web.AppKey("data", DashboardData)
FEED = web.AppKey("feed", BindingFeed)
TOKENS = web.AppKey("tokens", Tokens)
TENANT_NODE_NAME = web.AppKey("tenant_node_name", bool)
KUBE_AUTH = web.AppKey("kube_auth", KubeAuthenticator)
WHO = web.RequestKey("who", object)
NO_STORE = {"Cache-Control": "no-store"}
MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest manifest a POST /api/apply takes."""


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers=NO_STORE)


_ERRORS: dict[int, type[web.HTTPError]] = {
    400: web.HTTPBadRequest,
    401: web.HTTPUnauthorized,
    403: web.HTTPForbidden,
    409: web.HTTPConflict,
    422: web.HTTPUnprocessableEntity,
    503: web.HTTPServiceUnavailable,
}


def fail(status: int, message: str) -> NoReturn:
    """Stop the request with `status` and {"error": message}."""
    headers = dict(NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    raise _ERRORS[status](
        text=json.dumps({"error": message}), content_type="application/json", headers=headers
    )


# ------------------------------------------------------------------------ identity
def identity(request: web.Request) -> Identity | None:
    """The caller, as the `authenticate` middleware found it (None: an open API)."""
    who = request.get(WHO)
    return who if isinstance(who, Identity) else None


@web.middleware
async def authenticate(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every /api request: the caller from the tokens file, else (in a cluster) from the API
    server's TokenReview; 401 without a token or with an unknown one."""
    tokens, kube = request.app.get(TOKENS), request.app.get(KUBE_AUTH)
    if request.path.startswith("/api/") and (tokens is not None or kube is not None):
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            fail(401, "this API needs a token: send `Authorization: Bearer TOKEN`")
        found = tokens.identify(token) if tokens is not None else None
        if found is None and kube is not None:
            try:
                found = await kube.identify(token)
            except (KubeApiError, KubeUnavailableError) as exc:
                fail(503, f"the Kubernetes API server could not check the token: {exc}")
        if found is None:
            fail(401, "unknown token")
        request[WHO] = found
    return await handler(request)


def readable_namespaces(request: web.Request) -> list[str] | None:
    """The namespaces the caller may read, narrowed by ?namespace= (None: every one)."""
    who = identity(request)
    wanted = request.query.get("namespace", "")
    if who is not None and wanted and (why := namespace_refusal(who, wanted)):
        fail(403, why)
    if wanted:
        return [wanted]
    if who is None or who.admin:
        return None
    return sorted(who.namespaces)


def writer(request: web.Request) -> Identity:
    """The caller of a write; writes need a tokens file (else clients use Redis directly)."""
    who = identity(request)
    if who is None:
        fail(403, "this stack's API is read-only: it has no tokens file (berth up --tokens)")
    if request.app[DATA].settings.kube:
        fail(409, "this stack follows a Kubernetes API server, which owns the objects")
    return who


def admin_only(request: web.Request, what: str) -> None:
    who = identity(request)
    if who is not None and not who.admin:
        fail(403, f"{what} are cluster objects: only an admin token may read them")


# -------------------------------------------------------------------------- reads
async def index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers=NO_STORE)


async def cluster_queues(request: web.Request) -> web.Response:
    return _json(await request.app[DATA].cluster_queues(readable_namespaces(request)))


async def pods(request: web.Request) -> web.Response:
    namespaces = readable_namespaces(request)
    try:
        limit = int(request.query.get("limit", MAX_PODS))
    except ValueError:
        fail(400, "limit must be a number")
    query = request.query.get("q", "")
    return _json(await request.app[DATA].pods(query, namespaces, limit=limit))


async def stats(request: web.Request) -> web.Response:
    identity(request)
    now = time.time()
    body = request.app[FEED].log.stats(now).to_json()
    body["at"] = now
    return _json(body)


async def nodes(request: web.Request) -> web.Response:
    admin_only(request, "nodes")
    return _json({"nodes": await request.app[DATA].nodes()})


async def queues(request: web.Request) -> web.Response:
    who = identity(request)
    namespaces = readable_namespaces(request)
    workers = who is None or who.admin
    return _json(await request.app[DATA].queues(namespaces, workers=workers))


async def events(request: web.Request) -> web.Response:
    data = request.app[DATA]
    try:
        limit = int(request.query.get("limit", MAX_EVENTS))
    except ValueError:
        fail(400, "limit must be a number")
    limit = max(1, min(limit, MAX_EVENTS))
    namespaces = readable_namespaces(request)
    pod = request.query.get("pod", "")
    if pod:
        if namespaces is not None and pod.partition("/")[0] not in namespaces:
            fail(403, f"pod {pod}: namespace not readable with this token")
        return _json(await pod_events(data.store.redis, data.store.keys, pod))
    return _json(await recent_events(data.store.redis, data.store.keys, namespaces, limit))


# ------------------------------------------------------------------------- writes
async def apply(request: web.Request) -> web.Response:
    who = writer(request)
    text = await request.text()
    try:
        # In a thread: a large manifest must not hold up other tenants' requests.
        manifests = await asyncio.to_thread(load_manifest_text, text, source="request")
    except ManifestError as exc:
        fail(400, str(exc))
    refused = [
        why
        for obj in manifests.objects()
        if (
            why := refusal(
                who,
                KIND_BY_CLASS[type(obj)].kind,
                obj.metadata.namespace,
                obj.metadata.name,
                "change",
            )
        )
    ]
    if not who.admin and not request.app[TENANT_NODE_NAME]:
        refused += [
            f"{who.describe()} may not bind Pod {pod.key} to a node by name (spec.nodeName): "
            "placement is the scheduler's"
            for pod in manifests.pods
            if pod.spec.node_name
        ]
    if refused:
        fail(403, "; ".join(refused) + " (nothing was applied)")
    data = request.app[DATA]
    try:
        report = await apply_manifests(
            data.store, manifests, admission=True, node_check=kubelet_refusal
        )
    except (StoreError, ManifestError) as exc:
        fail(422, str(exc))
    data.invalidate()
    log.info("%s applied %d object(s)", who.describe(), len(report.lines))
    return _json({"lines": report.lines, "warnings": report.warnings})


async def delete(request: web.Request) -> web.Response:
    who = writer(request)
    kind, name = request.match_info["kind"], request.match_info["name"]
    info = KIND_BY_NAME.get(kind)
    if info is None:
        fail(400, f"unknown kind {kind!r}")
    namespace = request.query.get("namespace", "") if info.namespaced else ""
    if info.namespaced and not namespace:
        fail(400, f"{kind} is namespaced: give ?namespace=")
    if why := refusal(who, kind, namespace, name, "change"):
        fail(403, why)
    data = request.app[DATA]
    found = await delete_object(data.store, kind, namespace, name)
    data.invalidate()
    return _json({"deleted": found})


def make_app(
    data: DashboardData,
    feed: BindingFeed,
    tokens: Tokens | None = None,
    kube_auth: KubeAuthenticator | None = None,
    *,
    tenant_node_name: bool = False,
) -> web.Application:
    """`tenant_node_name`: tenant tokens may write pods bound by name (else admins only)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[authenticate])
    app[DATA] = data
    app[TENANT_NODE_NAME] = tenant_node_name
    app[FEED] = feed
    if tokens is not None:
        app[TOKENS] = tokens
    if kube_auth is not None:
        app[KUBE_AUTH] = kube_auth
    app.router.add_get("/", index)
    app.router.add_get("/api/clusterqueues", cluster_queues)
    app.router.add_get("/api/pods", pods)
    app.router.add_get("/api/stats", stats)
    app.router.add_get("/api/nodes", nodes)
    app.router.add_get("/api/queues", queues)
    app.router.add_get("/api/events", events)
    app.router.add_post("/api/apply", apply)
    app.router.add_delete("/api/objects/{kind}/{name}", delete)
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
