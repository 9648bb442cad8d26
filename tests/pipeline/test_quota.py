"""Quota end to end: the whole stack (queue, worker, binder as processes on the real Redis and
broker) admits the pods of Kueue ClusterQueues by quota, borrows within a cohort, and
`berth get pods` / `berth get clusterqueues` explain the rest."""

from __future__ import annotations

import asyncio
import json
from typing import cast

import pytest

from cli.run import pipeline
from cli.servers import DevServers
from cli.stack_commands import describe_main, get_main
from cli.tables import format_cluster_queues, format_pods
from shared.models import Manifests, Pod, load_manifest_text
from shared.models.kueue import QUEUE_NAME_LABEL
from tests.builders import make_node
from tests.queue.test_admission import pod, queues


async def test_quota_admission_end_to_end(
    dev_servers: DevServers,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    loaded = load_manifest_text(queues(("team-a", "c", 2, 1, 1), ("team-b", "c", 2, None, 1)))
    nodes = [make_node(f"n{i}").capacity(cpu="8", pods=20).obj() for i in range(2)]
    pods_a = [pod(f"a{i}", "team-a", created=i) for i in range(5)]
    async with pipeline(
        workers=1, binders=1, servers=dev_servers, single_tenant=None, ordered=False
    ) as run:
        loaded.nodes = nodes
        loaded.pods = pods_a
        await run.apply(loaded)

        async def placed() -> dict[str, str]:
            stored = cast(list[Pod], await run.client.store.list("Pod"))
            return {p.metadata.name: p.spec.node_name for p in stored if p.spec.node_name}

        for _ in range(300):  # team-a: nominal 2 + borrowingLimit 1 (team-b is idle)
            if len(await placed()) == 3:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # and no more than that
        assert sorted(await placed()) == ["a0", "a1", "a2"]

        expected = (
            "Waiting for quota in ClusterQueue team-a (position 1 of 2; 1 of 2 in cohort c): "
            "insufficient unused quota for cpu in flavor default, 1 more needed"
        )
        for _ in range(50):  # reasons are written at most once a second (a round after)
            rows = {r.name: r for r in await run.client.pod_rows()}
            if rows["a3"].message == expected:
                break
            await asyncio.sleep(0.1)
        assert rows["a3"].status == "Quota"
        assert rows["a3"].message == expected
        assert "position 2 of 2" in rows["a4"].message
        assert "Quota" in format_pods(list(rows.values()), "table")

        queues_now = {q["name"]: q for q in await run.client.cluster_queue_rows()}
        (cpu,) = queues_now["team-a"]["resources"]
        assert (cpu["nominal"], cpu["reserved"], cpu["usage"], cpu["borrowed"]) == (
            2000,
            3000,
            3000,
            1000,
        )
        assert queues_now["team-a"]["pending"] == {"quota": 2}
        assert queues_now["team-a"]["share"] == 1000 * 1000 // 4000  # 1 of 4 lendable cores
        # kubectl habits: get with a namespace and a selector, describe one pod.
        for name, value in run.running.settings.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("BERTH_STATE", "/nonexistent/stack.json")
        selector = f"{QUEUE_NAME_LABEL}=lq,app notin (web)"
        code = await asyncio.to_thread(get_main, ["pods", "-n", "team-a", "-l", selector])
        shown = capsys.readouterr().out
        assert code == 0
        assert sorted(line.split()[1] for line in shown.splitlines()[1:]) == [
            f"a{i}" for i in range(5)
        ]
        assert await asyncio.to_thread(describe_main, ["pod", "a3", "-n", "team-a"]) == 0
        described = capsys.readouterr().out
        assert "Reason:         quota" in described
        assert "ClusterQueue:   team-a" in described
        assert "position 1 of 2" in described
        assert await asyncio.to_thread(get_main, ["localqueues", "-o", "json"]) == 0
        local = {q["namespace"]: q for q in json.loads(capsys.readouterr().out)["localQueues"]}
        assert local["team-a"] == {
            "namespace": "team-a",
            "name": "lq",
            "clusterQueue": "team-a",
            "admitted": 3,
            "pending": {"quota": 2},
        }
        assert await asyncio.to_thread(describe_main, ["pod", "nope", "-n", "team-a"]) == 1
        assert 'pod "nope" not found' in capsys.readouterr().err

        table = format_cluster_queues(list(queues_now.values()), "table")
        assert "team-a" in table
        assert "team-b" in table

        # team-b wants its nominal 2 back, but team-a borrowed one of them (no reclaim
        # configured): one is admitted, the other waits.
        await run.client.apply(
            Manifests(pods=[pod("b0", "team-b", created=1), pod("b1", "team-b", created=2)])
        )
        for _ in range(300):
            if "b0" in await placed():
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert "b0" in await placed()
        assert "b1" not in await placed()

        # A team-a pod deleted gives one core back. Both queues wait for it; DRF gives it
        # to team-b (share 0 after admitting b1) rather than team-a (it would borrow again).
        assert await run.client.delete("Pod", "team-a", "a0")
        for _ in range(300):
            if "b1" in await placed():
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert "b1" in await placed()
        assert not {"a3", "a4"} & set(await placed())


def test_the_quota_example_loads() -> None:
    """examples/quotas.yaml (the README's multi-tenant example) is valid as written."""
    from pathlib import Path

    from services.queue.quota.cohorts import cohorts_of
    from shared.models import load_manifests
    from shared.models.kueue import ClusterQueue

    example = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"
    loaded = load_manifests(example)
    cohorts = cohorts_of(q for q in loaded.queue_objects if isinstance(q, ClusterQueue))
    assert set(cohorts["shared"].queues) == {"research", "prod"}
    assert len(loaded.pods) == 4


FLAVORS = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
spec: {nodeLabels: {pool: on-demand}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {pool: spot}
  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: on-demand, resources: [{name: cpu, nominalQuota: 1}]}
    - {name: spot, resources: [{name: cpu, nominalQuota: 10}]}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: team-a}
