"""The dashboard in a cluster: Kubernetes users authenticated by the API server
(TokenReview) and limited by RBAC (SubjectAccessReview), beside the standalone tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from services.adapter.sink import StoreSink
from services.dashboard.app import DashboardServer, make_app
from services.dashboard.auth import Tokens
from services.dashboard.data import DashboardData
from services.dashboard.feed import BindingFeed
from services.dashboard.kube_auth import KubeAuthenticator
from shared.kube.client import DASHBOARD_CALLS, KubeApi, load_config
from shared.messaging.kafka import Topics
from shared.runtime.env import StackSettings
from tests.kube.conftest import ApiServer
from tests.kube.test_adapter import node, pod

ALICE = "alice-kube-token-0123"
ROOT = "root-kube-token-012345"
FILE_TOKEN = "standalone-admin-token-0123"


@pytest.fixture
async def dashboard(
    api_server: ApiServer, redis_client: aioredis.Redis, redis_prefix: str, tmp_path: Path
) -> AsyncIterator[tuple[str, KubeAuthenticator]]:
    emu = api_server.emulator
    emu.users[ALICE] = {"username": "alice", "uid": "a1", "groups": ["system:authenticated"]}
    emu.users[ROOT] = {"username": "root", "uid": "r1", "groups": ["system:masters"]}
    emu.grants |= {
        ("alice", "list", "pods", "team-a"),
        ("root", "list", "pods", ""),
        ("root", "list", "nodes", ""),
    }
    settings = StackSettings("redis://unused", "unused:0", store_prefix=redis_prefix, kube="k")
    data = DashboardData(redis_client, settings, refresh_seconds=0.0)
    sink = StoreSink(data.store, {"default-scheduler"})
    for namespace in ("team-a", "team-b"):
        served = emu.upsert(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        await sink.put("Namespace", served)
        await sink.put("Pod", emu.upsert(pod(f"{namespace}-pod", namespace=namespace)))
    await sink.put("Node", emu.upsert(node("n1")))
    (tmp_path / "tokens.yaml").write_text(f"{FILE_TOKEN}: {{admin: true}}\n")
    api = KubeApi(load_config(str(api_server.kubeconfig)))

    async def namespaces() -> list[str]:
        return sorted(o.metadata.name for o in await data.store.list("Namespace"))

    kube_auth = KubeAuthenticator(api, namespaces)
    feed = BindingFeed("unused:0", Topics())
    server = DashboardServer(
        make_app(data, feed, Tokens(tmp_path / "tokens.yaml"), kube_auth), "127.0.0.1", 0
    )
    await server.start()
    try:
        yield server.url.rstrip("/"), kube_auth
    finally:
        await server.stop()
        await api.close()


async def get(url: str, path: str, token: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url + path, headers=headers) as r:
        return r.status, await r.json()


async def test_rbac_decides_which_namespaces_a_kubernetes_user_sees(
    dashboard: tuple[str, KubeAuthenticator], api_server: ApiServer
) -> None:
    url, kube_auth = dashboard
    # Nobody reads without a token any more: the cluster's pods are not open to the network.
    status, body = await get(url, "/api/pods", None)
    assert status == 401
    assert await get(url, "/api/pods", "not-a-known-token-000") == (401, {"error": "unknown token"})
    # alice may list pods in team-a only: she sees team-a's, and is refused team-b and nodes.
    status, body = await get(url, "/api/pods", ALICE)
    assert status == 200
    assert {p["name"] for p in body["pods"]} == {"team-a-pod"}
    status, body = await get(url, "/api/pods?namespace=team-b", ALICE)
    assert status == 403
    assert (await get(url, "/api/nodes", ALICE))[0] == 403
    # root may list pods and nodes cluster-wide.
    status, body = await get(url, "/api/pods", ROOT)
    assert {p["name"] for p in body["pods"]} == {"team-a-pod", "team-b-pod"}
    assert (await get(url, "/api/nodes", ROOT))[0] == 200
    # The tokens file still works beside the cluster's users, without asking the API server.
    reviews = kube_auth.reviews
    status, body = await get(url, "/api/pods", FILE_TOKEN)
    assert status == 200
    assert len(body["pods"]) == 2
    assert kube_auth.reviews == reviews
    # Answers are cached: polling the page costs no more reviews.
    await get(url, "/api/pods", ALICE)
    assert kube_auth.reviews == reviews
    assert {c for c in api_server.emulator.calls if c[0].endswith("k8s.io")} == DASHBOARD_CALLS


async def test_an_unreachable_api_server_is_a_503_not_an_open_door(
    dashboard: tuple[str, KubeAuthenticator], api_server: ApiServer
) -> None:
    url, _kube_auth = dashboard
    api_server.emulator.fail_next("POST", "tokenreviews", 500)
    status, body = await get(url, "/api/pods", "some-other-kube-token-01")
    assert status == 503
    assert "could not check the token" in body["error"]
