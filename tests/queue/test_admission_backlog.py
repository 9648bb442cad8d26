"""A backlog of like workloads costs one flavor assignment per shape and round, not one per
workload (services/queue/quota/rounds.py `unfit`), and decides exactly as assigning each
one does: same pods admitted, same reasons, on randomized backlogs on a real Redis."""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.queue.quota import rounds
from services.queue.quota.assign import Placement, assign_pods
from services.queue.quota.workload import Workload
from shared.models.taints import Toleration
from tests.queue.test_admission import pod, queues, setup, submit


def workload(requests: dict[str, dict[str, int]], **placements: Placement) -> Workload:
    wl = Workload("k", "q", 0, 0.0)
    wl.requests = requests
    wl.placements = dict(placements)
    return wl


SPOT = Placement(node_selector={"pool": "spot"})
TOLERANT = Placement(tolerations=(Toleration(key="gpu", operator="Exists"),))


@pytest.mark.parametrize(
    ("a", "b", "alike"),
    [
        (workload({"p": {"cpu": 1000}}), workload({"x": {"cpu": 1000}}), True),
        (workload({"p": {"cpu": 1000}}), workload({"p": {"cpu": 2000}}), False),
        (workload({"p": {"cpu": 1000}}, p=SPOT), workload({"p": {"cpu": 1000}}), False),
        (workload({"p": {"cpu": 1000}}, p=SPOT), workload({"z": {"cpu": 1000}}, z=SPOT), True),
        (workload({"p": {"cpu": 1000}}, p=TOLERANT), workload({"p": {"cpu": 1000}}, p=SPOT), False),
        # a gang of two is not a single pod
        (workload({"a": {"cpu": 1000}, "b": {"cpu": 1000}}), workload({"p": {"cpu": 1000}}), False),
    ],
)
def test_workloads_share_a_shape_when_their_assignment_can_only_be_the_same(
    a: Workload, b: Workload, alike: bool
) -> None:
    assert (a.shape() == b.shape()) is alike
    assert a.shape() is not None


def test_several_pod_sets_have_no_shape() -> None:
    # Their pod sets are named after pod keys, and the names appear in the reasons.
    assert workload({"a": {"cpu": 1000}, "b": {"cpu": 2000}}).shape() is None


async def _round(
    redis_client: aioredis.Redis, prefix: str, seed: int, memo: bool, monkeypatch: Any
) -> tuple[list[str], dict[str, str], int]:
    calls = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return assign_pods(*args, **kwargs)

    monkeypatch.setattr(rounds, "assign_pods", counted)
    if not memo:
        monkeypatch.setattr(Workload, "shape", lambda self: None)
    rng = random.Random(seed)
    admission = await setup(
        redis_client,
        prefix,
        queues(
            ("team-a", "all", 6, 2, 1), ("team-b", "all", 6, None, 1), ("team-c", "", 4, None, 1)
        ),
    )
    pods = [
        pod(
            f"p{i}",
            rng.choice(["team-a", "team-b", "team-c"]),
            rng.choice(["1", "1", "2", "3"]),
            created=i,
            priority=rng.choice([0, 0, 10]),
        )
        for i in range(60)
    ]
    await submit(admission, *pods)
    verdict = await admission.admit()
    monkeypatch.undo()
    admitted = sorted(p.name for p in verdict.admitted)
    return admitted, {k: m for k, (_, m) in verdict.waiting.items()}, calls


@pytest.mark.parametrize("seed", range(6))
async def test_the_backlog_memo_decides_as_assigning_every_workload(
    redis_client: aioredis.Redis, redis_prefix: str, seed: int, monkeypatch: Any
) -> None:
    each = await _round(redis_client, redis_prefix + "each:", seed, False, monkeypatch)
    memo = await _round(redis_client, redis_prefix + "memo:", seed, True, monkeypatch)
    assert memo[0] == each[0]  # the same pods admitted
    assert memo[1] == each[1]  # the same reason for every waiting pod
    assert len(each[1]) > 20  # a real backlog
    # 3 sizes x 3 queues x the few quota versions of a round, against every waiting pod
    assert memo[2] < each[2] / 2, (memo[2], each[2])
