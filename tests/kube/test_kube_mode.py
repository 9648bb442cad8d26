"""Kubernetes mode end to end: the whole stack (adapter, queue, worker, binder as processes,
on the real Redis and broker) schedules pods that live in the API emulator, binds them through
pods/binding, preempts through the Eviction API, and explains itself in conditions and Events;
a real kubectl reads the same objects back from the emulator."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections import Counter
from typing import Any

import pytest

from cli.servers import DevServers
from cli.supervisor import start_stack
from shared.kube.client import API_CALLS
from shared.models import POD_GROUP_LABEL
from shared.runtime.env import StackSettings
from shared.runtime.redisconn import connect
from shared.store import ClusterStore
from tests.kube.conftest import ApiServer
from tests.kube.test_adapter import eventually, node, pod


def bound(api_server: ApiServer) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["spec"].get("nodeName", "")
        for o in api_server.emulator.of("pods")
        if o["spec"].get("nodeName")
    }


def events_for(api_server: ApiServer, name: str) -> list[dict[str, Any]]:
    return [e for e in api_server.emulator.of("events") if e["involvedObject"]["name"] == name]


def condition(api_server: ApiServer, name: str) -> dict[str, Any]:
    obj = api_server.emulator.object("pods", "default", name) or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})


async def kubectl(api_server: ApiServer, *args: str) -> str:
    """kubectl in a thread: the emulator answers on this test's event loop."""
    return await asyncio.to_thread(_kubectl, api_server, *args)


def _kubectl(api_server: ApiServer, *args: str) -> str:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(api_server.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout


async def test_the_stack_schedules_pods_of_a_kubernetes_cluster(
    api_server: ApiServer, dev_servers: DevServers
) -> None:
    emu = api_server.emulator
    for name in ("n1", "n2", "n3"):
        emu.upsert(node(name))
    for i in range(9):
        emu.upsert(pod(f"p{i}", priority=0))
    emu.upsert(pod("too-big", "100", priority=0))
    emu.upsert(pod("not-ours", scheduler="volcano"))

    settings = StackSettings.isolated(
        dev_servers.redis_url, dev_servers.kafka_bootstrap, take_default_scheduler=True
    )
    stack = await start_stack(settings=settings, kube=str(api_server.kubeconfig), session_ms=1500)
    try:
        # ---- every pod that fits is bound through pods/binding, none over-commits a node
        async def all_bound() -> bool:
            """the nine pods are bound in the API"""
            return len(bound(api_server)) == 9

        await eventually(all_bound, 60)
        placement = bound(api_server)
        assert set(placement) == {f"p{i}" for i in range(9)}
        assert max(Counter(placement.values()).values()) <= 4  # 4 cpu per node
        assert ("", "pods/binding", "create") in emu.calls
        for name, _where in placement.items():
            scheduled = [e for e in events_for(api_server, name) if e["reason"] == "Scheduled"]
            assert len(scheduled) <= 1
            # Events are written asynchronously; most are there already, all soon.
        await eventually(_all_scheduled_events(api_server, placement), 30)

        # ---- the pod that fits nowhere is explained as kube-scheduler explains it
        async def explained() -> bool:
            """too-big carries PodScheduled=False and a FailedScheduling event"""
            return condition(api_server, "too-big").get("status") == "False" and any(
                e["reason"] == "FailedScheduling" for e in events_for(api_server, "too-big")
            )

        await eventually(explained, 30)
        cond = condition(api_server, "too-big")
        assert cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")
        failed = next(
            e for e in events_for(api_server, "too-big") if e["reason"] == "FailedScheduling"
        )
        assert failed["type"] == "Warning"
        assert failed["message"] == cond["message"]
        assert "not-ours" not in placement
        assert not events_for(api_server, "not-ours")

        # ---- preemption through the Eviction API
        emu.upsert(pod("vip", "2", priority=1000))

        async def preempted() -> bool:
            """vip is bound after evicting lower-priority pods"""
            return "vip" in bound(api_server)

        await eventually(preempted, 60)
        evictions = [c for c in emu.calls if c == ("", "pods/eviction", "create")]
        assert evictions
        victims = [e for e in emu.of("events") if e["reason"] == "Preempted"]
        vip_uid = (emu.object("pods", "default", "vip") or {})["metadata"]["uid"]
        assert victims
        assert all(e["message"].startswith(f"Preempted by pod {vip_uid} on node ") for e in victims)
        vip_node = bound(api_server)["vip"]
        assert all(e["message"].endswith(vip_node) for e in victims)
        # The evicted pods are gone from the API, and from what berth counts.
        names = {o["metadata"]["name"] for o in emu.of("pods")}
        assert all(e["involvedObject"]["name"] not in names for e in victims)
        # The preemptor was nominated to that node in its status before it was bound there.
        nominations = [
            event["object"]["status"].get("nominatedNodeName")
            for _, plural, event in emu.history
            if plural == "pods" and event["object"]["metadata"]["name"] == "vip"
        ]
        assert vip_node in nominations

        # ---- an eviction a PodDisruptionBudget refuses (429): the pod waits, and says why
        emu.refuse_evictions.update(o["metadata"]["name"] for o in emu.of("pods"))
        emu.upsert(pod("vip2", "4", priority=2000))

        async def refused() -> bool:
            """vip2's condition names the refused eviction"""
            return "429" in condition(api_server, "vip2").get("message", "")

        await eventually(refused, 60)
        assert "vip2" not in bound(api_server)
        assert "preemption stopped" in condition(api_server, "vip2")["message"]

        # ---- a node added in Kubernetes wakes the parked pod (the same queueing hints)
        emu.upsert(node("n4", cpu="8"))

        async def woken() -> bool:
            """vip2 is bound to the new node"""
            return bound(api_server).get("vip2") == "n4"

        await eventually(woken, 60)

        # ---- a coscheduling PodGroup from the API: no member binds before all can
        emu.upsert(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "gang", "namespace": "default"},
                "spec": {"minMember": 3},
            }
        )

        def member(name: str) -> dict[str, Any]:
            body = pod(name, priority=0)
            body["metadata"]["labels"] = {POD_GROUP_LABEL: "gang"}
            return body

        emu.upsert(member("g0"))
        emu.upsert(member("g1"))

        async def gang_waits() -> bool:
            """the two members are reported waiting for their gang"""
            want = "cannot find enough sibling pods, current pods number: 2, minMember of group: 3"
            return all(want in condition(api_server, m).get("message", "") for m in ("g0", "g1"))

        await eventually(gang_waits, 60)
        assert not {"g0", "g1"} & set(bound(api_server))
        emu.upsert(member("g2"))

        async def gang_bound() -> bool:
            """the three members are bound"""
            return {"g0", "g1", "g2"} <= set(bound(api_server))

        await eventually(gang_bound, 60)

        # ---- berth made no call its RBAC (the chart's, tests/deploy) does not grant
        assert set(emu.calls) <= API_CALLS

        # ---- a pod deleted in Kubernetes leaves berth's store (and so its queue)
        store = ClusterStore(connect(settings.redis_url), prefix=settings.store_prefix)
        assert await store.get_pod("default", "too-big") is not None
        emu.drop("pods", "default", "too-big")

        async def forgotten() -> bool:
            """too-big left the store"""
            return await store.get_pod("default", "too-big") is None

        await eventually(forgotten, 30)
        await store.redis.aclose()
        if shutil.which("kubectl"):
            await _cross_check_with_kubectl(api_server)
    finally:
        await stack.close()


