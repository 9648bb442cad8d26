"""Proposals are not taken on trust: preemption victims must run on the proposal's node with a
lower priority, and an attempt must be the one the queue leased (real Redis, a real queue
store). A refused proposal changes nothing, is dead-lettered with the reason, and cannot
poison later attempts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from services.queue.client import judge_lease
from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.records import PodRecord
from services.queue.store import QueueStore
from shared.messaging.proposals import Proposal
from shared.store import PodCharge
from tests.binder.conftest import Harness, make_harness, proposal
from tests.binder.test_binder import node
from tests.builders import make_pod


@pytest.mark.parametrize(
    ("victim_node", "victim_priority", "preemptor_policy", "reason"),
    [
        pytest.param("n2", 0, "PreemptLowerPriority", "runs on n2, not on n1", id="other-node"),
        pytest.param("n1", 100, "PreemptLowerPriority", "not lower than", id="equal-priority"),
        pytest.param("n1", 500, "PreemptLowerPriority", "not lower than", id="higher-priority"),
        pytest.param("n1", 0, "Never", "preemptionPolicy Never", id="preemptor-never"),
    ],
)
async def test_forged_preemptions_delete_nothing(
    harness: Harness, victim_node: str, victim_priority: int, preemptor_policy: str, reason: str
) -> None:
    victim = make_pod("victim").priority(victim_priority).req(cpu="3").node(victim_node).obj()
    preemptor = make_pod("vip").priority(100).req(cpu="3").preemption_policy(preemptor_policy)
    vip = preemptor.obj()
    await harness.store.apply([node("n1").obj(), node("n2").obj(), victim, vip])
    await harness.run(proposal(vip, "n1", victims=(victim,)))
    assert await harness.store.get_pod("default", "victim") is not None
    [(refused, why)] = harness.recorder.refusals
    assert refused.pod_key == "default/vip"
    assert reason in why
    [outcome] = harness.recorder.final()
    assert (outcome.result, outcome.nominated_node_name) == ("error", None)
    assert reason in outcome.message
    stored = await harness.store.get_pod("default", "vip")
    assert stored is not None
    assert stored.status.nominated_node_name == ""


@pytest.fixture
async def leased(
    redis_client: aioredis.Redis, redis_prefix: str
) -> AsyncIterator[tuple[Harness, QueueStore]]:
    queue_prefix = f"{redis_prefix}q:"
    queue = QueueStore(
        redis_client,
        QueueConfig(key_prefix=queue_prefix, max_inflight_per_tenant=0),
        ManualClock(),
    )
    h = await make_harness(redis_client, redis_prefix, queue_key_prefix=queue_prefix)
    try:
        yield h, queue
    finally:
        await h.binder.close()
        await h.sync.stop()


async def test_only_the_leased_attempt_is_obeyed(leased: tuple[Harness, QueueStore]) -> None:
    harness, queue = leased
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await queue.add([PodRecord.from_pod(pod)])
    [request] = await queue.pop("default", 1)
    assert request.attempt == 1
    # A forged attempt far ahead: refused, and not recorded anywhere.
    await harness.run(proposal(pod, "n1", attempt=10**15))
    assert [why for _, why in harness.recorder.refusals] == [
        f"attempt {10**15} of default/p was not dispatched (lease 1)"
    ]
    assert await harness.store.bindings.attempt_of(pod.metadata.uid) is None
    # Another uid under the same name: refused.
    other = make_pod("p").uid("someone-else").obj()
    await harness.run(proposal(other, "n1", attempt=1))
    assert "has another uid" in harness.recorder.refusals[-1][1]
    # The leased attempt binds as if nothing had happened.
    await harness.run(proposal(pod, "n1", attempt=1))
    assert harness.recorder.results() == {"default/p": ["scheduled"]}
    stored = await harness.store.get_pod("default", "p")
    assert stored is not None
    assert stored.spec.node_name == "n1"


async def test_a_proposal_for_an_attempt_the_queue_ended_is_stale(
    leased: tuple[Harness, QueueStore],
) -> None:
    harness, queue = leased
    pod = make_pod("p").req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), pod])
    await queue.add([PodRecord.from_pod(pod)])
    await queue.pop("default", 1)
    await harness.run(proposal(pod, "n1", attempt=0))  # older than the lease
    assert harness.recorder.refusals == []
    assert harness.binder.stats["stale"] == 1
    result = await harness.store.bindings.attempt_of(pod.metadata.uid)
    assert result is None

    assert (await harness.store.usage("n1")).pods == 0


async def test_a_preemption_clears_lower_priority_nominations_on_its_node(
    harness: Harness,
) -> None:
    """As the dry run does (upstream prepareCandidate): a pod of lower priority nominated to
    the node the preemptor takes loses its nomination; one of higher priority keeps it."""
    victim = make_pod("victim").priority(0).req(cpu="3").node("n1").obj()
    vip = make_pod("vip").priority(100).req(cpu="3").obj()
    lower = make_pod("lower").priority(50).req(cpu="1").obj()
    higher = make_pod("higher").priority(200).req(cpu="1").obj()
    await harness.store.apply([node("n1").obj(), victim, vip, lower, higher])
    for pod in (lower, higher):
        await harness.store.bindings.nominate(
            pod.key, pod.metadata.uid, "n1", pod.spec.priority or 0, PodCharge.of(pod)
        )
    await harness.run(proposal(vip, "n1", victims=(victim,)))
    nominations = {}
    for name in ("vip", "lower", "higher"):
        stored = await harness.store.get_pod("default", name)
        assert stored is not None
        nominations[name] = stored.status.nominated_node_name
    assert nominations == {"vip": "n1", "lower": "", "higher": "n1"}


@pytest.mark.parametrize(
    ("in_flight", "leased", "uid", "attempt", "kind", "reason"),
    [
        (True, 3, "u", 3, "ok", ""),
        (True, 3, "u", 2, "stale", "stale"),
        (False, 3, "u", 2, "stale", "stale"),
        (False, 3, "u", 3, "stale", "default/p is not in flight (its attempt 3 ended)"),
        (True, 3, "u", 4, "refused", "attempt 4 of default/p was not dispatched (lease 3)"),
        (True, 3, None, 3, "refused", "the queue holds no pod default/p"),
        (True, 3, "other", 3, "refused", "the queue's default/p has another uid"),
    ],
)
def test_judge_lease(
    in_flight: bool, leased: int, uid: str | None, attempt: int, kind: str, reason: str
) -> None:
    p = Proposal(tenant="default", pod_key="default/p", uid="u", attempt=attempt, node_name="n1")
    verdict = judge_lease(p, in_flight, leased, uid)
    assert (verdict.kind, verdict.reason) == (kind, reason)
