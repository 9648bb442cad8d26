"""The queue's benchmark figures, measured on the servers it is given (the CLI's
`berth bench --mode queue`, cli/bench/queue.py, starts them and prints the report).

- store: add -> pop (lease) through the Lua scripts alone, no Kafka;
- service: pods already in the store (and its change stream) -> the queue service's
  informer -> the queue -> schedule batches acknowledged by the broker (one replica), pods/s
  from the moment it is ready;
- wake: `pods` parked (unschedulable on NodeResourcesFit, past backoff), one node added to
  the store, time until every one of them is re-dispatched and acknowledged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.records import PodRecord
from services.queue.service import QueueService
from services.queue.store import QueueStore
from shared.messaging.kafka import Topics, ensure_topics
from shared.messaging.messages import Outcome
from shared.models import (
    Container,
    Node,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
)
from shared.runtime.redisconn import connect
from shared.store import ClusterStore

_CHUNK = 10_000
# A quicker group join than the service default (start-up is not measured).
_CONSUMER = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}


def _template_pod() -> Pod:
    return Pod(
        metadata=ObjectMeta(name="template", namespace="bench", labels={"app": "bench"}),
        spec=PodSpec(
            containers=[
                Container(
                    name="main",
                    image="busybox",
                    resources=ResourceRequirements(requests={"cpu": 100, "memory": 128 << 20}),
                )
            ]
        ),
    )


def _template() -> PodRecord:
    return PodRecord.from_pod(_template_pod())


def _pods(count: int, prefix: str, tenants: int) -> list[Pod]:
    template = _template_pod()
    return [
        replace(
            template,
            metadata=ObjectMeta(
                name=f"{prefix}-{i:07d}", namespace=f"bench-{i % tenants}", labels={"app": "bench"}
            ),
        )
        for i in range(count)
    ]


def _records(count: int, prefix: str, tenants: int) -> list[PodRecord]:
    """Pods sharing one template body (the queue never decodes bodies on its hot path)."""
    template = _template()
    return [
        replace(
            template,
            namespace=f"bench-{i % tenants}",
            name=f"{prefix}-{i:07d}",
            uid=f"{uuid.uuid4()}",
        )
        for i in range(count)
    ]


async def _wait(condition: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish in time")
        await asyncio.sleep(0.002)


async def _bench_store(redis_url: str, pods: int, tenants: int) -> dict[str, Any]:
    redis = connect(redis_url)
    config = QueueConfig(key_prefix=f"bench-{uuid.uuid4().hex[:8]}:", max_inflight_per_tenant=0)
    store = QueueStore(redis, config)
    records = _records(pods, "s", tenants)
    try:
        started = time.perf_counter()
        for i in range(0, pods, _CHUNK):
            await store.add(records[i : i + _CHUNK])
        added = time.perf_counter()
        names = await store.tenants()
        popped = 0
        while True:
            got = await store.pop_many([(t, _CHUNK) for t in names])
            count = sum(len(g) for g in got)
            if not count:
                break
            popped += count
        done = time.perf_counter()
    finally:
        await _drop(redis, config.key_prefix)
        await redis.aclose()
    assert popped == pods, (popped, pods)
    return {
        "add_pods_per_s": round(pods / (added - started)),
        "pop_pods_per_s": round(pods / (done - added)),
        "add_to_dispatch_pods_per_s": round(pods / (done - started)),
    }


async def _drop(redis: Any, prefix: str) -> None:
    async for key in redis.scan_iter(match=f"{prefix}*", count=5000):
        await redis.unlink(key)


async def _bench_service(
    redis_url: str, bootstrap: str, pods: int, tenants: int, partitions: int
) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    topics = Topics().suffixed(f"bench-{run}")
    config = QueueConfig(
        key_prefix=f"bench-{run}:",
        topics=topics,
        group_id=f"bench-{run}",
        topic_partitions=partitions,
        max_inflight_per_tenant=0,
        dispatch_batch=5000,
        message_batch=64,
        lease_seconds=600,
        dispatch_idle_interval=0.005,
    )
    await ensure_topics(bootstrap, topics.all(), partitions=partitions)
    redis = connect(redis_url)
    cluster = ClusterStore(redis, cluster=f"bench-{run}", prefix=f"bench-{run}:store:")
    started = time.perf_counter()
    await cluster.apply(_pods(pods, "p", tenants))
    store_s = time.perf_counter() - started

    service = QueueService(
        redis, bootstrap, config, consumer_options=_CONSUMER, cluster_store=cluster
    )
    await service.start()
    try:
        started = time.perf_counter()
        await _wait(lambda: service.metrics["published"] >= pods, within=600)
        dispatch_s = time.perf_counter() - started
        result = {
            "pods": pods,
            "tenants": tenants,
            "partitions": partitions,
            "store_apply_pods_per_s": round(pods / store_s),
            "add_to_dispatch_pods_per_s": round(pods / dispatch_s),
            "add_to_dispatch_seconds": round(dispatch_s, 3),
            "schedule_messages": service.metrics["schedule_messages"],
        }
    finally:
        await service.stop()
    wake = await _bench_wake(redis_url, bootstrap, config, pods, tenants)
    try:
        await _drop(redis, config.key_prefix)
        await _drop(redis, f"bench-{run}:store:")
    finally:
        await redis.aclose()
    return {"service": result, "wake": wake}


async def _bench_wake(
    redis_url: str, bootstrap: str, config: QueueConfig, pods: int, tenants: int
) -> dict[str, Any]:
    # Own topics and keys: the wake must not re-read the service phase's pods.
    topics = Topics().suffixed(f"{config.group_id}-wake")
    config = replace(
        config,
        key_prefix=config.key_prefix + "wake:",
        group_id=config.group_id + "w",
        topics=topics,
    )
    await ensure_topics(bootstrap, topics.all(), partitions=config.topic_partitions)
    redis = connect(redis_url)
    # Park the pods 60 s in the past, so their backoff is over when the event comes.
    clock = ManualClock(time.time() - 60)
    store = QueueStore(redis, config, clock)
    records = _records(pods, "w", tenants)
    try:
        for i in range(0, pods, _CHUNK):
            await store.add(records[i : i + _CHUNK])
        names = await store.tenants()
        while batches := [
            r for got in await store.pop_many([(t, _CHUNK) for t in names]) for r in got
        ]:
            await store.record_outcomes(
                [
                    Outcome(
                        r.tenant,
                        r.pod_key,
                        r.uid,
                        r.attempt,
                        "unschedulable",
                        unschedulable_plugins=("NodeResourcesFit",),
                        message="0/100 nodes are available: 100 Insufficient cpu.",
                    )
                    for r in batches
                ]
            )
        parked = sum(c.unschedulable for c in (await store.counts()).values())
        assert parked == pods, (parked, pods)
    finally:
        await redis.aclose()

    redis = connect(redis_url)
    cluster = ClusterStore(redis, cluster="wake", prefix=config.key_prefix + "store:")
    service = QueueService(
        redis, bootstrap, config, consumer_options=_CONSUMER, cluster_store=cluster
    )
    await service.start()
    try:
        node = Node(metadata=ObjectMeta(name="new-node", namespace=""))
        started = time.perf_counter()
        await cluster.apply([node])
        await _wait(lambda: service.metrics["woken"] >= pods, within=120)
        woken_s = time.perf_counter() - started
        await _wait(lambda: service.metrics["published"] >= pods, within=600)
        total_s = time.perf_counter() - started
    finally:
        await service.stop()
        await redis.aclose()
    return {
        "parked_pods": pods,
        "event_to_woken_seconds": round(woken_s, 3),
        "event_to_all_redispatched_seconds": round(total_s, 3),
    }


async def measure(
    pods: int, tenants: int, partitions: int, redis_url: str, bootstrap: str
) -> dict[str, Any]:
    store = await _bench_store(redis_url, pods, tenants)
    service = await _bench_service(redis_url, bootstrap, pods, tenants, partitions)
    return {"store": store, **service}
