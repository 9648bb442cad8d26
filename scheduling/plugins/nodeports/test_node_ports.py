"""NodePorts: upstream node_ports_test.go (facts only), status codes, sidecar ports."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterResult
from scheduling.framework.status import Code, Status
from scheduling.plugins.nodeports import ERR_REASON, new
from shared.models import Container, ContainerPort, HostPort, Pod, host_ports
from tests.builders import make_node, make_pod

CONFLICT = Status(Code.UNSCHEDULABLE, (ERR_REASON,), "NodePorts")


def port_pod(node: str, *specs: str) -> Pod:
    """One container with ports "PROTOCOL/HOSTIP/HOSTPORT", as upstream's newPod."""
    ports = []
    for spec in specs:
        protocol, host_ip, host_port = spec.split("/")
        ports.append(ContainerPort(host_ip=host_ip, host_port=int(host_port), protocol=protocol))
    pod = make_pod(f"pod-{node}-{'-'.join(specs)}").node(node).obj()
    pod.spec.containers.append(Container(name="c", ports=ports))
    return pod


def filter_rows(pod: Pod, nodes: NodeColumns) -> list[Status | None] | Status:
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, nodes)
    if not status.is_success():
        return status
    result = plugin.filter(state, pod, nodes, ALL_ROWS)
    if result is None:
        return [None] * len(nodes)
    assert isinstance(result, FilterResult)
    out: list[Status | None] = [None] * len(nodes)
    for failure, mask in result.failures:
        for i in np.flatnonzero(mask).tolist():
            out[i] = failure
    assert [s is None for s in out] == result.ok.tolist()
    return out


