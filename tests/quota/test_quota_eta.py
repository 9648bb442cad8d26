"""Estimated admission time (services.queue.quota.eta), table-driven, and in quota admission's
reasons on a real Redis."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.queue.quota.eta import Flow, estimate
from tests.queue.test_admission import pod, queues, setup, submit


@pytest.mark.parametrize(
    ("needed", "available", "rate", "overtaking", "horizon", "seconds"),
    [
        pytest.param(
            {"cpu": 3000}, {"cpu": 1000}, {"cpu": 500.0}, None, 0.0, 4.0, id="2 cores at 0.5/s"
        ),
        pytest.param({"cpu": 1000}, {"cpu": 1000}, {}, None, 0.0, 0.0, id="fits now"),
        pytest.param({"cpu": 3000}, {"cpu": 1000}, {}, None, 0.0, None, id="nothing released"),
        pytest.param(
            {"cpu": 3000, "memory": 4},
            {"cpu": 0, "memory": 0},
            {"cpu": 1000.0, "memory": 1.0},
            None,
            0.0,
            4.0,
            id="the slowest resource decides",
        ),
        pytest.param(
            {"cpu": 3000},
            {"cpu": 1000},
            {"cpu": 1000.0},
            {"cpu": 500.0},
            10.0,
            4.0,
            id="half the freed quota overtaken, fits within the horizon: twice as long",
        ),
        pytest.param(
            {"cpu": 3000},
            {"cpu": 1000},
            {"cpu": 1000.0},
            {"cpu": 500.0},
            2.0,
            3.0,
            id="beyond the horizon: what they took in 2 s, then the full rate",
        ),
        pytest.param(
            {"cpu": 3000},
            {"cpu": 1000},
            {"cpu": 1000.0},
            {"cpu": 1000.0},
            10.0,
            12.0,
            id="higher priorities take all that is freed: after they stop",
        ),
        pytest.param(
            {"cpu": 1000},
            {"cpu": 1000},
            {},
            {"cpu": 9000.0},
            10.0,
            0.0,
            id="fits now whatever comes",
        ),
        pytest.param(
            {"cpu": 3000},
            {"cpu": 1000},
            {"cpu": 500.0},
            {"memory": 9.0},
            10.0,
            4.0,
            id="arrivals of another resource",
        ),
    ],
)
def test_estimate(
    needed: dict[str, int],
    available: dict[str, int],
    rate: dict[str, float],
    overtaking: dict[str, float] | None,
    horizon: float,
    seconds: float | None,
) -> None:
    assert estimate(needed, available, rate, overtaking, horizon) == seconds


def test_release_rate_over_the_window() -> None:
    releases = Flow(window_s=10.0)
    releases.watch(100.0)
    releases.record("q", 101.0, {"cpu": 1000})
    releases.record("q", 104.0, {"cpu": 3000})
    assert releases.rate("q", 105.0) == {"cpu": 800.0}  # 4 cores over the 5 s watched
    assert releases.rate("q", 112.0) == {"cpu": 300.0}  # the first left the 10 s window
    assert releases.rate("other", 112.0) == {}


def test_arrivals_above_a_priority_count_from_their_creation() -> None:
    """Arrivals are recorded with their creation time, which may be earlier than the ones
    recorded before (a relist, an evicted workload back): they leave the window by time."""
    arrivals = Flow(window_s=10.0)
    arrivals.record("q", 104.0, {"cpu": 2000}, priority=200)
    arrivals.record("q", 101.0, {"cpu": 1000}, priority=100)  # created earlier
    arrivals.record("q", 104.0, {"cpu": 4000}, priority=50)
    # Watched since the earliest creation: 4 s at 105.
    assert arrivals.rate("q", 105.0) == {"cpu": 7000 / 4}
    assert arrivals.rate("q", 105.0, above=100) == {"cpu": 2000 / 4}  # 100 itself is not above
    assert arrivals.rate("q", 105.0, above=50) == {"cpu": 3000 / 4}
    assert arrivals.rate("q", 105.0, above=200) == {}
    # At 112 the one created at 101 left the window, though recorded after one that stays.
    assert arrivals.rate("q", 112.0, above=50) == {"cpu": 2000 / 10}


async def test_waiting_reasons_carry_an_estimate_once_quota_was_given_back(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 2, None, 1)))
    pods = [pod(f"p{i}", "team-a", created=i) for i in range(6)]
    records = await submit(admission, *pods)
    verdict = await admission.admit()
    assert "estimated" not in verdict.waiting["team-a/p2"][1]  # nothing released yet
    admission.releases.since = (admission.releases.since or 0.0) - 10.0  # 10 s watched
    await admission.gate(records["p0"], "delete")  # 1 core back in 10 s: 0.1 core/s
    verdict = await admission.admit()
    reasons = {k: m for k, (_, m) in verdict.waiting.items()}
    # p2 is admitted; p3 needs 1 core more than is free (p1, p2 hold both): ~10 s; p4 ~20 s.
    assert reasons["team-a/p3"].endswith("; admission estimated in ~10s")
    assert reasons["team-a/p4"].endswith("; admission estimated in ~20s")
    assert reasons["team-a/p5"].endswith("; admission estimated in ~30s")


async def test_higher_priority_arrivals_lengthen_a_waiting_workloads_estimate(
    redis_client: aioredis.Redis, redis_prefix: str
) -> None:
    """Quota came back at 0.2 core/s; work of a higher priority arrived at 0.1 core/s over the
    10 s watched and is ordered ahead of the low-priority workloads: for the next 10 s (the
    horizon) their backlog shrinks at only 0.1 core/s, then at 0.2 core/s."""
    import time

    admission = await setup(redis_client, redis_prefix, queues(("team-a", "", 2, None, 1)))
    now = time.time()
    low = [pod(f"low{i}", "team-a", created=now - 10, priority=1) for i in range(6)]
    records = await submit(admission, *low)
    await admission.admit()  # low0 and low1 hold the 2 cores
    for name in ("low0", "low1"):  # 2 cores back over the 10 s watched: 0.2 core/s
        await admission.gate(records[name], "delete")
    admission.releases.since = now - 10
    await submit(admission, pod("high", "team-a", created=now - 10, priority=5))
    verdict = await admission.admit()  # high and low2 take the 2 cores
    reasons = {k: m for k, (_, m) in verdict.waiting.items()}
    assert sorted(reasons) == ["team-a/low3", "team-a/low4", "team-a/low5"]
    # 1 core short at 0.2 - 0.1 core/s: 10 s, within the horizon (the release rate alone
    # would say 5 s); 2 and 3 short: beyond it, (2 + 0.1 x 10) / 0.2 and (3 + 1) / 0.2.
    assert reasons["team-a/low3"].endswith("; admission estimated in ~10s")
    assert reasons["team-a/low4"].endswith("; admission estimated in ~15s")
    assert reasons["team-a/low5"].endswith("; admission estimated in ~20s")


def test_a_flow_keeps_only_its_window_even_when_no_rate_is_asked() -> None:
    releases = Flow(window_s=10.0)
    for second in range(100):
        releases.record("q", float(second), {"cpu": 1})
    assert len(releases.events["q"]) == 11  # 89..99: the last 10 s and the newest
