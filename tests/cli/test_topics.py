"""The embedded stack's topics (cli.supervisor.create_topics), on the session's real broker:
a partition per replica of the role that has the most, not a fixed eight."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer

from cli.supervisor import create_topics
from shared.runtime.env import StackSettings


async def _partitions(bootstrap: str, topics: list[str]) -> dict[str, int]:
    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await probe.start()
    try:
        async with asyncio.timeout(10):
            while True:
                await probe._client.force_metadata_update()
                found = {t: len(probe.partitions_for_topic(t) or ()) for t in topics}
                if all(found.values()):
                    return found
                await asyncio.sleep(0.05)
    finally:
        await probe.stop()


@pytest.mark.parametrize(
    ("replicas", "ordered", "schedule", "proposals", "outcomes"),
    [
        ({"workers": 1, "binders": 1, "queues": 1}, False, 1, 1, 1),
        ({"workers": 2, "binders": 3, "queues": 1}, False, 3, 3, 3),
        ({"workers": 4, "binders": 1, "queues": 2}, False, 4, 4, 4),
        ({"workers": 3, "binders": 2, "queues": 1}, True, 3, 1, 3),
    ],
)
async def test_a_stack_gets_a_partition_per_replica_of_its_largest_role(
    kafka_bootstrap: str,
    test_id: str,
    replicas: dict[str, int],
    ordered: bool,
    schedule: int,
    proposals: int,
    outcomes: int,
) -> None:
    settings = StackSettings("redis://unused", kafka_bootstrap, topic_suffix=test_id)
    await create_topics(settings, ordered=ordered, **replicas)
    topics = settings.topics
    found = await _partitions(kafka_bootstrap, [topics.schedule, topics.proposals, topics.outcomes])
    assert found == {
        topics.schedule: schedule,
        topics.proposals: proposals,
        topics.outcomes: outcomes,
    }
