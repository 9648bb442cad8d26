"""Tenant isolation through the API front door: a real stack whose dashboard has a tokens file,
driven by `berth apply/get/delete` with tokens (the commands run in a thread: each runs its own
event loop) and by plain HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from cli.run import pipeline
from cli.servers import DevServers
from cli.stack_commands import apply_main, delete_main, describe_main, get_main
from shared.runtime.env import ENV_API_URL, ENV_STATE, ENV_TOKEN, ENV_TOKENS_FILE

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEAM_A = "team-a-token-0123456789"
TEAM_B = "team-b-token-0123456789"
ADMIN = "admin-token-0123456789ab"
TOKENS = f"""
{TEAM_A}: {{tenant: team-a, namespaces: [team-a]}}
{TEAM_B}: {{tenant: team-b, namespaces: [team-b]}}
{ADMIN}: {{admin: true}}
"""
NODE = """apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {capacity: {cpu: "8", memory: 16Gi, pods: "110"}}
"""


def pod(namespace: str, name: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: 100m}}}}}}]
"""


@dataclass
class Door:
    url: str
    files: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def door(
    dev_servers: DevServers, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Door]:
    files = tmp_path_factory.mktemp("front-door")
    (files / "tokens.yaml").write_text(TOKENS)
    for name, text in {
        "node.yaml": NODE,
        "a.yaml": pod("team-a", "a-1"),
        "b.yaml": pod("team-b", "b-1"),
        "a-into-b.yaml": pod("team-a", "a-2") + pod("team-b", "sneaky"),
    }.items():
        (files / name).write_text(text)
    async with pipeline(
        servers=dev_servers,
        ordered=False,
        single_tenant=None,
        dashboard=True,
        extra_env={ENV_TOKENS_FILE: str(files / "tokens.yaml")},
    ) as run:
        yield Door(run.stack.dashboard_url, files)


@pytest.fixture
def berth(
    door: Door, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Any]:
    """berth(main, args, token) -> (exit code, stdout, stderr), through the front door."""
    monkeypatch.setenv(ENV_API_URL, door.url)
    monkeypatch.setenv(ENV_STATE, str(door.files / "no-state.json"))
    monkeypatch.delenv(ENV_TOKEN, raising=False)

    async def run(
        main: Callable[[Sequence[str]], int], args: list[str], token: str | None
    ) -> tuple[int, str, str]:
        argv = [*args, "--token", token] if token else args
        code = await asyncio.to_thread(main, argv)
        out, err = capsys.readouterr()
        return code, out, err

    return run


async def pods_seen(berth: Callable[..., Any], token: str) -> set[str]:
    code, out, err = await berth(get_main, ["pods", "-o", "json"], token)
    assert code == 0, err
    return {f"{p['namespace']}/{p['name']}" for p in json.loads(out)["pods"]}


