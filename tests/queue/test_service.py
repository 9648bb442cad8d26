"""The queue service against real Kafka (Tansu) and Redis: objects written to the store (its
change stream tailed by the queue's informer) and outcomes in, schedule batches out, dead
letters, restarts, racing replicas, leases, tenants."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from services.queue.clock import Clock, ManualClock
from services.queue.config import QueueConfig
from services.queue.service import STREAM_TOPIC, QueueService
from services.queue.store import QueueStore
from shared.messaging.kafka import Topics, ensure_topics
from shared.messaging.messages import Outcome, ScheduleBatch
from shared.messaging.wire import pack_batch
from shared.models import POD_GROUP_LABEL, Node, ObjectMeta, Pod
from shared.store import ClusterStore
from tests.builders import make_pod_group
from tests.queue.builders import make_pod, outcome
from tests.queue.kafka_helpers import CONSUMER_OPTIONS, TopicReader, produce


@pytest.fixture
def service_config(redis_prefix: str, topics: Topics, group_id: str) -> QueueConfig:
    return QueueConfig(
        key_prefix=redis_prefix,
        topics=topics,
        group_id=group_id,
        topic_partitions=4,
        max_inflight_per_tenant=0,
        dispatch_idle_interval=0.02,
        backoff_flush_interval=0.1,
        lease_check_interval=0.1,
    )


@pytest.fixture
def cluster(redis_client, redis_prefix: str) -> ClusterStore:
    """The store the queue's informer follows (keys under the test's prefix)."""
    return ClusterStore(redis_client, cluster="c", prefix=redis_prefix + "store:")


@pytest.fixture
async def make_service(
    redis_url: str, kafka_bootstrap: str, topics: Topics, redis_client, cluster: ClusterStore
) -> Callable[..., contextlib.AbstractAsyncContextManager[QueueService]]:
    await ensure_topics(kafka_bootstrap, topics.all(), partitions=4)

    @contextlib.asynccontextmanager
    async def running(
        config: QueueConfig, clock: Clock | None = None, store: ClusterStore | None = None
    ) -> AsyncIterator[QueueService]:
        service = QueueService(
            redis_url,
            kafka_bootstrap,
            config,
            clock=clock,
            consumer_options=CONSUMER_OPTIONS,
            cluster_store=store or cluster,
        )
        await service.start()
        try:
            yield service
        finally:
            await service.stop()

    return running


def pods(*names: str, namespace: str = "default", **kwargs: object) -> list[Pod]:
    return [make_pod(name, namespace, **kwargs) for name in names]  # type: ignore[arg-type]


async def pending(service: QueueService, tenant: str) -> int:
    return (await service.store.counts())[tenant].pending


async def active(service: QueueService, tenant: str) -> int:
    return (await service.store.counts())[tenant].active


async def wait_for_async(
    read: Callable[[], Awaitable[int]], want: int, within: float = 20.0
) -> None:
    deadline = time.monotonic() + within
    while await read() != want:
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def wait_for(condition: Callable[[], bool], within: float = 20.0, why: object = None) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out ({why})"
        await asyncio.sleep(0.02)


async def test_pods_flow_to_the_schedule_topic_in_queue_order(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    # The change stream keeps the order the pods were written in.
    await cluster.apply(
        [
            make_pod("d"),
            make_pod("b", priority=10),
            make_pod("a", priority=10),
            make_pod("c", priority=100),
        ]
    )
    config = service_config
    async with make_service(config), TopicReader(kafka_bootstrap, topics.schedule) as reader:
        await reader.wait_until(lambda: len(reader.requests()) == 4)
    keys = [r.pod_key for r in reader.requests()]
    assert keys == ["default/c", "default/b", "default/a", "default/d"]
    assert {r.attempt for r in reader.requests()} == {1}


async def test_a_pod_activated_while_an_empty_pop_runs_is_dispatched_at_once(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    """The dispatcher's wake-up is not lost: a pod the informer activates while a pop round
    is out (after Redis answered it: the round comes back empty) is popped by the next
    round, not after dispatch_idle_interval (30 s here). Clearing the wake-up after the
    empty round lost it. One dispatch loop, as in ordered mode (with two, a wake-up was lost
    only when both were out popping)."""
    config = replace(service_config, dispatch_idle_interval=30.0, dispatch_concurrency=1)
    async with (
        make_service(config) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await cluster.apply([make_pod("first")])
        await reader.wait_until(lambda: len(reader.requests()) == 1)
        reads = service.dispatcher.store
        original = reads.tenants_to_pop
        late: list[float] = []

        async def pop_then_activate() -> list[str]:
            tenants: list[str] = await original()
            if not late:  # once: the informer activates a pod before this round is back
                late.append(time.monotonic())
                await cluster.apply([make_pod("late")])
                await wait_for_async(lambda: active(service, "default"), 1, within=10)
                # ... and wakes the dispatcher, as after every batch of events, before the
                # round comes back (the informer is done with its batch meanwhile)
                await wait_for(service.dispatcher.work.is_set, within=10, why="no wake-up")
                await asyncio.sleep(0.5)
            return tenants

        reads.tenants_to_pop = pop_then_activate
        service.dispatcher.work.set()  # a round, as after any batch of events
        await wait_for(lambda: bool(late), within=10, why="no pop round")
        await reader.wait_until(lambda: len(reader.requests()) == 2, within=10)
        assert [r.pod_key for r in reader.requests()] == ["default/first", "default/late"]
        assert time.monotonic() - late[0] < 10


async def test_a_round_that_takes_every_pod_it_could_is_not_followed_by_an_empty_one(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    """A round whose tenants gave fewer pods than asked took all there was: the next round
    waits for a wake-up (an activation, a freed lease) instead of popping at once, which
    found only what was activated meanwhile (under quota admission mostly nothing, for a
    command per known tenant). A full round is still followed
    by another at once: 5 pods, 2 a round, go in rounds of 2, 2 and 1, and no empty one."""
    config = replace(
        service_config, dispatch_idle_interval=30.0, dispatch_concurrency=1, dispatch_batch=2
    )
    async with (
        make_service(config) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        reads = service.dispatcher.store
        asked, popped = reads.tenants_to_pop, reads.pop_batches
        rounds: list[int] = []
        tenants_read = 0

        async def count_rounds() -> list[str]:
            nonlocal tenants_read
            tenants_read += 1
            tenants: list[str] = await asked()
            return tenants

        async def count_pods(*args: Any, **kwargs: Any) -> Any:
            batches = await popped(*args, **kwargs)
            rounds.append(sum(m.count for messages in batches for m in messages))
            return batches

        reads.tenants_to_pop = count_rounds
        reads.pop_batches = count_pods
        await cluster.apply(pods(*[f"p{i}" for i in range(5)]))
        await reader.wait_until(lambda: len(reader.requests()) == 5)
        await _idle_rounds(service)
        assert sum(rounds) == 5
        assert 0 not in rounds
        assert max(rounds) == 2
        assert tenants_read == len(rounds)  # no round found no tenant with pods either


async def _idle_rounds(service: QueueService) -> int:
    """The dispatcher's pop rounds, once it stopped popping (no round for 0.3 s)."""
    rounds = -1
    while rounds != service.metrics["pop_rounds"]:
        rounds = service.metrics["pop_rounds"]
        await asyncio.sleep(0.3)
    return rounds


