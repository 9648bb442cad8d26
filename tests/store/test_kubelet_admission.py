"""A pod bound by name in a user's write must fit what its node has left, as its kubelet
would admit it (issue 19): the store checks it atomically in the apply script (resources,
pod slots, host ports, counting the pods of the same batch), and scheduling.kubelet checks
labels and NoExecute taints. Drivers of simulated clusters (kubelet=False) keep writing
running pods as they are."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.kubelet import kubelet_refusal
from shared.models import Node, Pod, Taint, Toleration
from shared.store import ApplyRejectedError, ClusterStore
from tests.builders import make_node, make_pod


def small_node(pods: int = 3) -> Node:
    return make_node("n1").capacity(cpu="4", memory="8Gi", pods=pods).label("pool", "a").obj()


@dataclass(frozen=True)
class Case:
    name: str
    running: tuple[Pod, ...]
    applied: tuple[Pod, ...]
    refusal: str = ""


CASES = [
    Case(
        "fits",
        (make_pod("a").req(cpu="2").node("n1").obj(),),
        (make_pod("b").req(cpu="2").node("n1").obj(),),
    ),
    Case(
        "out-of-cpu",
        (make_pod("a").req(cpu="2").node("n1").obj(),),
        (make_pod("b").req(cpu="3").node("n1").obj(),),
        "Pod default/b: spec.nodeName: OutOfcpu: Node didn't have enough resource: cpu, "
        "requested: 3000, used: 2000, capacity: 4000",
    ),
    Case(
        "out-of-cpu-within-one-apply",
        (),
        (
            make_pod("b").req(cpu="3").node("n1").obj(),
            make_pod("c").req(cpu="3").node("n1").obj(),
        ),
        "Pod default/c: spec.nodeName: OutOfcpu",
    ),
    Case(
        "out-of-pods",
        tuple(make_pod(f"r{i}").node("n1").obj() for i in range(3)),
        (make_pod("b").node("n1").obj(),),
        "OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3",
    ),
    Case(
        "host-port-taken",
        (make_pod("a").host_port(8080).node("n1").obj(),),
        (make_pod("b").host_port(8080).node("n1").obj(),),
        "NodePorts: node(s) didn't have free ports",
    ),
    Case(
        "extended-resource-the-node-lacks",
        (),
        (make_pod("b").req({"nvidia.com/gpu": "1"}).node("n1").obj(),),
        "OutOfnvidia.com/gpu",
    ),
    Case(
        "unknown-node",
        (),
        (make_pod("b").node("nowhere").obj(),),
        'spec.nodeName: node "nowhere" not found',
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_the_room_on_the_node(store: ClusterStore, case: Case) -> None:
    await store.apply([small_node(), *case.running])
    before = (await store.resource_version(), await store.usage("n1"))
    if not case.refusal:
        await store.apply(case.applied, kubelet=True)
        assert (await store.usage("n1")).pods == len(case.running) + len(case.applied)
        return
    with pytest.raises(ApplyRejectedError) as caught:
        await store.apply(case.applied, kubelet=True)
    assert case.refusal in str(caught.value)
    assert (await store.resource_version(), await store.usage("n1")) == before
    # A driver of a simulated cluster writes running pods as they are.
    if case.name != "unknown-node":
        await store.apply(case.applied)
        assert (await store.usage("n1")).pods == len(case.running) + len(case.applied)


def test_labels_and_no_execute_taints() -> None:
    node = small_node()
    node.spec.taints = [
        Taint(key="dedicated", value="gpu", effect="NoExecute"),
        Taint(key="soft", value="x", effect="NoSchedule"),  # the kubelet does not check these
    ]
    plain = make_pod("p").node("n1").obj()
    assert kubelet_refusal(plain, node) == ("Taint: node(s) had untolerated taint {dedicated: gpu}")
    plain.spec.tolerations = [Toleration(key="dedicated", operator="Exists")]
    assert kubelet_refusal(plain, node) == ""
    elsewhere = make_pod("q").node("n1").obj()
    elsewhere.spec.node_selector = {"pool": "b"}
    elsewhere.spec.tolerations = [Toleration(operator="Exists")]
    assert kubelet_refusal(elsewhere, node).startswith("NodeAffinity: ")
    elsewhere.spec.node_selector = {"pool": "a"}
    assert kubelet_refusal(elsewhere, node) == ""
