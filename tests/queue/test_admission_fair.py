"""Fair sharing's preemption in quota admission on a real Redis (Kueue's case "preempt from
target and others even if over nominal"): classical preemption finds nothing (the preemptor
would have to borrow), fair sharing evicts from the queue with the highest share."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from services.queue.quota.fair_preemption import STRATEGIES
from tests.queue.test_admission import pod, queues, setup, submit

POLICY = (
    "fairSharing: {weight: 1}\n  preemption: {withinClusterQueue: LowerPriority, "
    "reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority, "
    "maxPriorityThreshold: -3}}"
)


@pytest.mark.parametrize(("fair", "evicted"), [(False, set()), (True, {"b/low2", "b/b2"})])
async def test_fair_sharing_preempts_where_classical_cannot(
    redis_client: aioredis.Redis, redis_prefix: str, fair: bool, evicted: set[str]
) -> None:
    text = queues(*((n, "all", 3, None, 1) for n in "abc")).replace(
        "fairSharing: {weight: 1}", POLICY
    )
    running = [
        pod("low1", "b", "2", created=1, priority=-1),
        pod("low2", "b", "1", created=2, priority=-1),
        pod("b1", "b", "3", created=3),
        pod("b2", "b", "3", created=4),
    ]
    admission = await setup(redis_client, redis_prefix, text)
    if fair:
        admission.fair_sharing = STRATEGIES
    for p in running:  # admitted one by one: b2 the most recent
        await admission.store.apply([p])
        await submit(admission, p)
        await admission.admit()
        await asyncio.sleep(0.01)
    incoming = pod("big", "a", "4", created=10)
    await admission.store.apply([incoming])
    await submit(admission, incoming)
    verdict = await admission.admit()
    assert set().union(*admission.evicting.values()) == evicted
    assert admission.evicted == len(evicted)
    if fair:
        assert verdict.waiting["a/big"][1].endswith("reclaiming quota: evicted 2 pod(s) of b")
