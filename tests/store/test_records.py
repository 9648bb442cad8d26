"""What the scripts read about pods and nodes, computed in Python (no Redis)."""

from __future__ import annotations

import pytest

from shared.models import POD_GROUP_LABEL, HostPort, Toleration, host_ports, pod_group_key
from shared.store import NodeUsage, PodCharge, StoreKeys
from shared.store.keys import InvalidNameError, object_key
from shared.store.records import node_facts, tolerations_wire
from tests.builders import make_node, make_pod


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod("p").obj(), PodCharge({}, ()), id="empty"),
        pytest.param(
            make_pod("p").req(cpu="500m", memory="1Gi").req(cpu="1").obj(),
            PodCharge({"cpu": 1500, "memory": 1024**3}),
            id="containers-summed",
        ),
        pytest.param(
            make_pod("p").req(cpu="1").init_req(cpu="3").obj(),
            PodCharge({"cpu": 3000}),
            id="init-container-max",
        ),
        pytest.param(
            make_pod("p").req(cpu="0").obj(),
            PodCharge({}),
            id="zero-requests-dropped",
        ),
        pytest.param(
            make_pod("p").host_port(80).host_port(53, "UDP", "10.0.0.1").obj(),
            PodCharge({}, (HostPort("TCP", 80, "0.0.0.0"), HostPort("UDP", 53, "10.0.0.1"))),
            id="host-ports-sanitized",
        ),
    ],
)
def test_pod_charge(pod, want):
    assert PodCharge.of(pod) == want


def test_sidecar_host_ports_come_first():
    pod = make_pod("p").host_port(80).obj()
    sidecar = make_pod("s").host_port(90).obj().spec.containers[0]
    sidecar.restart_policy = "Always"
    pod.spec.init_containers.append(sidecar)
    assert [p.port for p in host_ports(pod)] == [90, 80]


def _hp(protocol: str, port: int, ip: str = "0.0.0.0") -> HostPort:
    return HostPort(protocol, port, ip)


@pytest.mark.parametrize(
    ("a", "b", "conflict"),
    [
        pytest.param(_hp("TCP", 80), _hp("TCP", 80, "1.2.3.4"), True, id="any"),
        pytest.param(_hp("TCP", 80, "1.2.3.4"), _hp("TCP", 80, "1.2.3.4"), True, id="same"),
        pytest.param(_hp("TCP", 80, "1.2.3.4"), _hp("TCP", 80, "1.2.3.5"), False, id="ip"),
        pytest.param(_hp("TCP", 80), _hp("UDP", 80), False, id="proto"),
        pytest.param(_hp("TCP", 80), _hp("TCP", 81), False, id="port"),
    ],
)
def test_host_port_conflicts(a, b, conflict):
    assert a.conflicts(b) is conflict
    assert b.conflicts(a) is conflict


def test_host_port_field_round_trip_with_ipv6():
    port = HostPort("TCP", 8080, "fe80::1")
    assert HostPort.parse_field(port.field()) == port
    assert HostPort.parse_field("r:cpu") is None


def test_node_usage_from_hash():
    usage = NodeUsage.from_hash(
        {b"pods": b"2", b"r:cpu": b"1500", b"r:memory": b"0", b"hp:TCP:80:0.0.0.0": b"1"}
    )
    assert usage == NodeUsage(2, {"cpu": 1500}, {HostPort("TCP", 80, "0.0.0.0"): 1})


def test_node_facts_keep_only_filtered_taints():
    node = (
        make_node("n")
        .capacity(cpu="4", pods=10)
        .taint("a", "1", "NoSchedule")
        .taint("b", "2", "PreferNoSchedule")
        .taint("c", "", "NoExecute")
        .unschedulable()
        .obj()
    )
    assert node_facts(node) == {
        "u": True,
        "a": {"cpu": 4000, "pods": 10},
        "t": [["a", "1", "NoSchedule"], ["c", "", "NoExecute"]],
    }


def test_tolerations_wire():
    tolerations = [Toleration(key="k", operator="Exists", effect="NoSchedule")]
    assert tolerations_wire(tolerations) == [["k", "Exists", "", "NoSchedule"]]


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param({}, "", id="no-group"),
        pytest.param({POD_GROUP_LABEL: "g1"}, "ns/g1", id="group"),
    ],
)
def test_pod_group_key(labels, want):
    assert pod_group_key(make_pod("p").namespace("ns").labels(labels).obj()) == want


@pytest.mark.parametrize(
    ("kind", "namespace", "want"),
    [
        pytest.param("Pod", "ns", "ns/x", id="namespaced"),
        pytest.param("Node", "", "x", id="cluster-scoped"),
        pytest.param("PriorityClass", "ignored", "x", id="cluster-scoped-ignores-namespace"),
    ],
)
def test_object_key(kind, namespace, want):
    assert object_key(kind, namespace, "x") == want


@pytest.mark.parametrize("cluster", ["", "a{b", "a b", "a*"])
def test_bad_cluster_names(cluster):
    with pytest.raises(InvalidNameError):
        StoreKeys("berth:", cluster)


def test_keys_share_the_hash_tag():
    keys = StoreKeys("berth:", "prod")
    for key in (keys.rv, keys.stream, keys.objects("Pod"), keys.usage("n1"), keys.gang("a/b")):
        assert key.startswith("berth:{prod}:")
    with pytest.raises(InvalidNameError):
        keys.objects("Deployment")
