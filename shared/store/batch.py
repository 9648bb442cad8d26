"""Script calls sent to Redis as pipelines, one pipeline at a time, in the order they were made.

The binder runs hundreds of proposals at once; each one's check-and-reserve and bind is one
EVALSHA. Sent one by one, every call pays redis-py's per-command cost (taking a pooled
connection, its health and retry wrappers, a write, a timeout around the read), which was the
largest part of the binder's CPU after the pods' own encoding. Calls are queued and go out
together: the ones made in one loop turn, and the ones made while the pipeline before them
was on its way (one pipeline in flight: the busier Redis is, the larger the pipelines).

    batcher = ScriptBatcher(redis)
    reply = await batcher.call(scripts.reserve, keys, args)
    pending = batcher.submit(scripts.reserve, keys, args)  # queued now, awaited later

Order: calls run in Redis in the order they were made (submitted), also across pipelines
(the next is sent when the one before it has been answered), except the rare call retried
after NOSCRIPT (a flushed script cache), which runs right after its pipeline. So a caller
that needs its calls in a given order (the binder's proposals for one node) need not wait for
one reply before making the next call: it only has to make them in that order. A failed
pipeline fails every call in it with the same error, as the calls one by one would have
failed.

`ScriptPipeline` is the one-off form: script calls and plain commands in one pipeline, without
the SCRIPT EXISTS round trip redis-py's pipelines make first for their scripts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

MAX_BATCH = 512
"""Calls per pipeline: bounds one write and the time Redis spends on one batch."""

_Call = tuple[AsyncScript, Sequence[Any], Sequence[Any], "asyncio.Future[Any]"]


class ScriptBatcher:
    def __init__(self, redis: Redis, max_batch: int = MAX_BATCH) -> None:
        self._redis = redis
        self._max_batch = max_batch
        self._queued: list[_Call] = []
        self._sender: asyncio.Task[None] | None = None
        """Sends the queued calls, one pipeline after the other, until none is left."""
        self.batches = 0
        """Pipelines sent (for tests and metrics)."""

    async def call(self, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """`script(keys, args)`, sent with the other calls queued meanwhile."""
        return await self.submit(script, keys, args)

    def submit(
        self, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]
    ) -> asyncio.Future[Any]:
        """Queue `script(keys, args)` now (its place in Redis's order); its reply later."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queued.append((script, keys, args, future))
        if self._sender is None:
            # Starts on the next loop turn: the calls of this one join the first pipeline.
            self._sender = asyncio.create_task(self._send_queued(), name="script-batcher")
        return future

    async def _send_queued(self) -> None:
        try:
            while self._queued:
                calls = self._queued[: self._max_batch]
                del self._queued[: self._max_batch]
                await self._send(calls)
        finally:
            self._sender = None
            if self._queued:  # cancelled: the calls left fail as their pipeline would have
                queued, self._queued = self._queued, []
                for *_, future in queued:
                    if not future.done():
                        future.set_exception(ConnectionError("script batcher cancelled"))

    async def _send(self, calls: list[_Call]) -> None:
        self.batches += 1
        try:
            replies = await self._execute(calls)
        except BaseException as exc:  # the connection failed (or we were cancelled)
            error = exc if isinstance(exc, Exception) else ConnectionError(repr(exc))
            for *_, future in calls:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            return
        for (*_, future), reply in zip(calls, replies, strict=True):
            if future.done():  # the caller was cancelled: the command ran all the same
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _execute(self, calls: list[_Call]) -> list[Any]:
        pipe = ScriptPipeline(self._redis)
        for script, keys, args, _ in calls:
            pipe.call(script, keys, args)
        return await pipe.execute(raise_on_error=False)


class ScriptPipeline:
    """Script calls (and plain commands, on `pipe`) sent as one pipeline, in order.

    redis-py's pipeline asks Redis whether its scripts are loaded (SCRIPT EXISTS) before
    every pipeline that calls one: a second round trip each time. Here the calls go as
    EVALSHA alone; one that meets NOSCRIPT (Redis restarted or its script cache flushed)
    has its script loaded and is sent again right after the pipeline, the calls that met it
    in their order. So a pipeline whose script calls all met it (a cache emptied before it
    ran) keeps its calls' order among themselves; its plain commands ran before them.

        pipe = ScriptPipeline(redis)
        pipe.call(scripts.delete, keys, args)
        pipe.pipe.hset(key, mapping=fields)
        replies = await pipe.execute()
    """

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self.pipe: Pipeline = redis.pipeline(transaction=False)
        self._calls: dict[int, tuple[AsyncScript, Sequence[Any], Sequence[Any]]] = {}

    def call(self, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]) -> None:
        self._calls[len(self.pipe)] = (script, keys, args)
        _evalsha(self.pipe, script, keys, args)

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Every command's reply, in order; the first error raised (`raise_on_error`), else
        errors in place of their replies."""
        if not len(self.pipe):
            return []
        replies: list[Any] = await self.pipe.execute(raise_on_error=False)
        missing = [
            i
            for i, reply in enumerate(replies)
            if isinstance(reply, NoScriptError) and i in self._calls
        ]
        if missing:
            scripts = {id(self._calls[i][0]): self._calls[i][0] for i in missing}
            for script in scripts.values():
                script.sha = await self._redis.script_load(script.script)
            again = self._redis.pipeline(transaction=False)
            for i in missing:
                _evalsha(again, *self._calls[i])
            for i, reply in zip(missing, await again.execute(raise_on_error=False), strict=True):
                replies[i] = reply
        self._calls.clear()
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies


def _evalsha(pipe: Pipeline, script: AsyncScript, keys: Sequence[Any], args: Sequence[Any]) -> None:
    pipe.evalsha(script.sha, len(keys), *keys, *args)
