"""ScriptBatcher: script calls of one loop turn in one pipeline, against the session's Redis."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from shared.store.batch import ScriptBatcher

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