async def test_tenants_touch_only_their_own_namespaces(door: Door, berth: Any) -> None:
    f = door.files
    assert await berth(apply_main, ["-f", str(f / "node.yaml")], ADMIN) == (
        0,
        "node/node-0 created\n",
        "",
    )
    assert (await berth(apply_main, ["-f", str(f / "a.yaml")], TEAM_A))[:2] == (
        0,
        "pod/team-a/a-1 created\n",
    )
    assert (await berth(apply_main, ["-f", str(f / "b.yaml")], TEAM_B))[0] == 0

    # Another tenant's namespace: refused whole, with the reason.
    code, out, err = await berth(apply_main, ["-f", str(f / "a-into-b.yaml")], TEAM_A)
    assert (code, out) == (1, "")
    assert "403: tenant team-a may not change Pod team-b/sneaky" in err
    assert "nothing was applied" in err
    # A cluster object needs an admin.
    code, _, err = await berth(apply_main, ["-f", str(f / "node.yaml")], TEAM_A)
    assert code == 1
    assert "Node node-0 is a cluster object: only an admin token may change it" in err

    # Reads: each tenant sees its own pods, the admin all of them.
    assert await pods_seen(berth, TEAM_A) == {"team-a/a-1"}
    assert await pods_seen(berth, TEAM_B) == {"team-b/b-1"}
    assert await pods_seen(berth, ADMIN) == {"team-a/a-1", "team-b/b-1"}
    code, _, err = await berth(get_main, ["nodes"], TEAM_A)
    assert (code, "403: nodes are cluster objects" in err) == (1, True)
    assert (await berth(get_main, ["nodes", "-o", "json"], ADMIN))[0] == 0
    code, out, _ = await berth(get_main, ["queues", "-o", "json"], TEAM_A)
    assert code == 0
    assert set(json.loads(out)["tenants"]) <= {"team-a"}
    assert json.loads(out)["workers"] == {}

    # Deletes: not another tenant's pod; the admin may.
    code, _, err = await berth(delete_main, ["pod", "b-1", "-n", "team-b"], TEAM_A)
    assert code == 1
    assert "403: tenant team-a may not change Pod team-b/b-1" in err
    assert "team-b/b-1" in await pods_seen(berth, ADMIN)
    assert (await berth(delete_main, ["pod", "b-1", "-n", "team-b"], ADMIN))[:2] == (
        0,
        "pod/team-b/b-1 deleted\n",
    )
    assert (await berth(delete_main, ["pod", "a-1", "-n", "team-a"], TEAM_A))[0] == 0
    assert await pods_seen(berth, ADMIN) == set()


async def test_tokens_are_required_and_checked(berth: Any) -> None:
    code, _, err = await berth(get_main, ["pods"], "no-such-token-0123456789")
    assert (code, "401: unknown token" in err) == (1, True)
    code, _, err = await berth(get_main, ["pods"], None)
    assert code == 1
    assert "needs a token: give --token TOKEN or set BERTH_TOKEN" in err


async def status(url: str, method: str = "GET", token: str = "", body: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, headers=headers, data=body or None) as response,
    ):
        return response.status, await response.json()


async def test_http_answers(door: Door) -> None:
    api = door.url + "api/"
    assert await status(api + "pods") == (
        401,
        {"error": "this API needs a token: send `Authorization: Bearer TOKEN`"},
    )
    assert await status(api + "pods?namespace=team-b", token=TEAM_A) == (
        403,
        {"error": "tenant team-a may not read namespace team-b: its namespaces are team-a"},
    )
    assert (await status(api + "pods?namespace=team-b", token=ADMIN))[0] == 200
    assert (await status(api + "stats", token=TEAM_B))[0] == 200
    code, body = await status(api + "clusterqueues", token=TEAM_B)
    assert code == 200
    assert set(body["tenants"]) <= {"team-b"}
    code, body = await status(api + "apply", "POST", TEAM_A, "kind: Nope\n")
    assert code == 400
    assert "Nope" in body["error"]
    assert (await status(api + "objects/Pod/x", "DELETE", TEAM_A))[0] == 400  # no namespace
    # The page itself is static: no token needed to load it.
    async with aiohttp.ClientSession() as session, session.get(door.url) as response:
        assert response.status == 200


async def test_a_tenant_cannot_give_itself_priority(door: Door) -> None:
    """Issue 19: the front door admits as the API server does; a pod that sets spec.priority
    above what its class computes is refused, with the upstream reason, and nothing stored."""
    api = door.url + "api/"
    greedy = pod("team-a", "greedy").replace("spec:\n", "spec:\n  priority: 2147483647\n")
    code, body = await status(api + "apply", "POST", TEAM_A, greedy)
    assert code == 422
    assert "Pod team-a/greedy: spec.priority: Forbidden" in body["error"]
    assert "priority admission controller computed 0" in body["error"]
    code, body = await status(api + "pods?namespace=team-a", token=TEAM_A)
    assert code == 200
    assert "greedy" not in json.dumps(body)
    # The class's own value is fine, and the pod gets the default tolerations.
    modest = pod("team-a", "modest").replace("spec:\n", "spec:\n  priority: 0\n")
    code, body = await status(api + "apply", "POST", TEAM_A, modest)
    assert code == 200, body


