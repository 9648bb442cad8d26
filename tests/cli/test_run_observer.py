"""The run's observer (`berth run`, the benches' stage timings) on the session's broker: what
it records from each topic, whether a message is only timed (read for its uid) or decoded
whole (a preemption, an outcome that is not a binding), and that a bad item of a batch is
skipped alone."""

from __future__ import annotations

import asyncio
from typing import Any

from cli.run import RunObserver
from shared.messaging.kafka import Topics, ensure_topics
from shared.messaging.messages import Outcome
from shared.messaging.proposals import Proposal
from shared.messaging.wire import pack_batch
from tests.binder.conftest import proposal
from tests.builders import make_pod
from tests.pipeline.kafka_tools import publish, publish_requests, schedule_request


async def test_the_observer_times_every_pod_and_reads_preemptions_and_failures_whole(
    kafka_bootstrap: str, topics: Topics
) -> None:
    await ensure_topics(kafka_bootstrap, topics.all(), partitions=1)
    a, b, c = (make_pod(name).obj() for name in ("a", "b", "c"))
    victim = make_pod("victim").node("n2").obj()
    await publish_requests(kafka_bootstrap, topics.schedule, *map(schedule_request, (a, b, c)))
    proposals = [
        proposal(a, "n1").to_body(),
        proposal(b, "n2", victims=(victim,), kind="preempt").to_body(),
        proposal(c, "n3").to_body() | {"uid": 7},  # unreadable: skipped alone
    ]
    outcomes: list[Any] = [
        Outcome("default", a.key, a.metadata.uid, 1, "scheduled", node_name="n1").to_body(),
        Outcome("default", b.key, b.metadata.uid, 1, "conflict", message="node taken").to_body(),
        Outcome("default", c.key, c.metadata.uid, 1, "unschedulable", message="no").to_body(),
        "not a map",
    ]
    await publish(
        kafka_bootstrap, topics.proposals, [(b"n", pack_batch(Proposal.BATCH, proposals))]
    )
    await publish(kafka_bootstrap, topics.outcomes, [(b"o", pack_batch(Outcome.BATCH, outcomes))])
    observer = RunObserver(kafka_bootstrap, topics)
    await observer.start()
    try:
        for _ in range(100):
            if sum(observer.results.values()) == 3 and len(observer.dispatched_at) == 3:
                break
            await asyncio.sleep(0.1)
    finally:
        await observer.stop()
    uids = {p.metadata.uid: p.key for p in (a, b, c)}
    assert {uids[u] for u in observer.dispatched_at} == {a.key, b.key, c.key}
    assert {uids[u] for u in observer.proposed_at} == {a.key, b.key}
    assert observer.victims == {b.key: [victim.key]}
    assert observer.nominated == {b.key: "n2"}
    assert dict(observer.results) == {"scheduled": 1, "conflict": 1, "unschedulable": 1}
    assert dict(observer.conflicts) == {"node taken": 1}
    assert {uids[u] for u in observer.bound_at} == {a.key}