async def test_a_scheduled_outcome_makes_no_pop_round_and_a_failure_does(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    """A "scheduled" outcome changes nothing the dispatcher could pop (the lease ends when
    the informer sees the binding): no pop round follows it. A failure ends the pod's lease
    (its tenant may dispatch again): a round follows at once, not after
    dispatch_idle_interval (30 s here)."""
    config = replace(service_config, dispatch_idle_interval=30.0, dispatch_concurrency=1)
    async with (
        make_service(config) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await cluster.apply(pods("p"))
        await reader.wait_until(lambda: len(reader.requests()) == 1)
        [first] = reader.requests()
        rounds = await _idle_rounds(service)
        done = outcome(first, "scheduled")
        await produce(kafka_bootstrap, topics.outcomes, [(b"x", done.encode())])
        await wait_for(lambda: service.metrics["outcome_noted"] == 1)
        assert await _idle_rounds(service) == rounds
        failure = outcome(first, plugins=("NodeResourcesFit",), message="0/1 nodes")
        await produce(kafka_bootstrap, topics.outcomes, [(b"y", failure.encode())])
        await wait_for(lambda: service.metrics["outcome_unschedulable"] == 1)
        await wait_for(lambda: service.metrics["pop_rounds"] > rounds, within=5)


async def test_failure_then_node_add_redispatches(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    clock = ManualClock(time.time())
    await cluster.apply(pods("p"))
    async with (
        make_service(service_config, clock) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await reader.wait_until(lambda: len(reader.requests()) == 1)
        [first] = reader.requests()
        failure = outcome(first, plugins=("NodeResourcesFit",), message="0/1 nodes")
        await produce(kafka_bootstrap, topics.outcomes, [(first.uid.encode(), failure.encode())])
        await wait_for(lambda: service.metrics["outcome_unschedulable"] == 1)
        clock.advance(5)
        await cluster.apply([Node(metadata=ObjectMeta(name="n1", namespace=""))])
        await reader.wait_until(lambda: len(reader.requests()) == 2)
        second = reader.requests()[1]
        assert (second.pod_key, second.attempt) == ("default/p", 2)
        done = outcome(second, "scheduled")
        await produce(kafka_bootstrap, topics.outcomes, [(b"x", done.encode())])
        await wait_for(lambda: service.metrics["outcome_noted"] == 1)
        # The outcome is evidence only: the pod leaves the queue once the store holds it bound.
        assert (await service.store.counts())["default"].pending == 1
        stored = await cluster.get_pod("default", "p")
        await cluster.apply([replace(stored, spec=replace(stored.spec, node_name="n1"))])
        await wait_for_async(lambda: pending(service, "default"), 0)


async def test_bad_input_goes_to_the_dlq_and_the_service_keeps_going(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    request = ScheduleBatch(()).encode()
    await produce(
        kafka_bootstrap,
        topics.outcomes,
        [
            (b"k1", b"\x00not msgpack"),
            (b"k2", request),  # a valid message on the wrong topic
        ],
    )
    # A stored pod whose namespace cannot be a tenant key: dead-lettered, nothing else stops.
    [bad] = await cluster.apply(pods("bad", namespace="team{x}"))
    # A tenant no Redis key can carry: refused when decoded, then dead-lettered.
    poison = Outcome("bad{x}", "bad/x", "u", 1, "scheduled").encode()
    await produce(kafka_bootstrap, topics.outcomes, [(b"k4", poison)])
    # A batch record: only its bad item is dead-lettered, alone.
    fine = Outcome("default", "default/gone", "u9", 1, "scheduled").to_body()
    forged = {**fine, "tenant": "bad{y}"}
    await produce(
        kafka_bootstrap, topics.outcomes, [(b"k5", pack_batch("outcomes", [fine, forged]))]
    )
    await cluster.apply(pods("good"))
    async with (
        make_service(service_config) as service,
        TopicReader(kafka_bootstrap, topics.dlq) as dlq,
        TopicReader(kafka_bootstrap, topics.schedule) as schedule_reader,
    ):
        await dlq.wait_until(lambda: len(dlq.values) == 5)
        await schedule_reader.wait_until(lambda: len(schedule_reader.requests()) == 1)
        assert service.metrics["dead_letters"] == 5
    letters = {d.key: d for d in dlq.dead_letters()}
    assert "undecodable msgpack" in letters[b"k1"].error
    assert letters[b"k1"].payload == b"\x00not msgpack"
    assert "of type 'outcome' or 'outcomes', got 'schedule'" in letters[b"k2"].error
    assert letters[b"k4"].error == "field 'tenant': invalid tenant 'bad{x}'"
    assert letters[b"k4"].topic == topics.outcomes
    assert letters[b"k5"].error == "field 'tenant': invalid tenant 'bad{y}'"
    assert Outcome.items_of(letters[b"k5"].payload)[0].body == {**forged, "v": 1, "t": "outcome"}
    bad_tenant = letters[bad.uid.encode()]
    assert bad_tenant.topic == STREAM_TOPIC
    assert bad_tenant.offset == bad.resource_version
    assert "pod team{x}/bad" in bad_tenant.error
    assert "invalid tenant name 'team{x}'" in bad_tenant.error
    assert schedule_reader.requests()[0].pod_key == "default/good"


async def test_restart_mid_stream_loses_and_duplicates_nothing(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    n = 3000
    await cluster.apply(pods(*(f"p{i:04d}" for i in range(n))))
    config = replace(service_config, dispatch_batch=50)
    async with TopicReader(kafka_bootstrap, topics.schedule) as reader:
        async with make_service(config) as first:
            await wait_for(lambda: first.metrics["dispatched"] >= 200)
        # The first replica is gone mid-stream; its state and its informer's cursor are in
        # Redis.
        async with make_service(config) as second:
            await reader.wait_until(lambda: len(reader.requests()) >= n)
            await asyncio.sleep(0.3)
            await reader.poll()
            assert second.metrics["dispatched"] > 0
    counts = Counter(r.pod_key for r in reader.requests())
    assert len(counts) == n
    assert max(counts.values()) == 1


async def test_stopping_mid_stream_publishes_every_pod_it_leased(
    make_service,
    service_config: QueueConfig,
    kafka_bootstrap: str,
    topics: Topics,
    redis_client,
    cluster,
) -> None:
    # Rounds are popped ahead of publishing: a stop must not strand a popped round (one
    # message per pod keeps the dispatcher publishing most of the time).
    n = 3000
    config = replace(service_config, dispatch_batch=100, message_batch=1, lease_seconds=600)
    await cluster.apply(pods(*(f"p{i:04d}" for i in range(n))))
    async with TopicReader(kafka_bootstrap, topics.schedule) as reader:
        async with make_service(config) as service:
            await wait_for(lambda: service.metrics["dispatched"] >= 300)
        leased = (await QueueStore(redis_client, config).counts(["default"]))["default"].inflight
        assert 300 <= leased < n
        assert service.metrics["published"] == service.metrics["dispatched"] == leased
        await reader.wait_until(lambda: len(reader.requests()) >= leased)
        await asyncio.sleep(0.3)
        await reader.poll()
    assert len({r.pod_key for r in reader.requests()}) == len(reader.requests()) == leased


async def test_two_replicas_racing_dispatch_each_pod_once(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    n = 3000
    config = replace(service_config, dispatch_batch=40)
    async with (
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
        make_service(config) as a,
        make_service(config) as b,
    ):
        await cluster.apply(pods(*(f"p{i:04d}" for i in range(n))))
        await reader.wait_until(lambda: len(reader.requests()) >= n)
        await asyncio.sleep(0.3)
        await reader.poll()
        total = a.metrics["dispatched"] + b.metrics["dispatched"]
        # One informer tails the stream; the other stands by.
        assert a.informer is not None
        assert b.informer is not None
        assert sorted([a.informer.leading, b.informer.leading]) == [False, True]
    counts = Counter(r.pod_key for r in reader.requests())
    assert (len(counts), max(counts.values()), total) == (n, 1, n)


async def test_lease_expiry_redispatches_through_the_service(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    config = replace(service_config, lease_seconds=0.3)
    await cluster.apply(pods("p"))
    async with (
        make_service(config) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await reader.wait_until(lambda: len(reader.requests()) == 2)
        first, second = reader.requests()
        assert (second.attempt, second.redispatches) == (2, 1)
        assert second.scheduling_cycle > first.scheduling_cycle
        assert service.metrics["redispatched"] >= 1
        # The worker that lost its lease reports late: stale, nothing changes.
        late = outcome(first, "scheduled")
        await produce(kafka_bootstrap, topics.outcomes, [(b"x", late.encode())])
        await wait_for(lambda: service.metrics["outcome_stale"] == 1)


async def test_tenants_weighted_round_robin_and_inflight_cap(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    config = replace(
        service_config,
        max_inflight_per_tenant=4,
        dispatch_batch=2,
        message_batch=1,
        tenant_weights={"big": 3},
    )
    await cluster.apply(
        [
            *pods(*(f"b{i}" for i in range(10)), namespace="big"),
            *pods(*(f"s{i}" for i in range(10)), namespace="small"),
        ]
    )
    async with (
        make_service(config) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await reader.wait_until(lambda: len(reader.requests()) == 8)
        await asyncio.sleep(0.3)  # the cap holds: nothing more while leases are out
        await reader.poll()
        per_tenant = Counter(r.tenant for r in reader.requests())
        assert per_tenant == {"big": 4, "small": 4}
        done = [outcome(r, "scheduled") for r in reader.requests() if r.tenant == "big"]
        await produce(kafka_bootstrap, topics.outcomes, [(b"x", o.encode()) for o in done])
        await wait_for(lambda: service.metrics["outcome_noted"] == 4)
        for o in done:  # bound, as the binder's binding shows in the store
            stored = await cluster.get_pod("big", o.pod_key.split("/")[1])
            await cluster.apply([replace(stored, spec=replace(stored.spec, node_name="n1"))])
        await reader.wait_until(lambda: len(reader.requests()) == 12)
        assert Counter(r.tenant for r in reader.requests()) == {"big": 8, "small": 4}


async def test_bound_pod_leaves_the_queue_and_other_schedulers_pods_are_ignored(
    make_service, service_config: QueueConfig, cluster
) -> None:
    await cluster.apply([make_pod("gate", gates=["g"]), make_pod("f", scheduler="other")])
    async with make_service(service_config) as service:
        await cluster.apply([make_pod("p")])
        await wait_for(lambda: service.metrics["dispatched"] == 1)
        await cluster.apply([Node(metadata=ObjectMeta(name="n1", namespace=""))])
        await cluster.apply([make_pod("p", node_name="n1")])  # the binding
        await wait_for(lambda: service.metrics["store_events"] == 5)
        view = await service.store.pending()
        assert [(p.key, p.queue) for p in view.pods] == [("default/gate", "gated")]


async def test_a_pod_bound_while_no_informer_followed_it_leaves_the_queue(
    make_service, service_config: QueueConfig, cluster
) -> None:
    """An informer that resumes from its cursor (after a restart, or a Redis outage) meets a
    binding of a pod it never saw pending (an "add" with a node): the pod leaves the queue
    all the same, instead of staying in flight until its lease expires."""
    async with make_service(service_config) as service:
        await cluster.apply([make_pod("p")])
        await wait_for(lambda: service.metrics["dispatched"] == 1)
        assert [p.queue for p in (await service.store.pending()).pods] == ["inflight"]
    await cluster.apply([Node(metadata=ObjectMeta(name="n1", namespace=""))])
    await cluster.apply([make_pod("p", node_name="n1")])  # the binding, while no queue runs
    async with make_service(service_config) as service:
        await wait_for(lambda: service.metrics["store_events"] == 2)
        assert (await service.store.pending()).pods == []


async def test_a_pod_whose_tenant_label_changes_moves_between_tenant_queues(
    make_service, service_config: QueueConfig, cluster
) -> None:
    config = replace(service_config, tenant_label="team", max_inflight_per_tenant=0)
    async with make_service(config) as service:
        await cluster.apply([make_pod("p", gates=["wait"], labels={"team": "red"})])
        await cluster.apply([make_pod("p", gates=["wait"], labels={"team": "blue"})])
        await wait_for(lambda: service.metrics["store_events"] == 2)
        view = await service.store.pending()
    assert [(p.tenant, p.key, p.queue) for p in view.pods] == [("blue", "default/p", "gated")]


async def test_a_deleted_pod_leaves_the_queue(make_service, service_config: QueueConfig, cluster):
    [gated] = await cluster.apply([make_pod("p", gates=["wait"])])
    async with make_service(service_config) as service:
        await wait_for(lambda: service.metrics["store_events"] == 1)
        await cluster.delete("Pod", "default", "p", uid=gated.uid)
        await wait_for(lambda: service.metrics["store_events"] == 2)
        assert (await service.store.pending()).pods == []


async def test_a_trimmed_stream_is_relisted(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    """The stream lost changes the queue never read: the informer relists (stored pods
    queued once, a queued pod the store no longer has deleted) and follows from there."""
    short = ClusterStore(cluster.redis, cluster="c", prefix=cluster.keys.prefix, stream_maxlen=5)
    async with make_service(service_config) as service:
        await wait_for(lambda: service.informer is not None and service.informer.leading)
    # Queued while a replica watched, deleted while none did (the stream then trimmed).
    [gone] = await short.apply([make_pod("gone", gates=["g"])])
    async with make_service(service_config) as service:
        await wait_for(lambda: service.metrics["store_events"] >= 1)
    await short.delete("Pod", "default", "gone", uid=gone.uid)
    # Trimming is approximate (whole stream nodes of 100 entries): enough changes to trim.
    await short.apply(pods(*(f"p{i:03d}" for i in range(300))))
    async with (
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
        make_service(service_config) as service,
    ):
        await reader.wait_until(lambda: len(reader.requests()) >= 300)
        assert service.informer is not None
        assert service.informer.relists == 1
        view = await service.store.pending()
        assert "default/gone" not in {p.key for p in view.pods}
        await short.apply(pods("late"))  # followed after the relist
        await reader.wait_until(lambda: len(reader.requests()) == 301)
    assert Counter(r.pod_key for r in reader.requests()).most_common(1)[0][1] == 1


async def test_a_standby_replica_takes_over_the_stream(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    async with (
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
        make_service(service_config) as standby,
    ):
        async with make_service(service_config) as leader:
            await wait_for(lambda: standby.informer is not None and standby.informer.leading)
            assert leader.informer is not None
            assert not leader.informer.leading
        await cluster.apply(pods("a"))
        await reader.wait_until(lambda: len(reader.requests()) == 1)
        # The leader stopped: its lease is released and the standby takes the stream.
        async with make_service(service_config):
            pass
        await cluster.apply(pods("b"))
        await reader.wait_until(lambda: len(reader.requests()) == 2)
    assert [r.pod_key for r in reader.requests()] == ["default/a", "default/b"]


def test_queue_imports_no_numpy_or_scheduler_code() -> None:
    import subprocess
    import sys

    code = (
        "import sys, services.queue, cli.bench.queue, services.queue.main;"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'numpy'"
        " or m.startswith('services.scheduler')];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_command_line_config() -> None:
    from services.queue.main import _parser, config_from_args
    from shared.runtime.env import StackSettings

    args = _parser().parse_args(
        ["--tenant-label", "team", "--tenant-weight", "a=3", "--max-inflight", "0"]
    )
    settings = StackSettings("redis://x", "x:9092", queue_prefix="q:", topic_suffix="s")
    config = config_from_args(args, settings)
    assert (config.key_prefix, config.topics.schedule) == ("q:", "berth.schedule.s")
    assert (config.tenant_label, config.weight("a"), config.weight("b")) == ("team", 3, 1)
    assert (config.max_inflight_per_tenant, config.initial_backoff_seconds) == (0, 1.0)
    assert config.max_in_unschedulable_seconds == 300.0


async def test_a_gang_member_rejected_for_too_few_siblings_wakes_when_one_joins(
    make_service, service_config: QueueConfig, kafka_bootstrap: str, topics: Topics, cluster
) -> None:
    """Coscheduling's PreFilter rejects a member whose gang has fewer pods than minMember
    (the rest not applied yet): the next member added wakes it (PodGroupMemberAdd), while a
    pod of no gang does not."""
    clock = ManualClock(time.time())
    gang = {POD_GROUP_LABEL: "g"}
    await cluster.apply([make_pod_group("g", 2), make_pod("m0", labels=gang)])
    async with (
        make_service(service_config, clock) as service,
        TopicReader(kafka_bootstrap, topics.schedule) as reader,
    ):
        await reader.wait_until(lambda: len(reader.requests()) == 1)
        [first] = reader.requests()
        failure = outcome(first, plugins=("Coscheduling",), message="too few siblings")
        await produce(kafka_bootstrap, topics.outcomes, [(b"m0", failure.encode())])
        await wait_for(lambda: service.metrics["outcome_unschedulable"] == 1, why=service.metrics)
        clock.advance(5)  # past its backoff: only an event can move it now
        await cluster.apply([make_pod("loner")])
        await reader.wait_until(lambda: len(reader.requests()) == 2)
        await asyncio.sleep(0.3)
        await reader.poll()
        assert [r.pod_key for r in reader.requests()] == ["default/m0", "default/loner"]
        await cluster.apply([make_pod("m1", labels=gang)])
        await reader.wait_until(lambda: len(reader.requests()) == 4)
    woken = {r.pod_key: r.attempt for r in reader.requests()[2:]}
    assert woken == {"default/m0": 2, "default/m1": 1}


async def test_quota_rounds_take_events_together_and_none_is_lost(
    make_service, service_config: QueueConfig, cluster: ClusterStore
) -> None:
    """Events within quota_round_interval of the last round wait for one deferred round; the
    release that comes in that window still admits the pod waiting for it."""
    from dataclasses import replace

    from shared.models import load_manifest_text
    from tests.queue.test_admission import pod as quota_pod
    from tests.queue.test_admission import queues

    await cluster.apply(load_manifest_text(queues(("team-a", "", 1, None, 1))).queue_objects)
    config = replace(service_config, quota_round_interval=1.0)
    async with make_service(config) as service:
        [first] = await cluster.apply([quota_pod("first", "team-a", created=1)])
        await wait_for(lambda: service.metrics["quota_admitted"] == 1)
        rounds, events = service.metrics["quota_rounds"], service.metrics["store_events"]
        await cluster.apply([quota_pod("second", "team-a", created=2)])
        await wait_for(lambda: service.metrics["store_events"] == events + 1)  # its own batch
        await cluster.delete("Pod", "team-a", "first", uid=first.uid)
        await wait_for(lambda: service.metrics["quota_admitted"] == 2)
        # the add and the delete came within the interval: one deferred round took both
        assert service.metrics["quota_rounds"] == rounds + 1
        assert [p.key for p in (await service.store.pending("team-a")).pods] == ["team-a/second"]


async def test_admitted_pods_are_ungated_before_the_reasons_are_worked_out(
    make_service, service_config: QueueConfig, cluster: ClusterStore
) -> None:
    """The reasons pass costs O(backlog) (~100 ms with 15,000 workloads waiting) and the
    quota of a pod admitted in that round is held meanwhile: the pod is ungated first."""
    from dataclasses import replace

    from shared.models import load_manifest_text
    from tests.queue.test_admission import pod as quota_pod
    from tests.queue.test_admission import queues

    await cluster.apply(load_manifest_text(queues(("team-a", "", 1, None, 1))).queue_objects)
    config = replace(service_config, quota_round_interval=0.0, quota_reasons_interval=0.0)
    async with make_service(config) as service:
        admission = service.admission
        assert admission is not None
        explain = admission.explain
        seen: list[tuple[bool, bool]] = []
        """Per reasons pass: is "first" admitted, is it still gated."""

        async def watched(verdict: Any) -> None:
            gated = "team-a/first" in await service.store.quota_waits()
            seen.append(("team-a/first" in admission.admitted, gated))
            await explain(verdict)

        admission.explain = watched
        await cluster.apply([quota_pod("first", "team-a", created=1)])
        await cluster.apply([quota_pod("second", "team-a", created=2)])
        await wait_for(lambda: service.metrics["quota_admitted"] == 1)
        await wait_for(lambda: any(admitted for admitted, _ in seen), why=seen)
        assert [gated for admitted, gated in seen if admitted] == [False] * sum(
            1 for admitted, _ in seen if admitted
        )


async def test_quota_reasons_are_written_on_their_period_and_end_current(
    make_service, service_config: QueueConfig, cluster: ClusterStore
) -> None:
    """A round within quota_reasons_interval of the last reasons writes none (they cost
    O(backlog)); a later round writes them, so a quiet cluster ends with current reasons."""
    from dataclasses import replace

    from shared.models import load_manifest_text
    from tests.queue.test_admission import pod as quota_pod
    from tests.queue.test_admission import queues

    await cluster.apply(load_manifest_text(queues(("team-a", "", 1, None, 1))).queue_objects)
    config = replace(service_config, quota_round_interval=0.0, quota_reasons_interval=1.5)
    async with make_service(config) as service:
        await cluster.apply([quota_pod("first", "team-a", created=1)])
        await wait_for(lambda: service.metrics["quota_admitted"] == 1)
        rounds = service.metrics["quota_rounds"]
        await cluster.apply([quota_pod("second", "team-a", created=2)])
        await wait_for(lambda: service.metrics["quota_rounds"] > rounds)
        waits = await service.store.quota_waits()
        assert waits == {"team-a/second": "waiting for quota"}  # the gate's, for now
        expected = (
            "Waiting for quota in ClusterQueue team-a (position 1 of 1): "
            "insufficient unused quota for cpu in flavor default, 1 more needed"
        )
        for _ in range(60):
            if (await service.store.quota_waits()).get("team-a/second") == expected:
                break
            await asyncio.sleep(0.1)
        assert (await service.store.quota_waits())["team-a/second"] == expected


async def test_wait_for_pods_ready_times_out_and_readmits_in_a_quiet_cluster(
    make_service, service_config: QueueConfig, cluster: ClusterStore
) -> None:
    """No cluster change after the admission: the readiness tick still times the pod out
    (it is never bound here: no scheduler runs) and admits it again after its backoff."""
    from dataclasses import replace

    from services.queue.config import WaitForPodsReady
    from shared.models import load_manifest_text
    from tests.queue.test_admission import pod as quota_pod
    from tests.queue.test_admission import queues

    await cluster.apply(load_manifest_text(queues(("team-a", "", 1, None, 1))).queue_objects)
    policy = WaitForPodsReady(timeout_s=0.3, backoff_base_s=0.5)
    async with make_service(replace(service_config, wait_for_pods_ready=policy)) as service:
        await cluster.apply([quota_pod("slow", "team-a", created=1)])
        await wait_for(lambda: service.metrics["quota_admitted"] == 1)
        events = service.metrics["store_events"]
        assert service.admission is not None
        await wait_for(lambda: service.admission is not None and service.admission.evicted == 1)
        await wait_for(lambda: service.metrics["quota_admitted"] == 2)  # after its backoff
        # the eviction itself is a store change the informer reports; nothing else happened
        assert service.admission.readiness.requeued == {"team-a/slow": 1}
        assert service.metrics["store_events"] - events <= 2


async def test_a_gang_members_own_arrival_is_announced_before_it(
    redis_client, redis_prefix: str, cluster: ClusterStore
) -> None:
    """PodGroupMemberAdd comes before the member's own add: a dispatch between the two steps
    could otherwise pop the member first and count its own arrival as a move request made
    during its attempt (its unschedulable outcome would back off instead of parking)."""
    from services.queue.hints import POD_GROUP_MEMBER_ADD
    from services.queue.informer import PodChange, StoreInformer

    gang = {POD_GROUP_LABEL: "g"}
    await cluster.apply([make_pod_group("g", 2), make_pod("m0", labels=gang), make_pod("solo")])

    async def ignore(*_: object) -> None:
        return None

    informer = StoreInformer(
        redis_client, cluster, key_prefix=redis_prefix, replica_id="r", handle=ignore, relist=ignore
    )
    stop = asyncio.Event()
    async for batch in cluster.follow_batches(0, stop=stop, raw_kinds=frozenset({"Pod"})):
        events = informer.events(batch)
        stop.set()
    named = [
        e.pod.key if isinstance(e, PodChange) else e.label
        for e in events
        if e is POD_GROUP_MEMBER_ADD or isinstance(e, PodChange)
    ]
    assert named == ["PodGroupMemberAdd", "default/m0", "default/solo"]


@pytest.mark.parametrize(
    ("op", "node", "brings"),
    [
        ("add", "", True),  # a pending pod: work now
        ("update", "", True),
        ("update", "n1", False),  # a binding: the informer may linger for more
        ("delete", "", False),  # a pending pod gone: nothing to let in
        ("delete", "n1", True),  # a placed pod gone: its room and quota let others in
    ],
)
def test_the_informer_lingers_only_after_batches_that_bring_no_work(
    op: str, node: str, brings: bool
) -> None:
    from services.queue.informer import PodChange, brings_work
    from services.queue.records import PodRecord

    record = replace(PodRecord.from_pod(make_pod("p")), node_name=node)
    assert brings_work([PodChange(op, record)]) is brings  # type: ignore[arg-type]
