"""Durable state: the embedded Redis killed with -9 mid-run comes back (restarted by the
supervisor on the same port, from its AOF) with every binding it had acknowledged, and the
services ride out the outage; the embedded broker killed with -9 comes back empty, and the
supervisor restarts the services with it.

The Redis here runs with `appendfsync always`: a reply (to any client) leaves Redis only
after the AOF holding every write before it is on disk, so a binding this test has read is
durable even against a machine crash. With the default `everysec` a kill -9 of the process
loses nothing either (the AOF is written before any reply, only its fsync waits), but a
machine crash may lose the last second or so (README, "Durable state")."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.demo_workload import demo_workload
from cli.run import Pipeline, pipeline
from cli.servers import DevServers, LocalServer, start_dev_servers
from shared.models import Manifests
from shared.runtime.env import ENV_KAFKA_BOOTSTRAP, ENV_REDIS_URL
from tests.builders import make_node, make_pod
from tests.pipeline.final_state import final_state

SETTLE_SECONDS = 45.0


def _local(servers: DevServers, kind: str) -> LocalServer:
    [server] = [s for s in servers.local if s.kind == kind]
    return server


@pytest.fixture
def own_redis(dev_servers: DevServers) -> Iterator[DevServers]:
    """A Redis of this test's own (it is killed), appendfsync always; the session's broker."""
    servers = start_dev_servers(
        {ENV_KAFKA_BOOTSTRAP: dev_servers.kafka_bootstrap}, containers=False, redis_fsync="always"
    )
    try:
        yield servers
    finally:
        servers.stop()


async def _bindings(run: Pipeline) -> dict[str, str]:
    """pod key -> node, as the store has them."""
    raw = await run.client.redis.hgetall(run.client.store.keys.pod_node)
    return {_text(key): _text(node) for key, node in raw.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def _until_redis_answers(run: Pipeline, seconds: float) -> float:
    started = time.monotonic()
    while True:
        try:
            await run.client.redis.ping()
            return time.monotonic() - started
        except Exception:  # noqa: BLE001 (down or loading: retried below)
            assert time.monotonic() - started < seconds, "Redis did not come back"
            await asyncio.sleep(0.05)


def _service_logs(run: Pipeline) -> dict[str, str]:
    return {
        name: process.log_path.read_text(errors="replace")
        for name, process in run.stack.processes.items()
    }


async def test_kill_9_of_redis_mid_run_keeps_every_acknowledged_binding(
    own_redis: DevServers,
) -> None:
    redis = _local(own_redis, "redis")
    assert own_redis.redis_fsync == "always"
    workload = demo_workload(nodes=40, pods=400, seed=7)
    async with pipeline(
        workers=2,
        binders=1,
        servers=own_redis,
        ordered=False,
        single_tenant=None,
        watch_servers=True,
    ) as run:
        await run.apply(workload.base)
        total = len(workload.base.pods)
        while True:  # mid-run: some pods bound, most not yet (one HGETALL a poll: fast)
            acknowledged = await _bindings(run)
            if len(acknowledged) >= total // 4:
                break
            await asyncio.sleep(0.005)
        pid = redis.process.pid
        redis.process.send(signal.SIGKILL)
        outage = await _until_redis_answers(run, 20.0)
        # The same port (the services' URL), a new process, everything acknowledged.
        assert redis.process.pid != pid
        assert run.client.settings.redis_url.endswith(f":{redis.port}/0")
        after = await _bindings(run)
        assert {k: after.get(k) for k in acknowledged} == acknowledged
        assert await run.settle(SETTLE_SECONDS)
        state = await final_state(run)
        restarts = {name: p.restarts for name, p in run.stack.processes.items()}
        assert run.running.watch is not None
        redis_restarts = run.running.watch.restarts[redis.name]
        logs = _service_logs(run)
    assert len(acknowledged) < len(workload.base.pods) * 9 // 10, "killed after the work"
    assert outage < 5.0
    assert redis_restarts == 1
    # No pod lost, none bound twice, no node over-committed, no reservation leaked.
    assert state.problems() == []
    assert state.bound >= len(workload.base.pods) * 9 // 10
    # The services rode the outage out: none exited, each said why it waited, in one line.
    assert restarts == {"queue-0": 0, "binder-0": 0, "worker-0": 0, "worker-1": 0, "agent-0": 0}
    for name, text in logs.items():
        assert "retrying in" in text, name
        assert "Traceback" not in text, f"{name}:\n{text[-3000:]}"


async def test_kill_9_of_the_broker_restarts_it_and_the_services(tmp_path: Path) -> None:
    """The broker keeps its topics in memory: killed, it comes back on the same port with no
    topics; the supervisor creates them again and restarts the services (their positions
    and groups referred to the lost log), and new work flows."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_REDIS_URL, ENV_KAFKA_BOOTSTRAP)}
    servers = start_dev_servers(env, containers=False, redis_data_dir=tmp_path / "redis")
    try:
        broker = _local(servers, "kafka")
        nodes = [make_node(f"n{i}").capacity(cpu="4", pods=10).obj() for i in range(2)]
        first = [make_pod(f"a{i}").req(cpu="500m").obj() for i in range(4)]
        second = [make_pod(f"b{i}").req(cpu="500m").obj() for i in range(4)]
        async with pipeline(workers=1, binders=1, servers=servers, watch_servers=True) as run:
            await run.apply(Manifests(nodes=nodes, pods=first))
            assert await run.settle(30)
            pid = broker.process.pid
            broker.process.send(signal.SIGKILL)
            deadline = time.monotonic() + 30
            while any(p.restarts == 0 for p in run.stack.processes.values()):
                assert time.monotonic() < deadline, "the services were not restarted"
                await asyncio.sleep(0.1)
            await run.apply(Manifests(pods=second))
            assert await run.settle(30)
            stored = await _bindings(run)
            assert run.running.watch is not None
            broker_restarts = run.running.watch.restarts[broker.name]
        assert broker.process.pid != pid
        assert broker_restarts == 1
        assert sorted(stored) == sorted(p.key for p in first + second)
    finally:
        servers.stop()
