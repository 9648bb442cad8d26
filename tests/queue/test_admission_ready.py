"""waitForPodsReady in quota admission (services/queue/quota/ready.py) on a real Redis: a gang
whose pods are not all bound in time is evicted as one and comes back after its backoff, a
limit of requeues deactivates it, and blockAdmission holds every other workload meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import redis.asyncio as aioredis

from services.queue.config import WaitForPodsReady
from services.queue.quota.admission import Admission
from services.queue.quota.ready import Readiness
from services.queue.records import PodRecord
from shared.models import Pod
from shared.observability.metrics import BerthMetrics
from tests.builders import make_pod_group
from tests.queue.test_admission import (
    eviction_samples,
    pod,
    queues,
    setup,
    submit,
    usage_in_redis,
)


async def evicted_come_back(admission: Admission, pods: list[Pod]) -> None:
    """The informer's events for pods put back to waiting: their deletion, their return."""
    for p in pods:
        stored = await admission.store.get_pod(p.metadata.namespace, p.metadata.name)
        assert stored is not None
        assert stored.spec.node_name == ""
        await admission.gate(PodRecord.from_pod(p), "delete")
        await admission.gate(PodRecord.from_pod(stored), "add")


async def test_a_gang_not_ready_in_time_is_requeued_with_backoff_then_deactivated(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    group = make_pod_group("g", min_member=2, namespace="team-a")
    gang = [pod(f"g{i}", "team-a", group="g") for i in range(2)]
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)), group)
    policy = WaitForPodsReady(timeout_s=0.05, backoff_base_s=0.3, backoff_limit=1)
    admission.readiness = Readiness(policy)
    admission.metrics = metrics = BerthMetrics()
    await admission.store.apply(gang)
    await submit(admission, *gang)
    await admission.admit()
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 2000}

    await asyncio.sleep(0.1)  # past the timeout, nothing bound
    await admission.admit()
    assert admission.evicted == 2  # the gang, as one
    assert eviction_samples(metrics) == {  # Kueue's reason; nothing preempted
        ("kueue_evicted_workloads_total", "team-a", "PodsReadyTimeout"): 2,
        ("kueue_local_queue_evicted_workloads_total", "team-a/lq", "PodsReadyTimeout"): 2,
    }
    assert admission.readiness.requeued == {"podgroup:team-a/g": 1}
    await evicted_come_back(admission, gang)
    verdict = await admission.admit()
    assert not verdict.admitted
    assert "requeued 1 time(s) by waitForPodsReady: backoff" in verdict.waiting["team-a/g0"][1]
    assert await usage_in_redis(admission) == {}

    await asyncio.sleep(0.35)  # the backoff is over: admitted again
    await admission.admit()
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 2000}
    await asyncio.sleep(0.1)  # and not ready again: the second requeue passes the limit
    await admission.admit()
    await evicted_come_back(admission, gang)
    await asyncio.sleep(0.7)
    verdict = await admission.admit()
    assert verdict.waiting["team-a/g1"][1].endswith(
        "deactivated: requeued 2 time(s) by waitForPodsReady (backoffLimitCount 1)"
    )
    assert await usage_in_redis(admission) == {}


async def test_bound_in_time_stays_and_block_admission_waits_for_it(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 4, None, 1)))
    admission.readiness = Readiness(WaitForPodsReady(timeout_s=0.2, block_admission=True))
    first = pod("first", "team-a", created=0)
    await admission.store.apply([first])
    await submit(admission, first)
    await admission.admit()
    second = pod("second", "team-a", created=1)
    await submit(admission, second)
    verdict = await admission.admit()
    assert verdict.waiting["team-a/second"][1].endswith(
        "waiting for team-a/first's pods to be ready (waitForPodsReady)"
    )
    await admission.gate(replace(PodRecord.from_pod(first), node_name="n1"), "update")
    await admission.admit()  # first is ready: second is admitted, and bound in time too
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 2000}
    await admission.gate(replace(PodRecord.from_pod(second), node_name="n1"), "update")
    await asyncio.sleep(0.25)
    await admission.admit()
    assert admission.evicted == 0  # bound in time: never requeued
    assert await usage_in_redis(admission) == {"team-a|default|cpu": 2000}
