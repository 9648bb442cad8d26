"""The dashboard against a real stack (queue, worker, binder, dashboard as processes on the
session's Redis and broker): its JSON API, then the page in Debian's chromium driven by
Playwright, which must show the seeded cluster queues and why a pod is pending.

The screenshot is kept in test-artifacts/dashboard.png."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from shared.lifecycle.state import LifecycleState, PodEvent
from shared.models import load_manifest_text

pytestmark = pytest.mark.asyncio(loop_scope="module")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

NODES = "".join(
    f"""---
apiVersion: v1
kind: Node
metadata: {{name: node-{i}}}
status: {{capacity: {{cpu: "4", memory: 16Gi, pods: "110"}}}}
"""
    for i in range(3)
)
# Before any ClusterQueue exists: a pod of tenant team-c, too big for any node.
TENANT_ONLY = """---
apiVersion: v1
kind: Pod
metadata: {name: lonely-big, namespace: team-c}
spec:
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "32"}}}]
"""
QUEUES = """---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 8}, {name: memory, nominalQuota: 32Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  cohort: research
  namespaceSelector: {}
  fairSharing: {weight: 2}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 80, borrowingLimit: 4}
      - {name: memory, nominalQuota: 64Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: team-a-cq}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: team-b-cq}
"""


def pod(namespace: str, name: str, cpu: str, memory: str = "1Gi") -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{kueue.x-k8s.io/queue-name: lq}}
spec:
  containers:
  - name: c
    image: busybox
    resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}
"""


# team-b/too-big fits its ClusterQueue's quota (80 cpu) but no node (4 cpu each).
QUEUED_PODS = (
    pod("team-a", "a-1", "2", "2Gi")
    + pod("team-a", "a-2", "1")
    + pod("team-b", "b-1", "1")
    + pod("team-b", "too-big", "64")
)


@dataclass
class Seeded:
    run: Pipeline
    url: str
    before_queues: dict[str, Any]
    """/api/clusterqueues before any ClusterQueue was applied."""


async def get(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200, await response.text()
        return await response.json()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded(dev_servers: DevServers) -> AsyncIterator[Seeded]:
    async with pipeline(
        servers=dev_servers, ordered=False, single_tenant=None, dashboard=True
    ) as run:
        url = run.stack.dashboard_url
        await run.apply(load_manifest_text(NODES + TENANT_ONLY))
        assert await run.settle(60)
        before = await get(url + "api/clusterqueues")
        await run.apply(load_manifest_text(QUEUES + QUEUED_PODS))
        assert await run.settle(60)
        yield Seeded(run, url, before)


async def test_without_cluster_queues_the_tenant_queues_are_shown(seeded: Seeded) -> None:
    body = seeded.before_queues
    assert body["clusterQueues"] == []
    assert body["tenants"]["team-c"]["pending"] == 1


async def test_cluster_queues_api(seeded: Seeded) -> None:
    body = await get(seeded.url + "api/clusterqueues")
    assert body["tenants"] is None
    queues = {q["name"]: q for q in body["clusterQueues"]}
    assert sorted(queues) == ["team-a-cq", "team-b-cq"]
    a, b = queues["team-a-cq"], queues["team-b-cq"]
    assert (a["cohort"], a["weight"], b["weight"]) == ("research", "1", "2")
    assert {r["resource"]: (r["nominal"], r["usage"]) for r in a["resources"]} == {
        "cpu": (8000, 3000),
        "memory": (32 * 1024**3, 3 * 1024**3),
    }
    (b_cpu,) = (r for r in b["resources"] if r["resource"] == "cpu")
    assert (b_cpu["nominal"], b_cpu["borrowingLimit"], b_cpu["usage"]) == (80_000, 4000, 1000)
    assert (a["admittedPods"], b["admittedPods"]) == (2, 1)
    assert a["pending"] == {}
    # Parked, or backing off once more after a node event woke it.
    assert b["pendingTotal"] == 1
    assert set(b["pending"]) <= {"unschedulable", "backoff"}


async def test_pods_api_says_why_a_pod_is_pending(seeded: Seeded) -> None:
    body = await get(seeded.url + "api/pods?q=too-big")
    assert body["total"] == 1
    (big,) = body["pods"]
    assert (big["namespace"], big["status"], big["clusterQueue"]) == (
        "team-b",
        "Pending",
        "team-b-cq",
    )
    assert big["reason"] in ("unschedulable", "backoff")
    assert "Insufficient cpu" in big["reasonMessage"]
    assert big["attempts"] >= 1

    every = await get(seeded.url + "api/pods")
    assert every["total"] == 5
    assert {p["name"] for p in every["pods"][:2]} == {"too-big", "lonely-big"}  # pending first
    team_a = await get(seeded.url + "api/pods?namespace=team-a")
    assert sorted(p["name"] for p in team_a["pods"]) == ["a-1", "a-2"]
    assert {p["reason"] for p in team_a["pods"]} == {"bound"}


async def test_stats_api_counts_the_bindings(seeded: Seeded) -> None:
    deadline = time.monotonic() + 20
    while True:
        body = await get(seeded.url + "api/stats")
        if body["bound"] >= 3 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert body["bound"] == 3
    assert body["podsPerSecond"] > 0
    assert body["latencySamples"] == 3
    assert 0 < body["latencyP50Ms"] <= body["latencyP99Ms"] < 60_000


async def test_without_a_tokens_file_the_api_is_read_only(seeded: Seeded) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(seeded.url + "api/apply", data=TENANT_ONLY) as response,
    ):
        assert response.status == 403
        assert "read-only" in (await response.json())["error"]


