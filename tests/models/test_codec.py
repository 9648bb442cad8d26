"""to_dict (Kubernetes JSON shape) and msgpack encode/decode round trips."""

import json
from collections.abc import Callable
from typing import Any, cast

import msgpack
import pytest

from shared.models import (
    SCHEMA_VERSION,
    CodecError,
    Container,
    KubeObject,
    LabelSelector,
    Node,
    Pod,
    decode,
    decode_many,
    encode,
    load_manifest_text,
    to_dict,
)
from tests.builders import (
    label_selector,
    make_namespace,
    make_node,
    make_pdb,
    make_pod,
    make_pod_group,
    make_priority_class,
)


def rich_pod() -> Pod:
    pod = (
        make_pod("rich")
        .namespace("team")
        .uid("uid-1")
        .labels(app="web")
        .annotation("note", "x")
        .created(1704153600.25)
        .owner("ReplicaSet", "rs")
        .req(cpu="1500m", memory="1Gi")
        .req_lim({"cpu": "100m", "nvidia.com/gpu": 1}, {"cpu": "1", "nvidia.com/gpu": 1})
        .sidecar_req(cpu="50m")
        .init_req(memory="2Gi")
        .overhead(cpu="250m", memory="120Mi")
        .host_port(8080, protocol="UDP", host_ip="10.0.0.1", container_port=80)
        .node_selector(disk="ssd")
        .node_affinity_in("zone", ["a", "b"])
        .preferred_node_affinity(10, ("cores", "Gt", ["4"]))
        .pod_affinity_exists("app", "kubernetes.io/hostname", anti=True)
        .pod_affinity_in("app", ["db"], "zone", weight=20)
        .spread_constraint(
            1,
            "zone",
            "DoNotSchedule",
            label_selector({"app": "web"}, ("tier", "NotIn", ["x"])),
            min_domains=2,
            node_taints_policy="Honor",
            match_label_keys=["pod-template-hash"],
        )
        .toleration("k", "v", "NoExecute", seconds=30)
        .toleration()
        .scheduling_gates("g1")
        .priority(100)
        .priority_class("high")
        .preemption_policy("Never")
        .scheduler_name("other")
        .node("n1")
        .grace_period(5)
        .terminating(1704153700.0)
        .nominated_node_name("n2")
        .phase("Running")
        .start_time(1704153601.0)
        .obj()
    )
    pod.metadata.resource_version = 17
    pod.spec.host_network = True
    return pod


def rich_node() -> Node:
    node = (
        make_node("n1")
        .uid("node-uid")
        .capacity({"ephemeral-storage": "100G"}, cpu="8", memory="64Gi", pods=110)
        .allocatable(cpu="7500m", memory="60Gi", pods=110)
        .labels({"topology.kubernetes.io/zone": "a"})
        .taint("gpu", "true", "NoSchedule")
        .image("nginx:1", 123456, "docker.io/library/nginx:1")
        .unschedulable()
        .obj()
    )
    node.spec.taints[0].time_added = 1704153600.0
    return node


OBJECTS = [
    pytest.param(rich_pod(), id="rich-pod"),
    pytest.param(rich_node(), id="rich-node"),
    pytest.param(make_pod("bare").obj(), id="bare-pod"),
    pytest.param(make_node("bare").obj(), id="bare-node"),
    pytest.param(make_namespace("ns", {"env": "prod"}), id="namespace"),
    pytest.param(
        make_priority_class("high", 1000, global_default=True, preemption_policy="Never"),
        id="priority-class",
    ),
    pytest.param(
        make_pdb("pdb", label_selector({"a": "b"}), max_unavailable=1, disruptions_allowed=2),
        id="pdb",
    ),
    pytest.param(make_pdb("pdb-pct", LabelSelector(), min_available="50%"), id="pdb-percent"),
    pytest.param(make_pod_group("g", 3, schedule_timeout_seconds=10), id="pod-group"),
]


@pytest.mark.parametrize("obj", OBJECTS)
def test_msgpack_round_trip(obj):
    data = encode(obj)
    assert isinstance(data, bytes)
    assert decode(data) == obj


# A pod without containers is not a valid manifest, so the bare pod is left out here.
VALID_MANIFESTS = [p for p in OBJECTS if p.id != "bare-pod"]


@pytest.mark.parametrize("obj", VALID_MANIFESTS)
def test_to_dict_round_trips_through_the_manifest_loader(obj):
    manifests = load_manifest_text(json.dumps(to_dict(obj)))
    (loaded,) = list(manifests.objects())
    assert loaded == obj


