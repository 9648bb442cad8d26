"""Pod backoff as the queue computes it: `backoff_us` of lua/prelude.lua on real Redis, and the
expiry a failed pod gets in backoffQ through the store (upstream calculateBackoffDuration:
initial doubled per attempt after the first, capped at the maximum)."""

from __future__ import annotations

from importlib import resources

import pytest
import redis.asyncio as aioredis

from services.queue.clock import ManualClock
from services.queue.hints import NODE_ADD
from services.queue.store import QueueStore
from tests.queue.builders import outcome, record

S = 1_000_000  # microseconds
T = "default"

_PRELUDE = (resources.files("services.queue") / "lua" / "prelude.lua").read_text()
_DURATIONS = (
    _PRELUDE
    + """
local out = {}
for att = 0, tonumber(ARGV[3]) do
  out[#out + 1] = backoff_us(att, tonumber(ARGV[1]), tonumber(ARGV[2]))
end
return out
"""
)


async def durations(redis: aioredis.Redis, initial: int, maximum: int, up_to: int) -> list[int]:
    """backoff_us(attempts, initial, maximum) for attempts 0..up_to, from the production Lua."""
    reply = await redis.eval(_DURATIONS, 0, initial, maximum, up_to)
    return [int(d) for d in reply]


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        pytest.param(0, 1, id="0-attempts-initial"),
        pytest.param(1, 1, id="1"),
        pytest.param(2, 2, id="2"),
        pytest.param(3, 4, id="3"),
        pytest.param(4, 8, id="4"),
        pytest.param(5, 10, id="5-capped-from-16"),
        pytest.param(6, 10, id="6"),
        pytest.param(60, 10, id="60"),
    ],
)
async def test_backoff_table(redis_client: aioredis.Redis, attempts: int, seconds: int) -> None:
    got = await durations(redis_client, 1 * S, 10 * S, attempts)
    assert got[attempts] == seconds * S


@pytest.mark.parametrize(
    ("initial", "maximum"),
    [
        pytest.param(1, 10, id="defaults"),
        pytest.param(3, 100, id="odd"),
        pytest.param(7, 7, id="equal"),
        pytest.param(1, 2**62, id="huge-max-no-overflow"),
    ],
)
async def test_equals_min_of_doubling_and_max(
    redis_client: aioredis.Redis, initial: int, maximum: int
) -> None:
    got = await durations(redis_client, initial, maximum, 69)
    assert got == [min(initial * 2 ** max(attempts - 1, 0), maximum) for attempts in range(70)]


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [
        pytest.param(1, 1, id="1"),
        pytest.param(2, 2, id="2"),
        pytest.param(3, 4, id="3"),
        pytest.param(4, 8, id="4"),
        pytest.param(5, 10, id="5-capped-from-16"),
        pytest.param(6, 10, id="6"),
    ],
)
async def test_failed_pod_backs_off_until_timestamp_plus_duration(
    store: QueueStore, clock: ManualClock, attempts: int, seconds: int
) -> None:
    await store.add([record("p")])
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            clock.advance(100)
            await store.flush_backoff_completed()
        [request] = await store.pop(T, 1)
        await store.move_all(NODE_ADD)  # a move request during the cycle: failure -> backoffQ
        t = clock.now()
        [effect] = await store.record_outcomes([outcome(request, plugins=("NodeResourcesFit",))])
        assert effect == "backoff"
    assert request.attempt == attempts
    clock.set(t + seconds - 0.000001)
    assert await store.flush_backoff_completed() == 0
    clock.set(t + seconds)
    assert await store.flush_backoff_completed() == 1  # not backing off once expiry <= now
    assert await store.location(T, "default/p") == "active"
