"""`berth node cordon|drain` on the real Redis: cordon flips spec.unschedulable once; drain
evicts through the eviction API's rules (a budget allowing no disruption refuses), leaves
DaemonSet pods, and owners bring theirs back pending; the command's output and errors."""

from __future__ import annotations

from typing import cast

import pytest
from redis.asyncio import Redis

from cli.commands import Args
from cli.node_commands import run
from shared.lifecycle import nodes
from shared.lifecycle.state import LifecycleState
from shared.models import PodDisruptionBudget
from shared.store import ClusterStore
from tests.builders import label_selector, make_node, make_pdb, make_pod


async def test_cordon_and_drain(redis_client: Redis, redis_prefix: str) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    state = LifecycleState(redis_client, store.keys)
    await store.apply([make_node("n1").capacity(cpu="8", pods=20).obj()])
    assert await nodes.cordon(store, "n1") is True
    assert await nodes.cordon(store, "n1") is False
    node = await store.get_node("n1")
    assert node is not None
    assert node.spec.unschedulable is True
    with pytest.raises(nodes.NodeNotFoundError, match='node "nope" not found'):
        await nodes.cordon(store, "nope")

    web = [
        make_pod(f"web-{i}").label("app", "web").owner("ReplicaSet", "web").node("n1").obj()
        for i in range(2)
    ]
    db = [make_pod(f"db-{i}").label("app", "db").node("n1").obj() for i in range(2)]
    daemon = make_pod("logs").owner("DaemonSet", "logs").node("n1").obj()
    await store.apply([*web, *db, daemon])
    # db: at least 2 available of 2 -> no disruption allowed; web: one may go at a time.
    await store.apply(
        [
            make_pdb("db", label_selector({"app": "db"}), min_available=2),
            make_pdb("web", label_selector({"app": "web"}), max_unavailable=1),
        ]
    )
    report = await nodes.drain(store, state, "n1")
    assert report.skipped == ["default/logs"]
    assert set(report.refused) == {"default/db-0", "default/db-1", "default/web-1"}
    assert report.refused["default/db-0"].startswith("Cannot evict pod as it would violate")
    assert report.evicted == report.replaced == ["default/web-0"]
    back = await store.get_pod("default", "web-0")
    assert back is not None
    assert back.spec.node_name == ""
    assert back.metadata.uid != web[0].metadata.uid
    budget = cast(PodDisruptionBudget, await store.get("PodDisruptionBudget", "default", "web"))
    assert budget.status.disruptions_allowed == 0  # the eviction was counted
    assert [e.reason for e in await state.events("default/web-0")] == ["Recreated", "Evicted"]


async def test_the_command(redis_client: Redis, redis_prefix: str, redis_url: str) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    await store.apply([make_node("n1").capacity(cpu="8").obj()])
    env = {"BERTH_KEY_PREFIX": redis_prefix}

    def args(*argv: str) -> Args:
        return Args(
            action=argv[0],
            node=argv[1],
            not_ready="--not-ready" in argv,
            redis_url=redis_url,
            kafka_bootstrap="127.0.0.1:1",
        )

    with pytest.MonkeyPatch.context() as patch:
        for k, v in env.items():
            patch.setenv(k, v)
        patch.setenv("BERTH_STATE", "/nonexistent/stack.json")
        assert await run(args("cordon", "n1")) == ["node/n1 cordoned"]
        assert await run(args("uncordon", "n1")) == ["node/n1 uncordoned"]
        assert await run(args("fail", "n1", "--not-ready")) == ["node/n1 failed (not-ready)"]
        state = LifecycleState(redis_client, store.keys)
        assert await state.failures() == {"n1": "not-ready"}
        assert await run(args("recover", "n1")) == ["node/n1 recovered"]
        assert await state.failures() == {}
        assert await run(args("drain", "n1")) == ["node/n1 cordoned", "node/n1 drained"]
        with pytest.raises(LookupError, match='node "n9" not found'):
            await run(args("fail", "n9"))