@pytest.mark.parametrize(
    ("wanted", "used", "want"),
    [
        pytest.param(("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/9090",), None, id="other-port"),
        pytest.param(
            ("UDP/127.0.0.1/8080",), ("UDP/127.0.0.1/8080",), CONFLICT, id="same-udp-port"
        ),
        pytest.param(
            ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), CONFLICT, id="same-tcp-port"
        ),
        pytest.param(
            ("TCP/127.0.0.1/8080",), ("TCP/127.0.0.2/8080",), None, id="different-host-ip"
        ),
        pytest.param(
            ("UDP/127.0.0.1/8080",), ("TCP/127.0.0.1/8080",), None, id="different-protocol"
        ),
        pytest.param(
            ("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
            ("UDP/127.0.0.1/8080",),
            CONFLICT,
            id="second-udp-port-conflict",
        ),
        pytest.param(
            ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
            ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
            CONFLICT,
            id="first-tcp-port-conflict",
        ),
        pytest.param(
            ("TCP/0.0.0.0/8001",),
            ("TCP/127.0.0.1/8001",),
            CONFLICT,
            id="wanted-0.0.0.0-hits-any-ip",
        ),
        pytest.param(
            ("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
            ("TCP/127.0.0.1/8001",),
            CONFLICT,
            id="tcp-conflict-due-to-wanted-0.0.0.0",
        ),
        pytest.param(
            ("TCP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), CONFLICT, id="used-0.0.0.0-hits-any-ip"
        ),
        pytest.param(
            ("UDP/127.0.0.1/8001",), ("TCP/0.0.0.0/8001",), None, id="0.0.0.0-other-protocol"
        ),
        pytest.param(
            ("UDP/127.0.0.1/8001",),
            ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"),
            CONFLICT,
            id="udp-conflict-due-to-used-0.0.0.0",
        ),
        pytest.param(
            ("TCP//8001",), ("TCP/127.0.0.1/8001",), CONFLICT, id="empty-host-ip-is-0.0.0.0"
        ),
        pytest.param(
            ("/127.0.0.1/8001",), ("TCP/127.0.0.1/8001",), CONFLICT, id="empty-protocol-is-tcp"
        ),
    ],
)
def test_node_ports(wanted: tuple[str, ...], used: tuple[str, ...], want: Status | None) -> None:
    nodes = NodeColumns([make_node("m1").obj()], [port_pod("m1", *used)])
    assert filter_rows(port_pod("", *wanted), nodes) == [want]


def test_pod_without_host_ports_skips_the_filter() -> None:
    pod = make_pod().container_port(8080).obj()
    assert filter_rows(pod, NodeColumns([make_node("m1").obj()])) == Status(Code.SKIP)


def test_filter_without_pre_filter_is_an_error() -> None:
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    got = plugin.filter(CycleState(), make_pod().obj(), NodeColumns([make_node().obj()]), ALL_ROWS)
    assert got == Status(
        Code.ERROR, ('error reading "PreFilterNodePorts" from cycleState: not found',), "NodePorts"
    )


def test_host_ports_include_sidecars_not_plain_init_containers() -> None:
    pod = make_pod().host_port(8001).obj()
    pod.spec.init_containers = [
        Container(name="init", ports=[ContainerPort(host_port=9001)]),
        Container(name="sidecar", restart_policy="Always", ports=[ContainerPort(host_port=9002)]),
    ]
    pod.spec.containers.append(
        Container(name="no-host-port", ports=[ContainerPort(container_port=80)])
    )
    assert host_ports(pod) == (HostPort("TCP", 9002, "0.0.0.0"), HostPort("TCP", 8001, "0.0.0.0"))


def test_sidecar_port_conflicts() -> None:
    nodes = NodeColumns([make_node("m1").obj()], [port_pod("m1", "TCP/0.0.0.0/9002")])
    pod = make_pod().obj()
    pod.spec.init_containers = [
        Container(name="sidecar", restart_policy="Always", ports=[ContainerPort(host_port=9002)])
    ]
    assert filter_rows(pod, nodes) == [CONFLICT]


def test_every_row_in_one_call() -> None:
    names = ["free", "tcp-8080", "udp-8080", "ip-8080", "all-8080", "free-too"]
    used = [
        port_pod("tcp-8080", "TCP/0.0.0.0/8080"),
        port_pod("udp-8080", "UDP/0.0.0.0/8080"),
        port_pod("ip-8080", "TCP/10.0.0.1/8080"),
        port_pod("all-8080", "TCP/10.0.0.2/8080", "TCP/0.0.0.0/8080"),
    ]
    nodes = NodeColumns([make_node(n).obj() for n in names], used)
    got = filter_rows(port_pod("", "TCP/10.0.0.9/8080"), nodes)
    assert isinstance(got, list)
    assert dict(zip(nodes.names, got, strict=True)) == {
        "free": None,
        "tcp-8080": CONFLICT,
        "udp-8080": None,
        "ip-8080": None,
        "all-8080": CONFLICT,
        "free-too": None,
    }
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    state = CycleState()
    pod = port_pod("", "TCP/10.0.0.9/8080")
    plugin.pre_filter(state, pod, nodes)
    rows = np.array([nodes.index["all-8080"], nodes.index["free"]], dtype=np.intp)
    result = plugin.filter(state, pod, nodes, rows)
    assert isinstance(result, FilterResult)
    assert result.ok.tolist() == [False, True]


def test_bound_sidecar_ports_are_used() -> None:
    """NodeColumns counts bound pods' sidecar host ports too (upstream NodeInfo.UsedPorts)."""
    bound = make_pod("bound").node("m1").obj()
    bound.spec.init_containers = [
        Container(name="sidecar", restart_policy="Always", ports=[ContainerPort(host_port=9003)]),
        Container(name="init", ports=[ContainerPort(host_port=9004)]),
    ]
    nodes = NodeColumns([make_node("m1").obj()], [bound])
    assert filter_rows(port_pod("", "TCP/0.0.0.0/9003"), nodes) == [CONFLICT]
    assert filter_rows(port_pod("", "TCP/0.0.0.0/9004"), nodes) == [None]