async def test_binding_by_name_is_for_admins_and_must_fit(door: Door, berth: Any) -> None:
    """Issue 19: a tenant may not place pods by name (the default; BERTH_TENANT_NODE_NAME=
    allow lifts it); an admin may, but only onto room the node has, as its kubelet admits."""
    api = door.url + "api/"
    assert (await berth(apply_main, ["-f", str(door.files / "node.yaml")], ADMIN))[0] == 0
    pinned = pod("team-a", "pinned").replace("spec:\n", "spec:\n  nodeName: node-0\n")
    code, body = await status(api + "apply", "POST", TEAM_A, pinned)
    assert code == 403
    assert "tenant team-a may not bind Pod team-a/pinned to a node by name" in body["error"]
    huge = pinned.replace("cpu: 100m", "cpu: '500'")
    code, body = await status(api + "apply", "POST", ADMIN, huge)
    assert code == 422
    assert "Pod team-a/pinned: spec.nodeName: OutOfcpu" in body["error"]
    code, body = await status(api + "apply", "POST", ADMIN, pinned)
    assert code == 200, body
    code, body = await status(api + "nodes", token=ADMIN)
    assert code == 200
    [row] = [n for n in body["nodes"] if n["name"] == "node-0"]
    assert row["requested"].get("cpu", 0) <= 8000


async def test_the_page_asks_for_a_token(door: Door, berth: Any) -> None:
    from playwright.async_api import async_playwright

    from tests.dashboard.test_dashboard import CHROMIUM, CHROMIUM_ARGS

    assert (await berth(apply_main, ["-f", str(door.files / "b.yaml")], TEAM_B))[0] == 0
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(door.url)
            await page.wait_for_selector("#token-form:not([hidden])", timeout=10_000)
            assert "401" in await page.inner_text("#updated")
            await page.fill("#token", TEAM_B)
            await page.press("#token", "Enter")
            await page.wait_for_selector("body[data-loaded=true]", timeout=10_000)
            assert await page.locator("#pods-table tbody tr").all_inner_texts() != []
            shown = await page.locator("#pods-table td.pod-name").all_inner_texts()
            assert shown == ["team-b/b-1"]
        finally:
            await browser.close()


async def test_describe_through_the_front_door_shows_the_agents_events(
    door: Door, berth: Any
) -> None:
    """A team-a job that completes (KWOK annotation, the node agent) is described, Succeeded
    with its Event, through the front door; team-b's token may not read it."""
    job = door.files / "job.yaml"
    job.write_text(
        pod("team-a", "job-1").replace(
            "metadata: {name: job-1, namespace: team-a}",
            "metadata: {name: job-1, namespace: team-a, annotations: "
            "{pod-complete.stage.kwok.x-k8s.io/delay: 500ms}}",
        )
    )
    assert (await berth(apply_main, ["-f", str(door.files / "node.yaml")], ADMIN))[0] == 0
    assert (await berth(apply_main, ["-f", str(job)], TEAM_A))[0] == 0
    out = ""
    for _ in range(200):
        code, out, _ = await berth(describe_main, ["pod", "job-1", "-n", "team-a"], TEAM_A)
        if code == 0 and "Succeeded" in out:
            break
        await asyncio.sleep(0.1)
    assert "Status:         Succeeded" in out
    assert "Completed" in out
    assert "ran to completion on node-0" in out
    code, _, err = await berth(describe_main, ["pod", "job-1", "-n", "team-a"], TEAM_B)
    assert code == 1
    assert "403: pod team-a/job-1: namespace not readable with this token" in err
