"""Shared fixtures: real Redis and Kafka for the whole session, isolated per test.

- `dev_servers` (session): started on first use by `cli.servers.start_dev_servers`
  (BERTH_REDIS_URL / BERTH_KAFKA_BOOTSTRAP, else testcontainers where Docker answers, else local
  processes) and stopped at the end of the session, also on Ctrl-C or a failing test.
- Per test: `test_id` (unique), `redis_prefix` (every key a test writes starts with it; the
  `redis_client` fixture deletes them afterwards), `topics` (unique Kafka topic names) and
  `group_id` (unique consumer group).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from cli.servers import DevServers, start_dev_servers
from shared.messaging.kafka import Topics
from shared.runtime.redisconn import connect


@pytest.fixture(scope="session")
def dev_servers() -> Iterator[DevServers]:
    servers = start_dev_servers()
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="session")
def redis_url(dev_servers: DevServers) -> str:
    return dev_servers.redis_url


@pytest.fixture(scope="session")
def kafka_bootstrap(dev_servers: DevServers) -> str:
    return dev_servers.kafka_bootstrap


@pytest.fixture
def test_id() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture
def redis_prefix(test_id: str) -> str:
    """Key prefix for this test (no glob characters, no braces: hash tags follow it)."""
    return f"berth-test:{test_id}:"


@pytest.fixture
async def redis_client(redis_url: str, redis_prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A client for the session's Redis; keys under `redis_prefix` are deleted afterwards."""
    client = connect(redis_url)
    try:
        yield client
    finally:
        await delete_prefixed(client, redis_prefix)
        await client.aclose()


async def delete_prefixed(client: aioredis.Redis, prefix: str) -> int:
    deleted = 0
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}*", count=2000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += await client.unlink(*batch)
            batch.clear()
    if batch:
        deleted += await client.unlink(*batch)
    return deleted


@pytest.fixture
def topics(test_id: str) -> Topics:
    return Topics().suffixed(test_id)


@pytest.fixture
def group_id(test_id: str) -> str:
    return f"berth-test-{test_id}"
