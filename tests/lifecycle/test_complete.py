"""Pods ending Succeeded (`actions.complete_all`, the node agent's pod-complete stage and the
Kueue harness's finish) on the real Redis: why each pod ended is written in the round trip that
deletes it, ahead of the deletion; the Events follow in a second one."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from shared.lifecycle import actions
from shared.lifecycle.state import LifecycleState
from shared.models import Pod
from shared.store import ClusterStore
from tests.builders import make_pod
from tests.redis_sends import count_sends
from tests.stream import follow_all


async def test_the_end_records_and_the_deletions_go_in_one_round_trip(
    redis_client: Redis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    state = LifecycleState(redis_client, store.keys)
    first = make_pod("warm-up").node("n1").obj()
    pods: list[Pod] = [make_pod(f"p{i}").node("n1").obj() for i in range(3)]
    await store.apply([first, *pods])
    [warm] = await actions.complete_all(store, state, [(first, None)], now=1.0)  # loads scripts
    assert warm

    position = await store.resource_version()
    sent = count_sends(monkeypatch)
    done = await actions.complete_all(store, state, [(p, 5.0) for p in pods], now=10.0)
    assert done == [True, True, True]
    assert sent[0] == 2  # end records + deletions, then the Events

    finished = await state.finished()
    for pod in pods:
        assert await store.get_pod("default", pod.metadata.name) is None
        record = finished[pod.key]
        assert record["phase"] == "Succeeded"
        assert record["uid"] == pod.metadata.uid
        assert record["started"] == 5.0
        [event] = await state.events(pod.key)
        assert event.reason == "Completed"
    deletions = [c.key for c in await follow_all(store, position)]
    assert deletions == [p.key for p in pods]


async def test_a_pod_gone_before_its_end_has_no_end_record(
    redis_client: Redis, redis_prefix: str
) -> None:
    store = ClusterStore(redis_client, prefix=redis_prefix)
    state = LifecycleState(redis_client, store.keys)
    gone, kept = make_pod("gone").node("n1").obj(), make_pod("kept").node("n1").obj()
    await store.apply([gone, kept])
    await store.delete("Pod", "default", "gone")
    done = await actions.complete_all(store, state, [(gone, None), (kept, None)], now=3.0)
    assert done == [False, True]
    assert set(await state.finished()) == {kept.key}
    assert await state.events(gone.key) == []
