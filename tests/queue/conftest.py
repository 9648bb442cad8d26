"""Queue fixtures: a store on the session's Redis with a unique key prefix and a manual clock."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.store import QueueStore

# Timings: initial backoff 1 s, max 10 s, 60 s in unschedulablePods.
T0 = 1_700_000_000.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def queue_config(redis_prefix: str) -> QueueConfig:
    return QueueConfig(
        key_prefix=redis_prefix,
        initial_backoff_seconds=1.0,
        max_backoff_seconds=10.0,
        max_in_unschedulable_seconds=60.0,
        lease_seconds=30.0,
        max_inflight_per_tenant=0,
    )


@pytest.fixture
def store(
    redis_client: aioredis.Redis, queue_config: QueueConfig, clock: ManualClock
) -> QueueStore:
    return QueueStore(redis_client, queue_config, clock)