"""


async def test_admitted_pods_run_on_their_flavors_nodes(dev_servers: DevServers) -> None:
    """Kueue's flavors are node pools: the first pod takes the on-demand quota and lands on
    the on-demand node, the others the spot quota, on the (tainted) spot node, through the
    node selector and toleration admission gives them."""
    loaded = load_manifest_text(FLAVORS)
    on_demand = make_node("on-demand-1").capacity(cpu="8", pods=20).label("pool", "on-demand")
    spot = make_node("spot-1").capacity(cpu="8", pods=20).label("pool", "spot")
    spot = spot.taint("spot", "true", "NoSchedule")
    loaded.nodes = [on_demand.obj(), spot.obj()]
    loaded.pods = [pod(f"p{i}", "team-a", created=i) for i in range(3)]
    async with pipeline(
        workers=1, binders=1, servers=dev_servers, single_tenant=None, ordered=False
    ) as run:
        await run.apply(loaded)
        for _ in range(300):
            stored = cast(list[Pod], await run.client.store.list("Pod"))
            placed = {p.metadata.name: p.spec.node_name for p in stored if p.spec.node_name}
            if len(placed) == 3:
                break
            await asyncio.sleep(0.1)
        assert placed == {"p0": "on-demand-1", "p1": "spot-1", "p2": "spot-1"}
        by_name = {p.metadata.name: p for p in stored}
        assert by_name["p0"].spec.node_selector == {"pool": "on-demand"}
        assert by_name["p1"].spec.node_selector == {"pool": "spot"}
        assert [t.key for t in by_name["p1"].spec.tolerations] == ["spot"]


async def test_a_higher_priority_pod_preempts_within_its_cluster_queue(
    dev_servers: DevServers,
) -> None:
    """withinClusterQueue: LowerPriority on the whole stack: two running low-priority pods
    fill the queue's quota; a high-priority pod evicts the newer one (back to waiting,
    unbound, same uid) and runs; the evicted pod waits for quota, saying why."""
    text = queues(("solo", "", 2, None, 1)).replace(
        "fairSharing: {weight: 1}",
        "fairSharing: {weight: 1}\n  preemption: {withinClusterQueue: LowerPriority}",
    )
    loaded = load_manifest_text(text)
    loaded.nodes = [make_node("n0").capacity(cpu="8", pods=20).obj()]
    loaded.pods = [pod(f"low{i}", "solo", created=i, priority=0) for i in range(2)]
    async with pipeline(
        workers=1, binders=1, servers=dev_servers, single_tenant=None, ordered=False
    ) as run:
        await run.apply(loaded)

        async def stored() -> dict[str, Pod]:
            return {p.metadata.name: p for p in cast(list[Pod], await run.client.store.list("Pod"))}

        for _ in range(300):
            now = await stored()
            if now["low0"].spec.node_name and now["low1"].spec.node_name:
                break
            await asyncio.sleep(0.1)
        uid = (await stored())["low1"].metadata.uid
        await run.client.apply(Manifests(pods=[pod("high", "solo", created=5, priority=100)]))
        for _ in range(300):
            now = await stored()
            if now["high"].spec.node_name and not now["low1"].spec.node_name:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        now = await stored()
        assert now["high"].spec.node_name == "n0"
        assert now["low0"].spec.node_name == "n0"
        assert now["low1"].spec.node_name == ""
        assert now["low1"].metadata.uid == uid
        rows = {r.name: r for r in await run.client.pod_rows()}
        assert rows["low1"].status == "Quota"
        assert "insufficient unused quota for cpu" in rows["low1"].message
