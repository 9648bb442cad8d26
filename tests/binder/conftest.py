"""A binder on the session's real Redis: store, view (following the change stream) and the
binding cycle, with its outcomes recorded (the service tests use Kafka)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from scheduling.cache.cache import ClusterCache
from scheduling.cache.sync import CacheSync
from services.binder.binder import Binder
from services.binder.config import BinderConfig
from shared.messaging.kafka import Headers
from shared.messaging.messages import Outcome, pod_fingerprint
from shared.messaging.proposals import Proposal, Victim
from shared.models import Pod
from shared.observability.metrics import BerthMetrics
from shared.store import ClusterStore


@dataclass
class Recorder:
    """The binder's Emitter: keeps what it would publish."""

    outcomes: list[Outcome] = field(default_factory=list)
    refusals: list[tuple[Proposal, str]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def outcome(self, outcome: Outcome, headers: Headers | None = None) -> None:
        self.outcomes.append(outcome)
        self._changed.set()

    async def refused(self, proposal: Proposal, reason: str) -> None:
        self.refusals.append((proposal, reason))

    def final(self) -> list[Outcome]:
        """Outcomes other than lease extensions."""
        return [o for o in self.outcomes if o.result != "extend"]

    def results(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for o in self.final():
            out.setdefault(o.pod_key, []).append(o.result)
        return out

    async def wait_for(self, predicate: Callable[[Recorder], bool], seconds: float = 10) -> None:
        async def loop() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(loop(), seconds)


@dataclass
class Harness:
    store: ClusterStore
    view: ClusterCache
    sync: CacheSync
    binder: Binder
    recorder: Recorder

    async def run(self, *proposals: Proposal) -> None:
        """Submit in order (as the consumer does) and wait for all of them."""
        tasks = [self.binder.submit(p, await self.binder.admit()) for p in proposals]
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


def make_config(redis_prefix: str, **overrides: Any) -> BinderConfig:
    options: dict[str, Any] = {
        "cluster": "c1",
        "key_prefix": redis_prefix,
        "gang_poll_seconds": 0.01,
        "view_timeout_seconds": 5.0,
    }
    options.update(overrides)
    return BinderConfig(**options)


async def make_harness(
    redis_client: aioredis.Redis,
    redis_prefix: str,
    metrics: BerthMetrics | None = None,
    **overrides: Any,
) -> Harness:
    store = ClusterStore(redis_client, cluster="c1", prefix=redis_prefix)
    view = ClusterCache(holder=f"binder-{uuid.uuid4().hex[:8]}")  # counts others' reservations
    sync = CacheSync(store, view, block_ms=50)
    await sync.start()
    recorder = Recorder()
    config = make_config(redis_prefix, **overrides)
    metrics = metrics or BerthMetrics(CollectorRegistry())  # not the process-wide registry
    binder = Binder(store, view, recorder, config, metrics=metrics)
    return Harness(store, view, sync, binder, recorder)


@pytest.fixture
async def harness(redis_client: aioredis.Redis, redis_prefix: str) -> AsyncIterator[Harness]:
    h = await make_harness(redis_client, redis_prefix)
    try:
        yield h
    finally:
        await h.binder.close()
        await h.sync.stop()


def proposal(
    pod: Pod,
    node: str,
    attempt: int = 1,
    *,
    victims: tuple[Pod, ...] = (),
    **overrides: Any,
) -> Proposal:
    options: dict[str, Any] = {
        "tenant": pod.metadata.namespace,
        "pod_key": pod.key,
        "uid": pod.metadata.uid,
        "attempt": attempt,
        "node_name": node,
        "pod_fingerprint": pod_fingerprint(pod),
    }
    if victims:
        options["kind"] = "preempt"
        options["victims"] = tuple(Victim(v.key, v.metadata.uid) for v in victims)
    options.update(overrides)
    return Proposal(**options)
