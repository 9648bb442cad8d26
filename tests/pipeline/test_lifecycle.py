"""A cluster that lives, end to end on the real stack (queue, worker, binder and the node
agent as processes on the real Redis and broker):

- KWOK-annotated pods of a ClusterQueue whose quota fits two at a time all run and finish:
  each completion gives back its node usage and its quota, so the next ones are admitted;
- a node fails: after the grace period it is Unknown and tainted; its intolerant pods are
  evicted at once, come back pending (new uid) and are bound elsewhere; a tolerant pod
  stays; nothing is bound twice; node usage matches the bound pods; `berth describe pod`
  shows the eviction with the taint's reason.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import cast

import pytest

from cli.node_commands import node_main
from cli.run import Pipeline, pipeline
from cli.servers import DevServers
from cli.stack_commands import describe_main, get_main
from services.agent.config import ENV_GRACE, ENV_HEARTBEAT, ENV_TICK
from shared.lifecycle.node_lifecycle import UNREACHABLE, ready_status
from shared.lifecycle.state import LifecycleState
from shared.models import Manifests, Pod, load_manifest_text, pod_requests
from tests.builders import make_node, make_pod
from tests.pipeline.final_state import binding_history
from tests.queue.test_admission import pod, queues

FAST = {ENV_GRACE: "1.5", ENV_HEARTBEAT: "0.25", ENV_TICK: "0.05"}
COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"


async def until(check: Callable[[], Awaitable[object]], seconds: float, what: str) -> None:
    for _ in range(int(seconds / 0.1)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def pods_of(run: Pipeline) -> dict[str, Pod]:
    return {p.key: p for p in cast(list[Pod], await run.client.store.list("Pod"))}


async def usage_matches(run: Pipeline) -> list[str]:
    """Nodes whose stored usage differs from what their bound pods request."""
    pods = await pods_of(run)
    wrong = []
    for node in await run.client.store.list("Node"):
        name = node.metadata.name
        bound = [p for p in pods.values() if p.spec.node_name == name]
        usage = await run.client.store.usage(name)
        cpu = sum(pod_requests(p).get("cpu", 0) for p in bound)
        if (usage.pods, usage.requested.get("cpu", 0)) != (len(bound), cpu):
            wrong.append(f"{name}: {usage} vs {len(bound)} pods, {cpu}m")
    return wrong


async def test_kwok_pods_finish_and_give_back_quota(dev_servers: DevServers) -> None:
    loaded = load_manifest_text(queues(("team-a", "c", 2, 0, 1)))
    loaded.nodes = [make_node("n1").capacity(cpu="8", pods=20).obj()]
    jobs = []
    for i in range(6):
        job = pod(f"job-{i}", "team-a", created=i)
        job.metadata.annotations[COMPLETE] = "1s"
        jobs.append(job)
    loaded.pods = jobs
    async with pipeline(
        servers=dev_servers, single_tenant=None, ordered=False, extra_env=FAST
    ) as run:
        await run.apply(loaded)
        state = LifecycleState(run.client.redis, run.client.store.keys)
        most_bound = 0

        async def all_finished() -> bool:
            nonlocal most_bound
            pods = await pods_of(run)
            most_bound = max(most_bound, sum(1 for p in pods.values() if p.spec.node_name))
            return len(await state.finished()) == 6

        # Two at a time (nominal 2 cpu, no borrowing), one second each: about three seconds.
        await until(all_finished, 60, "six completions")
        assert most_bound <= 2
        assert await pods_of(run) == {}
        usage = await run.client.store.usage("n1")
        assert (usage.pods, usage.requested.get("cpu", 0)) == (0, 0)
        (cq,) = [q for q in await run.client.cluster_queue_rows() if q["name"] == "team-a"]
        (cpu,) = cq["resources"]
        assert (cpu["usage"], cpu["reserved"]) == (0, 0)
        finished = await state.finished()
        assert {v["phase"] for v in finished.values()} == {"Succeeded"}


async def test_a_failed_node_reschedules_its_intolerant_pods(
    dev_servers: DevServers,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with pipeline(
        servers=dev_servers, single_tenant=None, ordered=False, extra_env=FAST
    ) as run:
        # Everything lands on n1 first (the only node), then n2 joins.
        web = [make_pod(f"web-{i}").req(cpu="1").owner("ReplicaSet", "web").obj() for i in range(3)]
        stays = (
            make_pod("stays")
            .req(cpu="1")
            .owner("ReplicaSet", "db")
            .toleration(UNREACHABLE, effect="NoExecute")
            .obj()
        )
        await run.apply(
            Manifests(nodes=[make_node("n1").capacity(cpu="8", pods=20).obj()], pods=[*web, stays])
        )

        async def on_n1() -> bool:
            pods = await pods_of(run)
            return sum(1 for p in pods.values() if p.spec.node_name == "n1") == 4

        await until(on_n1, 60, "four pods on n1")
        old_uids = {k: p.metadata.uid for k, p in (await pods_of(run)).items()}
        await run.apply(Manifests(nodes=[make_node("n2").capacity(cpu="8", pods=20).obj()]))

        for name, value in run.running.settings.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("BERTH_STATE", "/nonexistent/stack.json")
        assert await asyncio.to_thread(node_main, ["fail", "n1"]) == 0
        assert "node/n1 failed (unreachable)" in capsys.readouterr().out

        async def moved() -> bool:
            # An evicted pod is absent until its replacement is created: not moved yet.
            pods = await pods_of(run)
            placed = [pods.get(f"default/web-{i}") for i in range(3)]
            return all(p is not None and p.spec.node_name == "n2" for p in placed)

        await until(moved, 60, "web pods rescheduled on n2")
        node = await run.client.store.get_node("n1")
        assert node is not None
        assert ready_status(node) == "Unknown"
        assert {(t.key, t.effect) for t in node.spec.taints} == {
            (UNREACHABLE, "NoSchedule"),
            (UNREACHABLE, "NoExecute"),
        }
        pods = await pods_of(run)
        assert pods["default/stays"].spec.node_name == "n1"
        assert pods["default/stays"].metadata.uid == old_uids["default/stays"]
        for i in range(3):
            assert pods[f"default/web-{i}"].metadata.uid != old_uids[f"default/web-{i}"]
        # Nothing bound twice: every uid bound once, and usage is what the bound pods ask.
        history = await binding_history(run.client.store)
        assert max(Counter(uid for uid, _ in history).values()) == 1
        assert len(history) == 7  # four on n1, three replacements on n2
        assert await usage_matches(run) == []

        assert await asyncio.to_thread(get_main, ["nodes"]) == 0
        rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()}
        assert (rows["n1"], rows["n2"]) == ("NotReady", "Ready")

        assert await asyncio.to_thread(describe_main, ["pod", "web-0"]) == 0
        described = capsys.readouterr().out
        assert "Node:           n2" in described
        assert "TaintManagerEviction" in described
        assert "taint node.kubernetes.io/unreachable:NoExecute not tolerated" in described
        assert "Recreated" in described

        # Recovery: Ready again, the taints lifted.
        assert await asyncio.to_thread(node_main, ["recover", "n1"]) == 0

        async def healthy() -> bool:
            n1 = await run.client.store.get_node("n1")
            return n1 is not None and ready_status(n1) == "True" and not n1.spec.taints

        await until(healthy, 30, "n1 healthy again")
