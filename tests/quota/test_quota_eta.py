"""Estimated admission time (services.queue.quota.eta), table-driven, and in quota admission's
reasons on a real Redis."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.queue.quota.eta import Releases, estimate
from tests.queue.test_admission import pod, queues, setup, submit


@pytest.mark.parametrize(
    ("needed", "available", "rate", "seconds"),
    [
        pytest.param(
            {"cpu": 3000}, {"cpu": 1000}, {"cpu": 500.0}, 4.0, id="2 cores short at 0.5/s"
        ),
        pytest.param({"cpu": 1000}, {"cpu": 1000}, {}, 0.0, id="fits now"),
        pytest.param({"cpu": 3000}, {"cpu": 1000}, {}, None, id="nothing released: unknown"),
        pytest.param(
            {"cpu": 3000, "memory": 4},
            {"cpu": 0, "memory": 0},
            {"cpu": 1000.0, "memory": 1.0},
            4.0,
            id="the slowest resource decides",
        ),
    ],
)
def test_estimate(
    needed: dict[str, int], available: dict[str, int], rate: dict[str, float], seconds: float | None
) -> None:
    assert estimate(needed, available, rate) == seconds


def test_release_rate_over_the_window() -> None:
    releases = Releases(window_s=10.0)
    releases.watch(100.0)
    releases.record("q", 101.0, {"cpu": 1000})
    releases.record("q", 104.0, {"cpu": 3000})
    assert releases.rate("q", 105.0) == {"cpu": 800.0}  # 4 cores over the 5 s watched
    assert releases.rate("q", 112.0) == {"cpu": 300.0}  # the first left the 10 s window
    assert releases.rate("other", 112.0) == {}


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