def _all_scheduled_events(api_server: ApiServer, placement: dict[str, str]) -> Any:
    async def check() -> bool:
        """every bound pod has its Scheduled event"""
        for name, where in placement.items():
            messages = [
                e["message"] for e in events_for(api_server, name) if e["reason"] == "Scheduled"
            ]
            if messages != [f"Successfully assigned default/{name} to {where}"]:
                return False
        return True

    return check


async def _cross_check_with_kubectl(api_server: ApiServer) -> None:
    """A real kubectl reads the emulator's list and events the way it reads an API server's:
    the emulator speaks the wire format berth's client was tested against."""
    out = await kubectl(
        api_server,
        "get",
        "pods",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{'\\n'}{end}",
    )
    seen = dict(line.split("=", 1) for line in out.splitlines() if line)
    assert {k: v for k, v in seen.items() if v} == bound(api_server)
    described = await kubectl(api_server, "describe", "pod", "vip2")
    assert "FailedScheduling" in described
    assert "preemption stopped" in described


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_watches_the_emulator_like_an_api_server(api_server: ApiServer) -> None:
    """kubectl's watch (chunked JSON events) sees what the adapter's watch sees."""
    api_server.emulator.upsert(pod("first"))
    process = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(api_server.kubeconfig),
        "get",
        "pods",
        "--watch",
        "--output-watch-events",
        "-o",
        "json",
        "--request-timeout=3s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.sleep(1.5)
    api_server.emulator.upsert(pod("second"))
    api_server.emulator.drop("pods", "default", "first")
    stdout, _ = await asyncio.wait_for(process.communicate(), 30)
    decoder = json.JSONDecoder()
    text, events = stdout.decode(), []
    while text.strip():
        event, end = decoder.raw_decode(text.strip())
        events.append((event["type"], event["object"]["metadata"]["name"]))
        text = text.strip()[end:]
    assert ("ADDED", "first") in events
    assert ("ADDED", "second") in events
    assert ("DELETED", "first") in events