FLAVOR_CPU = "default-flavor / cpu"


async def record_eviction(seeded: Seeded) -> None:
    state = LifecycleState(seeded.run.client.redis, seeded.run.client.store.keys)
    if not await state.events("team-a/a-2"):
        message = "Marking for deletion Pod team-a/a-2: node node-1: taint x:NoExecute"
        await state.record(
            "team-a/a-2", PodEvent(time.time(), "Warning", "TaintManagerEviction", message)
        )


async def test_events_api(seeded: Seeded) -> None:
    await record_eviction(seeded)
    body = await get(seeded.url + "api/events?limit=1")
    (event,) = body["events"]
    assert (event["pod"], event["reason"]) == ("team-a/a-2", "TaintManagerEviction")
    url = seeded.url + "api/events?limit=many"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 400


async def test_the_page_in_chromium(seeded: Seeded) -> None:
    from playwright.async_api import async_playwright

    await record_eviction(seeded)

    assert os.access(CHROMIUM, os.X_OK), f"no {CHROMIUM}: `make chromium` installs it"
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await page.goto(seeded.url)
            await page.wait_for_selector("body[data-loaded=true]", timeout=15_000)

            team_a = page.locator("#cq-table tr[data-queue=team-a-cq]")
            assert await team_a.count() == 2  # cpu and memory
            cpu_row = await team_a.first.locator("td").all_inner_texts()
            # name, cohort, weight, share, flavor/resource, nominal, usage ...
            assert cpu_row[:7] == [
                "team-a-cq",
                "research",
                "1",
                "0",
                "default-flavor / cpu",
                "8",
                "3",
            ]
            team_b_rows = page.locator("#cq-table tr[data-queue=team-b-cq]")
            assert await team_b_rows.count() == 2  # cpu and memory
            team_b = await team_b_rows.first.locator("td").all_inner_texts()
            assert team_b[:7] == [
                "team-b-cq",
                "research",
                "2",
                "0",
                "default-flavor / cpu",
                "80",
                "1",
            ]
            assert "unschedulable 1" in team_b[-1] or "backoff 1" in team_b[-1]

            await page.fill("#search", "too-big")
            await page.wait_for_function(
                "document.querySelectorAll('#pods-table tbody tr').length === 1", timeout=10_000
            )
            row = page.locator('#pods-table tr[data-pod="team-b/too-big"]')
            why = await row.locator("td.why").inner_text()
            assert "Insufficient cpu" in why
            assert await row.locator("td.reason").inner_text() in ("unschedulable", "backoff")
            events = page.locator("#events-table tbody tr")
            await events.first.wait_for(timeout=10_000)
            cells = await events.first.locator("td").all_inner_texts()
            assert cells[1:4] == ["team-a/a-2", "Warning", "TaintManagerEviction"]
            await page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        finally:
            await browser.close()
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
