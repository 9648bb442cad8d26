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
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
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
            missing = self._deliver(calls, await self._execute(calls))
            if missing:  # the script cache was flushed: load what is missing, run those again
                for script in {id(call[0]): call[0] for call in missing}.values():
                    script.sha = await self._redis.script_load(script.script)
                self._deliver(missing, await self._execute(missing), retried=True)
        except BaseException as exc:  # the connection failed (or we were cancelled)
            error = exc if isinstance(exc, Exception) else ConnectionError(repr(exc))
            for *_, future in calls:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(exc, Exception):
                raise

    @staticmethod
    def _deliver(calls: list[_Call], replies: list[Any], retried: bool = False) -> list[_Call]:
        """Each reply to its caller; returns the calls that met NOSCRIPT (first time)."""
        missing: list[_Call] = []
        for call, reply in zip(calls, replies, strict=True):
            future = call[3]
            if future.done():  # the caller was cancelled: the command ran all the same
                continue
            if isinstance(reply, NoScriptError) and not retried:
                missing.append(call)
            elif isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
        return missing

    async def _execute(self, calls: list[_Call]) -> list[Any]:
        pipe = self._redis.pipeline(transaction=False)
        for script, keys, args, _ in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies
