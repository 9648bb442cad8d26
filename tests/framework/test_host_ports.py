"""One definition of a pod's host ports (`pod_host_ports`, and `host_ports` as HostPort records),
shared by NodeColumns, preemption's scratch copy, NodePorts, the binder's charge and the audit
(upstream schedutil.GetHostPorts)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from scheduling.cache.counts import on_node as with_node_name
from scheduling.framework.columns import NodeColumns, PortKey, UsedPorts, pod_host_ports
from scheduling.plugins.defaultpreemption import Scratch
from scheduling.plugins.nodeports.node_ports import conflicting_rows
from shared.models import Container, ContainerPort, HostPort, Pod, host_ports
from tests.builders import make_node, make_pod


def with_init(pod: Pod, ports: list[ContainerPort], *, sidecar: bool) -> Pod:
    restart = "Always" if sidecar else ""
    pod.spec.init_containers.append(Container(name="init", ports=ports, restart_policy=restart))
    return pod


CASES = [
    pytest.param(make_pod("p").req(cpu="1").obj(), [], id="no-ports"),
    pytest.param(make_pod("p").container_port(8080).obj(), [], id="container-port-only"),
    pytest.param(
        make_pod("p").host_port(80).host_port(53, "UDP", "10.0.0.1").obj(),
        [(("TCP", 80), "0.0.0.0"), (("UDP", 53), "10.0.0.1")],
        id="protocol-and-ip",
    ),
    pytest.param(
        make_pod("p").host_port(80, protocol="").obj(),
        [(("TCP", 80), "0.0.0.0")],
        id="empty-protocol-is-tcp",
    ),
    pytest.param(
        with_init(
            make_pod("p").host_port(8001).obj(), [ContainerPort(host_port=9002)], sidecar=True
        ),
        [(("TCP", 9002), "0.0.0.0"), (("TCP", 8001), "0.0.0.0")],
        id="sidecars-first",
    ),
    pytest.param(
        with_init(
            make_pod("p").host_port(8001).obj(), [ContainerPort(host_port=9002)], sidecar=False
        ),
        [(("TCP", 8001), "0.0.0.0")],
        id="plain-init-containers-do-not-count",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), CASES)
def test_pod_host_ports(pod: Pod, expected: list[tuple[PortKey, str]]) -> None:
    assert pod_host_ports(pod) == expected
    assert host_ports(pod) == tuple(HostPort(p, port, ip) for (p, port), ip in expected)


@pytest.mark.parametrize(("pod", "expected"), CASES)
def test_columns_and_the_scratch_copy_record_the_same_ports(
    pod: Pod, expected: list[tuple[PortKey, str]]
) -> None:
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()
    want: UsedPorts = {}
    for key, ip in expected:
        want.setdefault(key, {0: Counter()})[0][ip] += 1

    bound = with_node_name(pod, "n1")
    columns = NodeColumns([node], [bound])
    base = NodeColumns([node])
    scratch = Scratch(base)
    scratch.add_pod(0, pod)
    assert columns.used_ports == want
    assert scratch.columns.used_ports == want
    assert base.used_ports == {}  # the scratch copy never writes its base

    columns.remove_pod(bound)
    scratch.remove_added(0, pod)
    assert columns.used_ports == {}
    assert scratch.columns.used_ports == {}


def test_a_port_two_pods_share_stays_used_until_both_leave() -> None:
    """Two running pods holding the same host port (placed around the scheduler): removing one
    leaves the port used, as the reserve script's counters do. A set of IPs freed it, and the
    worker proposed the node to a third pod forever, every attempt a conflict."""
    node = make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()
    first = make_pod("a").uid("a").host_port(9100).node("n1").obj()
    second = make_pod("b").uid("b").namespace("other").host_port(9100).node("n1").obj()
    columns = NodeColumns([node], [first, second])
    assert columns.used_ports == {("TCP", 9100): {0: Counter({"0.0.0.0": 2})}}
    columns.remove_pod(first)
    assert columns.used_ports == {("TCP", 9100): {0: Counter({"0.0.0.0": 1})}}
    wanted = HostPort("TCP", 9100, "0.0.0.0")
    assert conflicting_rows(columns, wanted).tolist() == [0]
    columns.remove_pod(second)
    assert columns.used_ports == {}
    assert conflicting_rows(columns, wanted).tolist() == []


def test_the_columnar_check_agrees_with_host_port_conflicts() -> None:
    """NodePorts' columnar lookup (NodeColumns.used_ports) and HostPort.conflicts, the check
    the audit and the store's usage use, give the same rows over random ports and IPs."""
    rng = random.Random(7)
    protocols, ports, ips = ["TCP", "UDP", ""], [80, 81], ["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]
    for _ in range(200):
        nodes = [make_node(f"n{i}").capacity(pods=50).obj() for i in range(4)]
        pods = []
        for i in range(rng.randint(0, 6)):
            pod = make_pod(f"p{i}").uid(f"p{i}").node(f"n{rng.randrange(4)}")
            for _ in range(rng.randint(1, 2)):
                pod.host_port(rng.choice(ports), rng.choice(protocols), rng.choice(ips))
            pods.append(pod.obj())
        columns = NodeColumns(nodes, pods)
        wanted = host_ports(
            make_pod("w").host_port(rng.choice(ports), rng.choice(protocols), rng.choice(ips)).obj()
        )[0]
        expected = sorted(
            {
                columns.index[pod.spec.node_name]
                for pod in pods
                for used in host_ports(pod)
                if wanted.conflicts(used)
            }
        )
        assert sorted(conflicting_rows(columns, wanted).tolist()) == expected
