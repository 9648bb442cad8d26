"""CacheSync across a Redis that dies: it resumes from where the view is, and reloads the
view when Redis came back behind it (it lost its last writes: a machine crash with
`appendfsync everysec`, a failover to a replica that lagged)."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from cli.server_watch import ServerWatch
from cli.servers import DevServers, start_dev_servers
from scheduling.cache.cache import ClusterCache
from scheduling.cache.sync import CacheSync
from shared.runtime.env import ENV_KAFKA_BOOTSTRAP
from shared.runtime.redisconn import connect
from shared.store import ClusterStore
from tests.builders import make_node


async def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def _restart(servers: DevServers) -> None:
    watch = ServerWatch(servers)
    deadline = time.monotonic() + 20
    while not any(event.what == "back" for event in watch.poll()):
        assert time.monotonic() < deadline, "Redis did not come back"
        await asyncio.sleep(0.02)


async def test_a_view_ahead_of_a_store_that_lost_writes_is_reloaded(
    dev_servers: DevServers, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    servers = start_dev_servers(
        {ENV_KAFKA_BOOTSTRAP: dev_servers.kafka_bootstrap},
        containers=False,
        redis_data_dir=data,
        redis_fsync="always",
    )
    redis = connect(servers.redis_url)
    try:
        store = ClusterStore(redis, cluster="c", prefix="sync-test:")
        await store.apply([make_node(f"n{i}").obj() for i in range(3)])
        saved = tmp_path / "saved"
        saved.mkdir()
        for entry in data.glob("appendonly*"):  # the AOF as it was after n0..n2
            (shutil.copytree if entry.is_dir() else shutil.copy)(entry, saved / entry.name)
        await store.apply([make_node("n3").obj(), make_node("n4").obj()])
        view = ClusterCache(holder="test")
        sync = CacheSync(store, view, block_ms=50)
        await sync.start()
        try:
            assert sorted(view.nodes.names) == ["n0", "n1", "n2", "n3", "n4"]
            ahead = view.resource_version
            # Redis dies and comes back with the older AOF: without n3 and n4, and with a
            # resourceVersion behind the view's.
            [local] = servers.local
            local.process.send(signal.SIGKILL)
            await asyncio.to_thread(local.process.popen.wait)
            for entry in data.glob("appendonly*"):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            for entry in saved.iterdir():
                (shutil.copytree if entry.is_dir() else shutil.copy)(entry, data / entry.name)
            await _restart(servers)
            assert await store.resource_version() < ahead
            # The next change gets a resourceVersion the view had seen already: followed from
            # where it was, the view would skip it.
            await store.apply([make_node("n5").obj()])
            await _until(lambda: "n5" in view.nodes.index, 10.0, "the view to reload and follow")
            assert sorted(view.nodes.names) == ["n0", "n1", "n2", "n5"]
            assert sync.reloads == 1
        finally:
            await sync.stop()
    finally:
        await redis.aclose()
        servers.stop()


async def test_a_lingering_follower_reads_changes_by_the_dozen_and_hurries_when_waited_for(
    redis_client, redis_prefix: str
) -> None:
    """Forty changes a few ms apart reach a follower that lingers in a few reads, not forty;
    one waited for (the worker's barrier, the binder's cross-node check) comes at once."""
    store = ClusterStore(redis_client, cluster="c", prefix=redis_prefix)
    view = ClusterCache(holder="test")
    batches: list[int] = []
    sync = CacheSync(
        store,
        view,
        block_ms=50,
        linger_seconds=0.2,
        on_advance=lambda: batches.append(view.resource_version),
    )
    await sync.start()
    try:
        for i in range(40):
            await store.apply([make_node(f"n{i}").obj()])
            await asyncio.sleep(0.005)
        await _until(lambda: len(view.nodes) == 40, 10, "every node in the view")
        assert len(batches) - 1 <= 10  # the snapshot, then a few reads

        slow = CacheSync(store, view, block_ms=50, linger_seconds=30.0)
        await sync.stop()
        await slow.start()
        try:
            await store.apply([make_node("first").obj()])
            await _until(lambda: "first" in view.nodes.index, 10, "the first change")
            # The follower now lingers for 30 s; a wait for the next change hurries it.
            applied = await store.apply([make_node("second").obj()])
            started = time.monotonic()
            assert await view.wait_for(applied[0].resource_version, 5.0)
            assert time.monotonic() - started < 2.0
        finally:
            await slow.stop()
    finally:
        await sync.stop()
