"""Proposals are not taken on trust: preemption victims must run on the proposal's node with a
lower priority, and an attempt must be the one the queue leased (real Redis, a real queue
store). A refused proposal changes nothing, is dead-lettered with the reason, and cannot
poison later attempts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from services.queue.client import judge_lease, lease_reader
from services.queue.clock import ManualClock
from services.queue.config import QueueConfig
from services.queue.keys import QueueKeys
from services.queue.records import PodRecord
from services.queue.store import QueueStore
from shared.messaging.proposals import Proposal
from shared.store import PodCharge
from shared.store.batch import ScriptBatcher
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


class _CountingBatcher(ScriptBatcher):
    """The binder's batcher, counting the script calls made through it."""

    def __init__(self, redis: aioredis.Redis) -> None:
        super().__init__(redis)
        self.calls: list[tuple[str, int]] = []
        """(first key, number of arguments) per script call."""

    def submit(self, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        self.calls.append((str(keys[0]), len(args)))
        return super().submit(script, keys, args)


async def test_the_lease_checks_of_one_loop_turn_are_one_script_call_per_tenant(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    prefix = f"{redis_prefix}q:"
    queue = QueueStore(
        redis_client, QueueConfig(key_prefix=prefix, max_inflight_per_tenant=0), ManualClock()
    )
    pods = {
        tenant: [make_pod(f"p{i}").namespace(tenant).req(cpu="1").obj() for i in range(40)]
        for tenant in ("team-a", "team-b")
    }
    for tenant, tenant_pods in pods.items():
        await queue.add([PodRecord.from_pod(p) for p in tenant_pods])
        popped = await queue.pop(tenant, 30)  # the last ten stay queued, not in flight
        assert len(popped) == 30
    batcher = _CountingBatcher(redis_client)
    reader = lease_reader(redis_client, prefix, batcher)
    asked = [
        (tenant, p, attempt)
        for tenant, tenant_pods in pods.items()
        for p in tenant_pods
        for attempt in (1, 2)  # 1 was leased to the popped ones; 2 was never dispatched
    ]
    stranger = make_pod("nobody").namespace("team-a").obj()
    asked.append(("team-a", stranger, 1))
    verdicts = await asyncio.gather(
        *(reader.verdict(proposal(p, "n1", attempt=a)) for _, p, a in asked)
    )
    keys = QueueKeys(prefix)
    assert sorted(batcher.calls) == [
        (keys.key("team-a", "cyc"), 81),
        (keys.key("team-b", "cyc"), 80),
    ]
    for (tenant, p, attempt), verdict in zip(asked, verdicts, strict=True):
        index = pods[tenant].index(p) if p is not stranger else -1
        if p is stranger:
            expected = ("refused", "the queue holds no pod team-a/nobody")
        elif index >= 30:
            expected = ("stale", f"{p.key} is not in flight (its attempt {attempt} ended)")
        elif attempt == 1:
            expected = ("ok", "")
        else:
            expected = ("refused", f"attempt 2 of {p.key} was not dispatched (lease 1)")
        assert (verdict.kind, verdict.reason) == expected, p.key
