"""ScriptBatcher (script calls of one loop turn in one pipeline) and ScriptPipeline (one
pipeline without a SCRIPT EXISTS round trip), against the session's Redis."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from shared.store.batch import ScriptBatcher, ScriptPipeline
from tests.redis_sends import count_sends

ECHO = "return {KEYS[1], ARGV[1]}"
APPEND = "return redis.call('RPUSH', KEYS[1], ARGV[1])"
FAIL = "return redis.error_reply('nope ' .. ARGV[1])"


async def test_calls_of_one_turn_share_a_pipeline_and_keep_their_order(
    redis_client: aioredis.Redis, redis_prefix: str
):
    batcher = ScriptBatcher(redis_client)
    append = redis_client.register_script(APPEND)
    key = f"{redis_prefix}list"
    lengths = await asyncio.gather(*(batcher.call(append, [key], [str(i)]) for i in range(50)))
    assert lengths == list(range(1, 51))
    assert await redis_client.lrange(key, 0, -1) == [str(i).encode() for i in range(50)]
    assert batcher.batches <= 2  # the first met NOSCRIPT: loaded, then run again
    before = batcher.batches
    await asyncio.gather(*(batcher.call(append, [key], ["x"]) for _ in range(10)))
    assert batcher.batches == before + 1


@pytest.mark.parametrize("batch_size", [pytest.param(3, id="split"), pytest.param(512, id="one")])
async def test_each_caller_gets_its_own_reply_or_error(
    redis_client: aioredis.Redis, redis_prefix: str, batch_size: int
):
    batcher = ScriptBatcher(redis_client, max_batch=batch_size)
    echo, fail = redis_client.register_script(ECHO), redis_client.register_script(FAIL)
    key = f"{redis_prefix}k"
    calls = [batcher.call(fail if i % 4 == 3 else echo, [key], [str(i)]) for i in range(8)]
    replies = await asyncio.gather(*calls, return_exceptions=True)
    for i, reply in enumerate(replies):
        if i % 4 == 3:
            assert isinstance(reply, ResponseError)
            assert f"nope {i}" in str(reply)
        else:
            assert reply == [key.encode(), str(i).encode()]


async def test_a_flushed_script_cache_is_reloaded(redis_client: aioredis.Redis, redis_prefix: str):
    batcher = ScriptBatcher(redis_client)
    echo = redis_client.register_script(ECHO)
    key = f"{redis_prefix}k"
    assert await batcher.call(echo, [key], ["1"]) == [key.encode(), b"1"]
    await redis_client.script_flush()
    assert await batcher.call(echo, [key], ["2"]) == [key.encode(), b"2"]


async def test_one_pipeline_at_a_time_the_next_one_after_it(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
):
    """Calls made while a pipeline is on its way wait for it and go together in the next:
    pipelines run in Redis in the order the calls were made, whichever connection they get."""
    batcher = ScriptBatcher(redis_client)
    append = redis_client.register_script(APPEND)
    key = f"{redis_prefix}list"
    await batcher.call(append, [key], ["warm"])  # the script is loaded
    execute = batcher._execute
    in_flight = {"now": 0, "most": 0}
    sizes: list[int] = []

    async def slow(calls):
        in_flight["now"] += 1
        in_flight["most"] = max(in_flight["most"], in_flight["now"])
        sizes.append(len(calls))
        await asyncio.sleep(0.05)
        try:
            return await execute(calls)
        finally:
            in_flight["now"] -= 1

    monkeypatch.setattr(batcher, "_execute", slow)
    first = [batcher.submit(append, [key], [f"a{i}"]) for i in range(3)]
    await asyncio.sleep(0.01)  # the first pipeline is on its way
    second = [batcher.submit(append, [key], [f"b{i}"]) for i in range(4)]
    await asyncio.sleep(0)
    third = [batcher.submit(append, [key], [f"c{i}"]) for i in range(2)]
    await asyncio.gather(*first, *second, *third)
    assert sizes == [3, 6]
    assert in_flight["most"] == 1
    names = await redis_client.lrange(key, 1, -1)
    assert names == [n.encode() for n in ["a0", "a1", "a2", "b0", "b1", "b2", "b3", "c0", "c1"]]


async def test_a_script_pipeline_is_one_round_trip_and_reloads_a_flushed_cache(
    redis_client: aioredis.Redis, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
):
    """Script calls and plain commands in one pipeline: one request to Redis (redis-py's
    pipelines ask SCRIPT EXISTS first); after a flushed script cache, the calls that met
    NOSCRIPT run again in their order, and every reply is in its place."""
    append = redis_client.register_script(APPEND)
    key = f"{redis_prefix}list"
    await redis_client.script_load(APPEND)
    sent = count_sends(monkeypatch)
    pipe = ScriptPipeline(redis_client)
    pipe.call(append, [key], ["a"])
    pipe.pipe.rpush(key, "plain")
    pipe.call(append, [key], ["b"])
    assert await pipe.execute() == [1, 2, 3]
    assert sent[0] == 1
    await redis_client.script_flush()
    pipe = ScriptPipeline(redis_client)
    pipe.call(append, [key], ["c"])
    pipe.pipe.rpush(key, "plain-2")
    pipe.call(append, [key], ["d"])
    assert await pipe.execute() == [5, 4, 6]  # the plain command ran before the reloaded calls
    assert await redis_client.lrange(key, 0, -1) == [
        n.encode() for n in ["a", "plain", "b", "plain-2", "c", "d"]
    ]
    pipe = ScriptPipeline(redis_client)
    pipe.pipe.set(f"{redis_prefix}s", "x")
    pipe.call(append, [f"{redis_prefix}s"], ["e"])  # WRONGTYPE
    pipe.call(append, [key], ["f"])
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await pipe.execute()
    assert (await redis_client.lrange(key, -1, -1)) == [b"f"]  # the others ran
