"""A ClusterStore per test on the session's real Redis, under the test's key prefix."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from shared.store import ClusterStore


@pytest.fixture
def store(redis_client: aioredis.Redis, redis_prefix: str) -> ClusterStore:
    return ClusterStore(redis_client, cluster="c1", prefix=redis_prefix)
