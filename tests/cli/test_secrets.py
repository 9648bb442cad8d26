"""Secrets stay out of sight: `berth up` prints Redis URLs without their password, and the
state file the client commands read is the user's alone."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError

from cli.client import read_settings, write_state
from cli.commands import Args
from cli.run import pipeline
from cli.servers import DevServers, start_dev_servers
from shared.models import Manifests, Pod
from shared.runtime.env import ENV_KAFKA_BOOTSTRAP, ENV_REDIS_PASSWORD, StackSettings, redact_url
from tests.builders import make_node, make_pod


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("redis://:s3cret@r:6379/0", "redis://:***@r:6379/0", id="password"),
        pytest.param("rediss://berth:s3cret@r:6380/2", "rediss://berth:***@r:6380/2", id="acl"),
        pytest.param("redis://r:6379/0", "redis://r:6379/0", id="no-password"),
        pytest.param("redis://berth@r:6379", "redis://berth@r:6379", id="user-only"),
        pytest.param("127.0.0.1:9092", "127.0.0.1:9092", id="not-a-url"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)


def test_the_state_file_is_readable_by_its_user_only(tmp_path: Path) -> None:
    path = tmp_path / "state" / "stack.json"
    settings = StackSettings("redis://:s3cret@r:6379/0", "k:9092")
    old_umask = os.umask(0o022)  # a usual umask: would give 0644
    try:
        write_state(settings, path)
        write_state(settings, path)  # and when it exists already
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert json.loads(path.read_text())["env"]["BERTH_REDIS_URL"] == "redis://:s3cret@r:6379/0"
    # The client commands still find the stack through it.
    no_flags = Args(redis_url=None, kafka_bootstrap=None)
    read = read_settings(no_flags, {"BERTH_STATE": str(path)})
    assert read.redis_url == "redis://:s3cret@r:6379/0"


async def test_a_redis_that_requires_a_password_runs_the_whole_stack(
    dev_servers: DevServers,
) -> None:
    """BERTH_REDIS_PASSWORD: the embedded Redis refuses clients without it (AUTH), its URL
    carries it (percent-encoded), and every service connects with that URL."""
    password = 'p@ss w"rd'
    env = {
        ENV_REDIS_PASSWORD: password,
        ENV_KAFKA_BOOTSTRAP: dev_servers.kafka_bootstrap,  # the session's broker
    }
    servers = start_dev_servers(env, containers=False)
    try:
        url = servers.redis_url
        assert url.startswith("redis://:p%40ss%20w%22rd@127.0.0.1:")
        assert password not in redact_url(url)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        anonymous = aioredis.Redis(host="127.0.0.1", port=port)
        with pytest.raises(AuthenticationError):
            await anonymous.ping()
        await anonymous.aclose()
        nodes = [make_node("n1").capacity(cpu="4", pods=10).obj()]
        pods = [make_pod(f"p{i}").req(cpu="100m").obj() for i in range(3)]
        async with pipeline(workers=1, binders=1, servers=servers) as run:
            await run.apply(Manifests(nodes=nodes, pods=pods))
            assert await run.settle(60)
            stored = [p for p in await run.client.store.list("Pod") if isinstance(p, Pod)]
            assert sorted((p.metadata.name, p.spec.node_name) for p in stored) == [
                ("p0", "n1"),
                ("p1", "n1"),
                ("p2", "n1"),
            ]
    finally:
        servers.stop()
