"""Batch messages: many messages of one type to one topic, one Kafka record per partition.

A record costs its writer, the broker and every reader far more than the few hundred bytes of
a proposal or an outcome (the producer's bookkeeping, an authenticator signed and checked, a
consumer record built): measured on the distributed bench, a fifth of a worker's CPU per pod
went to sending its proposals one record each. A `BatchSender` packs the messages submitted
together into one batch message per partition (shared.messaging.wire.pack_batch), routed exactly as
the producer's default partitioner routes each message's own key, so per-key order (every
proposal for a node on one partition, every outcome of a pod on one) is what it was.

Each `submit` returns a future that completes when the record holding the message is
acknowledged (or fails with the producer's error): callers that commit offsets after their
sends still do. Records are sent by `flush()`, one flush at a time, in submission order (a
batch that reached `max_items` waits for it too); with `auto_flush` a flush is also scheduled
on the next turn of the event loop, so the messages that concurrent tasks submit in one turn
travel together (the binder's outcomes), without waiting for more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer

from shared.messaging.murmur2 import murmur2
from shared.messaging.wire import pack_batch, with_headers

MAX_ITEMS = 256
"""Messages per record: enough to make a record's fixed cost negligible, few enough that a
record stays far below the broker's size limit (proposals and outcomes are ~0.2-1 KiB)."""
MAX_BYTES = 512 * 1024
"""A batch that packs larger is split in two (preemptions naming many victims), far below
the broker's default limit of 1 MiB."""
_MEMO_LIMIT = 65_536


@dataclass(slots=True)
class _Pending:
    key: bytes
    items: list[dict[str, Any]] = field(default_factory=list)
    futures: list[asyncio.Future[None]] = field(default_factory=list)


class BatchSender:
    """Messages of one batch type to one topic (see the module's docstring)."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        batch_type: str,
        *,
        auto_flush: bool = False,
        max_items: int = MAX_ITEMS,
    ) -> None:
        self._producer = producer
        self.topic = topic
        self._batch_type = batch_type
        self._auto_flush = auto_flush
        self._max_items = max_items
        self._pending: dict[int, _Pending] = {}
        self._full: list[tuple[int, _Pending]] = []
        """Batches that reached max_items, sent first by the next flush."""
        self._sending = asyncio.Lock()
        """One flush at a time: records leave in the order their messages were submitted."""
        self._partitions: list[int] = []
        self._memo: dict[bytes, int] = {}
        """key -> partition, for keys that come back (node names)."""
        self._flush_scheduled = False
        self._flushing: set[asyncio.Task[None]] = set()
        self.records = 0
        """Records sent (a batch message each)."""
        self.messages = 0

    async def prepare(self) -> None:
        """Learn the topic's partitions (waits for the producer's metadata)."""
        self._partitions = sorted(await self._producer.partitions_for(self.topic))
        self._memo.clear()

    def partition_of(self, key: bytes) -> int:
        """The partition the producer's default partitioner gives `key` (murmur2)."""
        partition = self._memo.get(key)
        if partition is None:
            partitions = self._partitions
            partition = partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = partition
        return partition

    def submit(
        self,
        key: bytes,
        body: dict[str, Any],
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[None]:
        """Queue one message (`body`: its fields without "v" and "t"; `headers`: its own, a
        trace context) for the partition of `key`; the future completes when its record is
        acknowledged. `prepare()` must have run."""
        partition = self.partition_of(key)
        pending = self._pending.get(partition)
        if pending is None:
            pending = self._pending[partition] = _Pending(key)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending.items.append(with_headers(body, headers))
        pending.futures.append(future)
        if len(pending.items) >= self._max_items:
            self._full.append((partition, self._pending.pop(partition)))
        if self._auto_flush and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)
        return future

    async def flush(self) -> None:
        """Send a record for every partition with messages waiting (returns once they are
        handed to the producer; each message's future says when its record landed)."""
        async with self._sending:
            self._flush_scheduled = False
            batches = [*self._full, *self._pending.items()]
            self._full, self._pending = [], {}
            # One timestamp for the records of one flush: the binder orders proposals by
            # (record timestamp, the worker's sequence), which then follows the sequence.
            now = int(time.time() * 1000)
            for partition, batch in batches:
                await self._send(partition, batch, now)

    async def close(self) -> None:
        """Flush, and wait for the records sent in the background."""
        await self.flush()
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)

    def _scheduled_flush(self) -> None:
        if self._flush_scheduled:
            self._start(self.flush())

    def _start(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _send(self, partition: int, batch: _Pending, timestamp_ms: int) -> None:
        value = pack_batch(self._batch_type, batch.items)
        if len(value) > MAX_BYTES and len(batch.items) > 1:
            half = len(batch.items) // 2
            for part in (slice(None, half), slice(half, None)):
                piece = _Pending(batch.key, batch.items[part], batch.futures[part])
                await self._send(partition, piece, timestamp_ms)
            return
        try:
            delivery = await self._producer.send(
                self.topic,
                value=value,
                key=batch.key,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
        except BaseException as exc:
            _fail(batch.futures, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        self.records += 1
        self.messages += len(batch.items)
        delivery.add_done_callback(lambda landed: _settle(batch.futures, landed))


def _settle(futures: Sequence[asyncio.Future[None]], landed: asyncio.Future[Any]) -> None:
    if landed.cancelled():
        _fail(futures, asyncio.CancelledError())
        return
    error = landed.exception()
    if error is not None:
        _fail(futures, error)
        return
    for future in futures:
        if not future.done():
            future.set_result(None)


def _fail(futures: Sequence[asyncio.Future[None]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)