def test_decode_many():
    objs: list[KubeObject] = [rich_pod(), rich_node()]
    assert decode_many([encode(o) for o in objs]) == objs


def test_to_dict_shape():
    doc = to_dict(rich_pod())
    assert doc["apiVersion"] == "v1"
    assert doc["kind"] == "Pod"
    meta = doc["metadata"]
    assert meta["namespace"] == "team"
    assert meta["creationTimestamp"] == "2024-01-02T00:00:00.250000Z"
    assert meta["deletionTimestamp"] == "2024-01-02T00:01:40Z"
    assert meta["resourceVersion"] == "17"
    spec = doc["spec"]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1500m", "memory": "1Gi"}}
    assert spec["containers"][1]["resources"] == {
        "requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "1", "nvidia.com/gpu": "1"},
    }
    assert spec["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    assert spec["containers"][2]["ports"] == [
        {"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1", "protocol": "UDP"}
    ]
    assert spec["initContainers"][0]["restartPolicy"] == "Always"
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a", "b"]
    assert spec["topologySpreadConstraints"][0]["minDomains"] == 2
    assert spec["tolerations"][0]["tolerationSeconds"] == 30
    assert spec["hostNetwork"] is True
    assert spec["priority"] == 100
    assert doc["status"] == {
        "nominatedNodeName": "n2",
        "phase": "Running",
        "startTime": "2024-01-02T00:00:01Z",
    }


def test_to_dict_omits_defaults():
    doc = to_dict(make_pod("p").uid("u").container("img", "c").obj())
    assert doc == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "image": "img"}]},
    }


def test_to_dict_cluster_scoped_has_no_namespace():
    doc = to_dict(make_node("n").uid("u").capacity(cpu="4", memory="1G").obj())
    assert doc == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "uid": "u"},
        "status": {
            "capacity": {"cpu": "4", "memory": "1G"},
            "allocatable": {"cpu": "4", "memory": "1G"},
        },
    }


def test_to_dict_of_a_nested_object():
    assert to_dict(Container(name="c", image="i")) == {"name": "c", "image": "i"}


def test_encoded_payload_carries_the_schema_version():
    message = msgpack.unpackb(encode(make_pod("p").obj()), raw=False)
    assert message["v"] == SCHEMA_VERSION
    assert message["kind"] == "Pod"
    assert message["object"]["metadata"]["name"] == "p"


def _payload(**changes: Any) -> bytes:
    message = msgpack.unpackb(encode(make_pod("p").req(cpu="1").obj()), raw=False)
    message.update(changes)
    return cast(bytes, msgpack.packb(message, use_bin_type=True))


def _with_object(mutate: Callable[[dict[str, Any]], Any]) -> bytes:
    message = msgpack.unpackb(encode(make_pod("p").req(cpu="1").obj()), raw=False)
    mutate(message["object"])
    return cast(bytes, msgpack.packb(message, use_bin_type=True))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"\xc1", "undecodable msgpack", id="invalid-bytes"),
        pytest.param(b"", "undecodable msgpack", id="empty"),
        pytest.param(b"\x92\x01", "undecodable msgpack", id="truncated"),
        pytest.param(msgpack.packb([1, 2]), "expected a map", id="not-a-map"),
        pytest.param(_payload(v=2), "unsupported schema version 2", id="newer-version"),
        pytest.param(_payload(v=None), "unsupported schema version None", id="no-version"),
        pytest.param(_payload(kind="Deployment"), "unknown kind 'Deployment'", id="unknown-kind"),
        pytest.param(
            _payload(object=[1]), "invalid Pod: <object>: expected object", id="bad-object"
        ),
        pytest.param(
            _with_object(lambda o: o["spec"].update(nodeSelctor={})),
            "invalid Pod: spec.nodeSelctor: unknown field",
            id="unknown-field",
        ),
        pytest.param(
            _with_object(
                lambda o: o["spec"]["containers"][0]["resources"]["requests"].update(cpu="1")
            ),
            "invalid Pod: spec.containers[0].resources.requests.cpu: invalid resource amount '1'",
            id="string-resource",
        ),
        pytest.param(
            _with_object(lambda o: o["metadata"].update(name=5)),
            "invalid Pod: metadata.name: expected string, got integer",
            id="wrong-type",
        ),
    ],
)
def test_decode_errors(data, expected):
    with pytest.raises(CodecError) as excinfo:
        decode(data)
    assert expected in str(excinfo.value)


def test_encode_rejects_non_api_objects():
    with pytest.raises(CodecError, match="not an API kind"):
        encode(Container(name="c"))  # type: ignore[arg-type]
