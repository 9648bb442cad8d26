"""Batch messages (shared.messaging.wire's batches, shared.messaging.batch_sender): many proposals
or outcomes in one record, routed as each message's own key would be, and one bad item never
costing the others. The sender runs against the session's real broker."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any, cast

import msgpack
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from shared.messaging import batch_sender
from shared.messaging.batch_sender import BatchSender
from shared.messaging.kafka import Topics, assign_all, ensure_topics
from shared.messaging.messages import Outcome
from shared.messaging.murmur2 import murmur2
from shared.messaging.proposals import Proposal
from shared.messaging.wire import SCHEMA_VERSION, BatchItem, MessageError, batch_items, pack_batch

TRACE = [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]


def outcome(i: int, result: str = "scheduled") -> Outcome:
    return Outcome("t", f"ns/p{i}", f"uid-{i}", 1, result, node_name=f"n{i % 7}")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ the partition


@pytest.mark.parametrize(
    ("key", "signed"),
    [  # Kafka's own table (clients UtilsTest.testMurmur2)
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
        (b"", 275646681),  # the empty key (a word count of zero, no tail)
    ],
)
def test_murmur2_is_kafkas(key: bytes, signed: int) -> None:
    assert murmur2(key) == signed % 2**32


def test_murmur2_agrees_with_aiokafkas_for_every_length_and_tail() -> None:
    rng = random.Random(7)
    for length in range(130):
        for _ in range(20):
            key = rng.randbytes(length)
            assert murmur2(key) == aiokafka_murmur2(key), (length, key)


# ---------------------------------------------------------------------------- the wire


def test_a_single_message_is_one_item_with_the_records_headers() -> None:
    (item,) = batch_items(outcome(1).encode(), "outcome", "outcomes", TRACE)
    assert (item.error, item.headers) == ("", TRACE)
    assert Outcome.from_body(item.body) == outcome(1)


def test_a_batch_keeps_each_items_own_headers_and_order() -> None:
    bodies = [outcome(i).to_body() for i in range(3)]
    bodies[1]["hdr"] = [[name, value] for name, value in TRACE]
    items = Outcome.items_of(pack_batch("outcomes", bodies), [("record", b"h")])
    assert [Outcome.from_body(i.body) for i in items] == [outcome(i) for i in range(3)]
    assert [i.headers for i in items] == [[], TRACE, []]


@pytest.mark.parametrize(
    ("items", "error"),
    [
        ([], "field 'items': expected 1..1024 items, got 0"),
        ([{}] * 1025, "field 'items': expected 1..1024 items, got 1025"),
        ("x", "field 'items': expected list"),
    ],
)
def test_an_unusable_batch_is_an_error(items: Any, error: str) -> None:
    data = msgpack.packb({"v": SCHEMA_VERSION, "t": "outcomes", "items": items})
    with pytest.raises(MessageError, match=error.replace("(", r"\(").replace(")", r"\)")):
        Outcome.items_of(data)


def test_another_type_is_an_error_naming_both_accepted() -> None:
    with pytest.raises(MessageError, match="of type 'proposal' or 'proposals', got 'outcome'"):
        Proposal.items_of(outcome(1).encode())


def test_a_bad_item_is_flagged_alone_and_kept_for_its_dead_letter() -> None:
    good, forged = outcome(1).to_body(), outcome(2).to_body()
    forged["tenant"] = "bad{tenant}"
    data = pack_batch(
        "outcomes", [good, cast(Any, 7), {**good, "hdr": [["x", "not bytes"]]}, forged]
    )
    items = Outcome.items_of(data)
    assert [i.error for i in items] == [
        "",
        "items[1]: expected a map, got 7",
        "items[2]: field 'hdr': malformed",
        "",
    ]
    with pytest.raises(MessageError, match="field 'tenant'"):
        Outcome.from_body(items[3].body)
    # Alone, the bad item is a single message again: replaying it replays nothing else.
    assert msgpack.unpackb(items[3].alone("outcome"))["tenant"] == "bad{tenant}"
    assert Outcome.decode_all(data, lenient=True) == [outcome(1)]
    with pytest.raises(MessageError, match="expected a map"):
        Outcome.decode_all(data)


def test_proposals_round_trip_in_a_batch() -> None:
    proposals = [Proposal("t", f"ns/p{i}", f"u{i}", 2, f"n{i}", sequence=i + 1) for i in range(4)]
    data = pack_batch("proposals", [p.to_body() for p in proposals])
    assert Proposal.decode_all(data) == proposals
    assert Proposal.decode_all(proposals[0].encode()) == proposals[:1]
    assert BatchItem({}, [], "x").error == "x"


# ---------------------------------------------------------------------------- the sender


async def _records(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    out: list[Any] = []
    try:
        await consumer.seek_to_beginning(*await assign_all(consumer, [topic]))
        async with asyncio.timeout(20):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    out.extend(records)
    finally:
        await consumer.stop()
    return out


async def test_one_record_per_partition_routed_as_each_key_alone(
    kafka_bootstrap: str, topics: Topics
) -> None:
    topic = topics.outcomes
    await ensure_topics(kafka_bootstrap, [topic])
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        sender = BatchSender(producer, topic, Outcome.BATCH)
        await sender.prepare()
        futures = [
            sender.submit(o.uid.encode(), o.to_body(), TRACE) for o in map(outcome, range(40))
        ]
        assert not any(f.done() for f in futures)  # nothing leaves before the flush
        await sender.flush()
        await asyncio.wait_for(asyncio.gather(*futures), 10)
        # The producer's own partitioner, for a key sent alone:
        alone = await (await producer.send(topic, b"probe", key=b"uid-3"))
    finally:
        await producer.stop()
    records = await _records(kafka_bootstrap, topic, sender.records + 1)
    batches = [r for r in records if r.value != b"probe"]
    assert (
        len(batches)
        == sender.records
        == len({sender.partition_of(o.uid.encode()) for o in map(outcome, range(40))})
    )
    seen: dict[int, list[Outcome]] = defaultdict(list)
    for record in batches:
        for item in Outcome.items_of(record.value, record.headers):
            assert item.headers == TRACE
            seen[record.partition].append(Outcome.from_body(item.body))
    for partition, outcomes in seen.items():
        assert all(sender.partition_of(o.uid.encode()) == partition for o in outcomes)
        # Submission order within a partition.
        assert [int(o.uid[4:]) for o in outcomes] == sorted(int(o.uid[4:]) for o in outcomes)
    assert sum(map(len, seen.values())) == 40
    assert sender.partition_of(b"uid-3") == alone.partition
    assert len({r.timestamp for r in batches}) == 1  # one flush, one timestamp


async def test_full_and_oversized_batches_and_the_auto_flush(
    kafka_bootstrap: str, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = topics.proposals
    await ensure_topics(kafka_bootstrap, [topic], partitions=1)
    monkeypatch.setattr(batch_sender, "MAX_BYTES", 4096)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        sender = BatchSender(producer, topic, Proposal.BATCH, auto_flush=True, max_items=5)
        await sender.prepare()
        # Five fill a record at once; three more leave on the next turn of the loop.
        small = [Proposal("t", f"ns/p{i}", f"u{i}", 1, "n1") for i in range(8)]
        await asyncio.wait_for(
            asyncio.gather(*(sender.submit(b"n1", p.to_body()) for p in small)), 10
        )
        assert (sender.records, sender.messages) == (2, 8)
        # Two items of ~3 KiB pack above 4 KiB: the record is split in two.
        big = [Proposal("t", f"ns/b{i}", f"b{i}", 1, "n1", message="x" * 3000) for i in range(2)]
        await asyncio.wait_for(
            asyncio.gather(*(sender.submit(b"n1", p.to_body()) for p in big)), 10
        )
        assert (sender.records, sender.messages) == (4, 10)
    finally:
        await producer.stop()
    records = await _records(kafka_bootstrap, topic, 4)
    assert [[p.pod_key for p in Proposal.decode_all(r.value)] for r in records] == [
        [p.pod_key for p in small[:5]],
        [p.pod_key for p in small[5:]],
        ["ns/b0"],
        ["ns/b1"],
    ]


async def test_a_failed_send_fails_every_message_of_the_record(
    kafka_bootstrap: str, topics: Topics
) -> None:
    topic = topics.outcomes
    await ensure_topics(kafka_bootstrap, [topic])
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    sender = BatchSender(producer, topic, Outcome.BATCH)
    await sender.prepare()
    await producer.stop()  # the producer is closed: send raises
    futures = [sender.submit(b"uid-1", outcome(i).to_body()) for i in range(3)]
    await sender.flush()
    results = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results)
    assert sender.records == 0


async def test_full_batches_wait_for_the_flush_and_keep_their_order(
    kafka_bootstrap: str, topics: Topics
) -> None:
    """A batch that reaches max_items is not sent on its own (it could overtake an earlier
    one): the flush sends every batch, in the order their messages were submitted."""
    topic = topics.proposals
    await ensure_topics(kafka_bootstrap, [topic], partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        sender = BatchSender(producer, topic, Proposal.BATCH, max_items=2)
        await sender.prepare()
        proposals = [Proposal("t", f"ns/p{i}", f"u{i}", 1, "n1") for i in range(5)]
        futures = [sender.submit(b"n1", p.to_body()) for p in proposals]
        await asyncio.sleep(0.05)
        assert sender.records == 0
        assert not any(f.done() for f in futures)
        await sender.flush()
        await asyncio.wait_for(asyncio.gather(*futures), 10)
    finally:
        await producer.stop()
    records = await _records(kafka_bootstrap, topic, 3)
    assert [[p.pod_key for p in Proposal.decode_all(r.value)] for r in records] == [
        ["ns/p0", "ns/p1"],
        ["ns/p2", "ns/p3"],
        ["ns/p4"],
    ]
