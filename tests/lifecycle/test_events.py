"""Pod Events in Redis: per pod (newest first, capped) and the cluster's recent ones the
dashboard's /api/events serves (namespace-filtered, newest first, limited)."""

from __future__ import annotations

from redis.asyncio import Redis

from cli.tables import format_events
from services.dashboard.events import recent_events
from shared.lifecycle.state import EVENTS_PER_POD, LifecycleState, PodEvent
from shared.store import StoreKeys


async def test_events_per_pod_and_recent(redis_client: Redis, redis_prefix: str) -> None:
    keys = StoreKeys(redis_prefix)
    state = LifecycleState(redis_client, keys)
    for i in range(EVENTS_PER_POD + 5):
        await state.record("a/p", PodEvent(float(i), "Normal", "Completed", f"m{i}"))
    await state.record("b/q", PodEvent(100.0, "Warning", "TaintManagerEviction", "gone"))
    mine = await state.events("a/p")
    assert len(mine) == EVENTS_PER_POD
    assert mine[0].message == f"m{EVENTS_PER_POD + 4}"

    everything = (await recent_events(redis_client, keys, None, limit=3))["events"]
    assert [e["pod"] for e in everything] == ["b/q", "a/p", "a/p"]
    assert everything[0]["reason"] == "TaintManagerEviction"
    only_a = (await recent_events(redis_client, keys, ["a"], limit=30))["events"]
    assert len(only_a) == EVENTS_PER_POD + 5
    assert {e["pod"] for e in only_a} == {"a/p"}
    assert (await recent_events(redis_client, keys, ["c"]))["events"] == []


def test_describe_events_section() -> None:
    text = format_events(
        [
            PodEvent(90.0, "Normal", "Recreated", "ReplicaSet/web replaced it"),
            PodEvent(80.0, "Warning", "TaintManagerEviction", "Marking for deletion Pod d/w"),
        ],
        now=100.0,
    )
    assert text.splitlines() == [
        "Events:",
        "  Type      Reason                 Age   From          Message",
        "  Warning   TaintManagerEviction   20s   berth-agent   Marking for deletion Pod d/w",
        "  Normal    Recreated              10s   berth-agent   ReplicaSet/web replaced it",
    ]
