"""PodRecord.from_stored (the informer's path: a record from a change-stream entry's bytes,
without building the Pod) gives exactly PodRecord.from_pod of the decoded, decorated pod."""

from __future__ import annotations

import random
from dataclasses import fields

import pytest

from services.queue.records import PodRecord
from shared.messaging.wire import MessageError
from shared.models import Pod
from shared.models.codec import decode, encode
from tests.builders import PodBuilder, make_pod

LABEL_KEYS = ("app", "team", "tier", "scheduling.x-k8s.io/pod-group")


def _random_pod(rng: random.Random, i: int) -> PodBuilder:
    pod = make_pod(f"p{i}").namespace(rng.choice(("default", "team-a", "x")))
    for key in rng.sample(LABEL_KEYS, rng.randint(0, len(LABEL_KEYS))):
        pod = pod.label(key, rng.choice(("a", "b", "web")))
    if rng.random() < 0.7:
        pod = pod.req(cpu=f"{rng.randint(1, 4000)}m", memory=f"{rng.randint(1, 900)}Mi")
    if rng.random() < 0.3:
        pod = pod.priority(rng.randint(-10, 1_000_000))
    if rng.random() < 0.2:
        pod = pod.scheduling_gates(*rng.sample(("g1", "g2", "g3"), rng.randint(1, 3)))
    if rng.random() < 0.2:
        pod = pod.scheduler_name(rng.choice(("default-scheduler", "batch")))
    if rng.random() < 0.3:
        pod = pod.pod_affinity_in("app", ["web"], "kubernetes.io/hostname")
    if rng.random() < 0.2:
        pod = pod.host_port(rng.randint(1, 65535))
    if rng.random() < 0.2:
        pod = pod.toleration("k", "v")
    if rng.random() < 0.2:
        pod = pod.phase("Pending")
    return pod


def _stored_and_decorated(rng: random.Random, i: int) -> tuple[bytes, int, str, str, str, Pod]:
    """What apply stored (the pod as a client sent it) and the pod the store serves."""
    sent = _random_pod(rng, i).obj()
    if rng.random() < 0.5:
        sent.metadata.resource_version = rng.randint(1, 50)  # a client's stale copy
    stored = encode(sent)
    rv = rng.randint(1, 10**9) if rng.random() < 0.95 else 0
    uid = sent.metadata.uid if rng.random() < 0.5 else f"uid-{i}"
    node = rng.choice(("", "", "n1"))
    nominated = rng.choice(("", "", "n2"))
    served = decode(stored)
    assert isinstance(served, Pod)
    served.metadata.resource_version, served.metadata.uid = rv, uid
    served.spec.node_name, served.status.nominated_node_name = node, nominated
    return stored, rv, uid, node, nominated, served


def test_from_stored_equals_from_pod_over_random_pods() -> None:
    rng = random.Random(20261125)
    for i in range(1500):
        stored, rv, uid, node, nominated, served = _stored_and_decorated(rng, i)
        fast = PodRecord.from_stored(stored, rv, uid, node, nominated)
        full = PodRecord.from_pod(served)
        for f in fields(PodRecord):
            assert getattr(fast, f.name) == getattr(full, f.name), (i, f.name)
        assert fast.pod() == served


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x00garbage", id="not-msgpack"),
        pytest.param(encode(make_pod("n").obj())[:-3], id="truncated"),
    ],
)
def test_bytes_that_are_not_a_pod_are_a_message_error(data: bytes) -> None:
    with pytest.raises(MessageError, match="stored pod"):
        PodRecord.from_stored(data, 1, "u", "", "")


def test_a_node_stored_as_a_pod_is_refused() -> None:
    from tests.builders import make_node

    with pytest.raises(MessageError, match="body is a Node"):
        PodRecord.from_stored(encode(make_node("n").obj()), 1, "u", "", "")
