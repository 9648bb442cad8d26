"""Malformed and forged messages on every topic of a running stack (real Redis, broker and
service processes): 500+ per topic, mutations of valid messages (truncated, retyped, huge
numbers, unknown versions, missing fields, forged victims and attempts, random bytes).

Afterwards: no service died or logged a traceback, every running pod is still there, nothing
was bound by a forged message, the rejects are in the dead-letter topic with a reason, and the
stack still schedules new pods."""

from __future__ import annotations

import os
import random
from typing import Any

import msgpack

from cli.run import pipeline
from cli.servers import DevServers
from shared.messaging.message_auth import Signer, topic_roles
from shared.messaging.messages import Outcome, ScheduleBatch, ScheduleRequest
from shared.messaging.proposals import Proposal, Victim
from shared.models import Manifests, Pod
from tests.builders import make_node, make_pod
from tests.queue.kafka_helpers import TopicReader, produce

PER_TOPIC = int(os.environ.get("BERTH_FUZZ_MESSAGES", "500"))
HOST = "kubernetes.io/hostname"


def _mutate_body(rng: random.Random, body: dict[str, Any]) -> Any:
    body = dict(body)
    key = rng.choice(sorted(body))
    action = rng.random()
    if action < 0.2:
        del body[key]
    elif action < 0.7:
        body[key] = rng.choice(
            [
                None,
                "",
                -1,
                2**64 - 1,
                -(2**63),
                1.5,
                True,
                [],
                {},
                "x" * 5000,
                "bad{tenant}",
                "no-slash",
                "a/b/c",
                "Ns/Name",
                b"\x00\xff",
                [{"key": 1}],
            ]
        )
    elif action < 0.8:
        body["v"] = rng.choice([0, 2, 99, "1", None])
    elif action < 0.9:
        body["t"] = rng.choice(["outcome", "proposal", "schedule", "pod", "dlq", "nope", 5])
    else:
        body[f"extra{rng.randint(0, 9)}"] = rng.random()
    return body


def _mutated(rng: random.Random, valid: bytes) -> bytes:
    action = rng.random()
    if action < 0.15:
        return valid[: rng.randrange(len(valid))]
    if action < 0.25:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    if action < 0.3:
        return b""
    body = msgpack.unpackb(valid, raw=False)
    if isinstance(body, dict) and body.get("t") == "schedule" and rng.random() < 0.5:
        body["requests"] = [_mutate_body(rng, body["requests"][0])]
        packed: bytes = msgpack.packb(body, use_bin_type=True)
        return packed
    packed = msgpack.packb(_mutate_body(rng, body), use_bin_type=True)
    return packed


async def test_malformed_and_forged_messages_take_nothing_down(dev_servers: DevServers) -> None:
    rng = random.Random(20261124)
    nodes = [
        make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).label(HOST, f"n{i}").obj()
        for i in range(3)
    ]
    running = [
        make_pod(f"run-{i}").priority(0).req(cpu="1").node(f"n{i % 3}").obj() for i in range(3)
    ]
    pending = make_pod("waiting").priority(1000).req(cpu="8").obj()  # fits nowhere
    async with pipeline(workers=1, binders=1, servers=dev_servers) as run:
        await run.apply(Manifests(nodes=nodes, pods=[*running, pending]))
        assert await run.settle(60)
        topics = run.client.settings.topics
        uid = pending.metadata.uid
        victim = Victim(running[0].key, running[0].metadata.uid)
        valid: dict[str, bytes] = {
            topics.schedule: ScheduleBatch(
                (ScheduleRequest("default", pending.key, uid, 7, 1, 1000, 1.0, 1.0, 2.0),)
            ).encode(),
            topics.proposals: Proposal(
                "default", pending.key, uid, 99, "n0", kind="preempt", victims=(victim,)
            ).encode(),
            topics.outcomes: Outcome(
                "default", pending.key, uid, 99, "scheduled", node_name="n0"
            ).encode(),
        }
        # Signed with the keys of the component allowed to send each kind (an insider, or a
        # bug): the decoders and the checks behind the authenticator get every mutation.
        keys = run.client.settings.kafka_security.keys()
        assert keys is not None, "a stack berth starts authenticates its messages"
        senders = {topics.schedule: "queue", topics.proposals: "scheduler"}
        sent = 0
        for topic, message in valid.items():
            signer = Signer(keys, senders.get(topic, "binder"), topic_roles(topics))
            batch = [(f"k{i}".encode(), _mutated(rng, message)) for i in range(PER_TOPIC)]
            batch.append((b"forged", message))  # well-formed but forged or stale: not obeyed
            await produce(run.client.settings.kafka_bootstrap, topic, batch, signer)
            sent += len(batch)
        # The stack still schedules: a new pod binds.
        await run.apply(Manifests(pods=[make_pod("after").req(cpu="1").obj()]))
        assert await run.settle(60)
        pods = [p for p in await run.client.store.list("Pod") if isinstance(p, Pod)]
        stored = {p.metadata.name: p for p in pods}
        async with TopicReader(run.client.settings.kafka_bootstrap, topics.dlq) as dlq:
            await dlq.wait_until(lambda: len(dlq.values) >= PER_TOPIC, within=30)
            letters = dlq.dead_letters()
        logs = {name: process.log_tail(2_000_000) for name, process in run.stack.processes.items()}
        restarts = {name: process.restarts for name, process in run.stack.processes.items()}
    assert restarts == dict.fromkeys(restarts, 0)
    assert {name: "Traceback" in text for name, text in logs.items()} == dict.fromkeys(logs, False)
    assert {f"run-{i}" for i in range(3)} <= set(stored)  # the forged preemption deleted nothing
    assert stored["waiting"].spec.node_name == ""  # the forged outcome bound nothing
    assert stored["after"].spec.node_name != ""
    assert all(letter.error for letter in letters)
    dead_lettered = {letter.topic for letter in letters}
    assert dead_lettered >= {topics.schedule, topics.proposals, topics.outcomes}
    assert len(letters) >= PER_TOPIC  # most mutations cannot be used at all
    refused = [x for x in letters if x.topic == topics.proposals and x.error.startswith("refused")]
    assert refused, "the forged preemption was not refused"
