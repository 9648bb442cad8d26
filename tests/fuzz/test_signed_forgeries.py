"""Forged messages of every kind against a running stack (issue 19): a peer on the network
without the keys, a component sending a kind it may not send, another stack's keys. Every one
goes to the dead-letter topic as unauthenticated before anything reads it, and nothing in the
store changes. (Well-formed messages signed with the right keys, mutated, are in
test_messages_fuzz.py; a justified-or-not preemption in tests/binder.)"""

from __future__ import annotations

from cli.run import pipeline
from cli.servers import DevServers
from shared.messaging.kafka import Topics
from shared.messaging.message_auth import MessageKeys, Signer, topic_roles
from shared.messaging.messages import Outcome, ScheduleBatch, ScheduleRequest
from shared.messaging.proposals import Proposal, Victim
from shared.models import Manifests, Pod
from tests.builders import make_node, make_pod
from tests.queue.kafka_helpers import TopicReader, produce

HOST = "kubernetes.io/hostname"


async def test_unauthenticated_messages_change_nothing(dev_servers: DevServers) -> None:
    nodes = [
        make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).label(HOST, f"n{i}").obj()
        for i in range(2)
    ]
    running = [make_pod(f"run-{i}").priority(0).req(cpu="3").node(f"n{i}").obj() for i in range(2)]
    waiting = make_pod("waiting").priority(1000).req(cpu="8").obj()  # fits nowhere
    async with pipeline(workers=1, binders=1, servers=dev_servers) as run:
        await run.apply(Manifests(nodes=nodes, pods=[*running, waiting]))
        assert await run.settle(60)
        settings = run.client.settings
        topics: Topics = settings.topics
        keys = settings.kafka_security.keys()
        assert keys is not None
        roles = topic_roles(topics)
        uid = waiting.metadata.uid
        rows = {row.name: row for row in await run.client.pod_rows()}
        attempt = rows["waiting"].attempts
        before = await run.client.store.resource_version()

        # What each forger has: nothing, another stack's keys, or a key of the wrong kind.
        nobody = None
        stranger = Signer(MessageKeys.generate(), "binder", roles)
        worker = Signer(keys, "scheduler", roles)
        queue = Signer(keys, "queue", roles)
        binder = Signer(keys, "binder", roles)
        victim = Victim(running[0].key, running[0].metadata.uid)
        preempt = Proposal(
            "default", waiting.key, uid, attempt, "n0", kind="preempt", victims=(victim,)
        ).encode()
        bound = Outcome("default", waiting.key, uid, attempt, "scheduled", node_name="n0").encode()
        dispatch = ScheduleBatch(
            (ScheduleRequest("default", waiting.key, uid, attempt + 1, 1, 1000, 1.0, 1.0, 2.0),)
        ).encode()
        forgeries = [
            (topics.proposals, preempt, nobody),
            (topics.proposals, preempt, stranger),
            (topics.proposals, preempt, binder),  # binders do not propose
            (topics.outcomes, bound, nobody),
            (topics.outcomes, bound, stranger),
            (topics.outcomes, bound, queue),  # the queue does not report outcomes
            (topics.schedule, dispatch, nobody),
            (topics.schedule, dispatch, worker),  # workers do not dispatch
        ]
        for topic, value, signer in forgeries:
            await produce(settings.kafka_bootstrap, topic, [(b"forged", value)], signer)
        async with TopicReader(settings.kafka_bootstrap, topics.dlq) as dlq:
            await dlq.wait_until(lambda: len(dlq.values) >= len(forgeries), within=30)
            letters = dlq.dead_letters()

        assert await run.client.store.resource_version() == before, "the store changed"
        pods = {p.metadata.name: p for p in await run.client.store.list("Pod")}
        assert all(isinstance(p, Pod) for p in pods.values())
        assert {"run-0", "run-1", "waiting"} <= set(pods)
        rows = {row.name: row for row in await run.client.pod_rows()}
        assert (rows["waiting"].status, rows["waiting"].node) == ("Pending", "")

        # the stack still schedules
        await run.apply(Manifests(pods=[make_pod("after").req(cpu="1").obj()]))
        assert await run.settle(60)
        after = await run.client.store.get_pod("default", "after")
        assert after is not None
        assert after.spec.node_name

    assert len(letters) == len(forgeries)
    assert all(letter.error.startswith("unauthenticated") for letter in letters)
    by_topic = {letter.topic for letter in letters}
    assert by_topic == {topics.proposals, topics.outcomes, topics.schedule}
    reasons = " | ".join(letter.error for letter in letters)
    assert "may not send" in reasons
    assert "no berth-auth header" in reasons
    assert "unknown key" in reasons
