"""Services and pod controllers (v1 Service, ReplicationController; apps/v1 ReplicaSet,
StatefulSet): strict manifest loading, API defaulting and validation, codec round trips."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shared.models import (
    KubeObject,
    LabelSelector,
    ManifestError,
    Manifests,
    Namespace,
    Pod,
    ReplicaSet,
    ReplicationController,
    Service,
    ServicePort,
    StatefulSet,
    decode,
    encode,
    load_manifest_text,
    to_dict,
)
from tests.builders import (
    label_selector,
    make_replica_set,
    make_replication_controller,
    make_service,
    make_stateful_set,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web", "tier": "front"}, "creationTimestamp": None},
    "spec": {
        "containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}],
        "terminationGracePeriodSeconds": 30,
    },
}

REAL_WORLD = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  type: NodePort
  selector: {app: web}
  clusterIP: 10.96.0.12
  clusterIPs: [10.96.0.12]
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  sessionAffinity: None
  externalTrafficPolicy: Cluster
  internalTrafficPolicy: Cluster
  ports:
  - {name: http, port: 80, targetPort: http, protocol: TCP, nodePort: 30080, appProtocol: http}
  - {name: metrics, port: 9090}
status: {loadBalancer: {}}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy, namespace: shop}
spec:
  replicas: 2
  minReadySeconds: 5
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: busybox}]}
status: {replicas: 2}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-7d9f
  namespace: shop
  ownerReferences:
  - {apiVersion: apps/v1, kind: Deployment, name: web, uid: d-1, controller: true}
spec:
  replicas: 3
  minReadySeconds: 0
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: tier, operator: In, values: [front]}]
  template: TEMPLATE
status: {replicas: 3, readyReplicas: 3, observedGeneration: 1}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  serviceName: db
  podManagementPolicy: Parallel
  updateStrategy: {type: RollingUpdate}
  revisionHistoryLimit: 10
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Retain, whenScaled: Retain}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
""".replace("TEMPLATE", json.dumps(TEMPLATE))


def test_real_world_manifests_load_typed() -> None:
    m = load_manifest_text(REAL_WORLD)
    assert len(m) == 4
    (svc,) = m.services
    assert svc.key == "shop/web"
    assert svc.spec.selector == {"app": "web"}
    assert (svc.spec.type, svc.spec.cluster_ip) == ("NodePort", "10.96.0.12")
    assert svc.spec.ports == [
        ServicePort(name="http", port=80, target_port="http", protocol="TCP", node_port=30080),
        # protocol defaults to TCP, targetPort to the port (SetDefaults_Service)
        ServicePort(name="metrics", port=9090, target_port=9090),
    ]

    (rc,) = m.replication_controllers
    assert rc.spec.replicas == 2
    # SetDefaults_ReplicationController: selector and labels from the template
    assert rc.spec.selector == {"app": "legacy"}
    assert rc.metadata.labels == {"app": "legacy"}

    (rs,) = m.replica_sets
    assert rs.spec.replicas == 3
    assert rs.spec.selector == label_selector({"app": "web"}, ("tier", "In", ["front"]))
    assert rs.spec.template == TEMPLATE  # kept as written, not interpreted
    assert rs.metadata.owner_references[0].kind == "Deployment"

    (ss,) = m.stateful_sets
    assert (ss.spec.service_name, ss.spec.replicas) == ("db", 1)  # replicas defaults to 1
    assert ss.spec.selector == label_selector({"app": "db"})


def test_kinds_land_in_their_lists_in_input_order_and_before_pods() -> None:
    docs = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs-b"},
         "spec": {"selector": {"matchLabels": {"b": "1"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc-b"},
         "spec": {"selector": {"b": "1"}, "ports": [{"port": 80}]}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs-a"},
         "spec": {"selector": {"matchLabels": {"a": "1"}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc-a"},
         "spec": {"selector": {"a": "1"}, "ports": [{"port": 80}]}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ss"},
         "spec": {"selector": {"matchLabels": {"s": "1"}}}},
        {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
         "spec": {"selector": {"r": "1"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
    ]  # fmt: skip
    m = load_manifest_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    assert [s.metadata.name for s in m.services] == ["svc-b", "svc-a"]
    assert [r.metadata.name for r in m.replica_sets] == ["rs-b", "rs-a"]
    assert [type(o) for o in m.objects()] == [
        Namespace,
        Service,
        Service,
        ReplicationController,
        ReplicaSet,
        ReplicaSet,
        StatefulSet,
        Pod,
    ]
    assert len(m) == 8


def test_add_sorts_objects_by_kind() -> None:
    m = Manifests()
    objects: list[KubeObject] = [
        make_service("s", {"a": "1"}),
        make_replication_controller("rc", {"a": "1"}),
        make_replica_set("rs", label_selector({"a": "1"})),
        make_stateful_set("ss", label_selector({"a": "1"})),
    ]
    for obj in objects:
        m.add(obj)
    assert (m.services, m.replication_controllers, m.replica_sets, m.stateful_sets) == (
        [objects[0]],
        [objects[1]],
        [objects[2]],
        [objects[3]],
    )


def _svc(name: str = "web", namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body = {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body}


def _rs(kind: str = "ReplicaSet", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": "web"}}}
    body.update(spec)
    api = "v1" if kind == "ReplicationController" else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "web"}, "spec": body}


def _rc(**spec: Any) -> dict[str, Any]:
    return _rs("ReplicationController", **{"selector": {"app": "web"}, **spec})


def _load(*docs: Any) -> Manifests:
    return load_manifest_text("---\n".join(json.dumps(d) + "\n" for d in docs))


def _error(*docs: Any) -> str:
    with pytest.raises(ManifestError) as excinfo:
        _load(*docs)
    return str(excinfo.value)


def test_duplicates_are_rejected_per_kind_namespace_and_name() -> None:
    assert "Service default/web: duplicate object (first defined in" in _error(_svc(), _svc())
    # Another namespace or another kind with the same name is another object.
    m = _load(_svc(), _svc(namespace="other"), _rs(), _rs("StatefulSet"), _rc())
    assert [s.key for s in m.services] == ["default/web", "other/web"]
    assert len(m) == 5


MISMATCH = "`selector` does not match template `labels`"
LABELS = "spec.template.metadata.labels"

INVALID = [
    # identity and strictness
    pytest.param(
        {**_rs(), "apiVersion": "extensions/v1beta1"},
        'ReplicaSet default/web: apiVersion: unknown apiVersion "extensions/v1beta1" for kind '
        'ReplicaSet (expected "apps/v1")',
        id="replica-set-old-api-version",
    ),
    pytest.param(
        {**_svc(), "apiVersion": "apps/v1"},
        'Service default/web: apiVersion: unknown apiVersion "apps/v1"',
        id="service-wrong-api-version",
    ),
    pytest.param(
        _svc(selecter={"app": "web"}),
        "Service default/web: spec.selecter: unknown field",
        id="service-unknown-spec-field",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "targetport": 8080}]),
        "Service default/web: spec.ports[0].targetport: unknown field",
        id="service-port-unknown-field",
    ),
    pytest.param(
        _rs(replica=3),
        "ReplicaSet default/web: spec.replica: unknown field",
        id="replica-set-unknown-spec-field",
    ),
    pytest.param(
        _rs("StatefulSet", serviceNme="db"),
        "StatefulSet default/web: spec.serviceNme: unknown field",
        id="stateful-set-unknown-spec-field",
    ),
    pytest.param(
        {**_rc(), "extra": 1},
        "ReplicationController default/web: extra: unknown field",
        id="rc-unknown-top-level-field",
    ),
    pytest.param(
        _svc(selector={"app": 1}),
        "Service default/web: spec.selector.app: expected string, got integer",
        id="service-selector-value-type",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "targetPort": 1.5}]),
        "spec.ports[0].targetPort: expected integer or string, got number",
        id="service-target-port-type",
    ),
    # selectors
    pytest.param(
        _rs(selector=None),
        "ReplicaSet default/web: spec.selector: Required value",
        id="replica-set-missing-selector",
    ),
    pytest.param(
        _rs(selector={}),
        "ReplicaSet default/web: spec.selector: Invalid value: empty selector is invalid for "
        "deployment",
        id="replica-set-empty-selector",
    ),
    pytest.param(
        _rs("StatefulSet", selector=None),
        "StatefulSet default/web: spec.selector: Required value",
        id="stateful-set-missing-selector",
    ),
    pytest.param(
        _rs("StatefulSet", selector={"matchLabels": {}}),
        "spec.selector: Invalid value: empty selector is invalid for statefulset",
        id="stateful-set-empty-selector",
    ),
    pytest.param(
        _rs(selector={"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
        'spec.selector.matchExpressions[0].operator: Unsupported value: "Gt"',
        id="replica-set-selector-operator",
    ),
    pytest.param(
        _rc(selector=None),
        "ReplicationController default/web: spec.selector: Required value",
        id="rc-no-selector-no-template",
    ),
    pytest.param(
        _rc(selector={"": "x"}),
        "spec.selector: label key must not be empty",
        id="rc-empty-label-key",
    ),
    # replicas
    pytest.param(
        _rs(replicas=-1),
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        id="replica-set-negative-replicas",
    ),
    pytest.param(
        _rc(replicas=-2),
        "spec.replicas: Invalid value: -2: must be greater than or equal to 0",
        id="rc-negative-replicas",
    ),
    # templates: opaque, but their labels must be selected
    pytest.param(
        _rs(template={"metadata": {"labels": {"app": "db"}}}),
        f'ReplicaSet default/web: {LABELS}: Invalid value: {{"app": "db"}}: {MISMATCH}',
        id="replica-set-template-not-selected",
    ),
    pytest.param(
        _rs("StatefulSet", template={"spec": {}}),
        f"{LABELS}: Invalid value: {{}}: {MISMATCH}",
        id="stateful-set-template-without-labels",
    ),
    pytest.param(
        _rc(template={"metadata": {"labels": {"app": "web2"}}}),
        f'ReplicationController default/web: {LABELS}: Invalid value: {{"app": "web2"}}: '
        f"{MISMATCH}",
        id="rc-template-not-selected",
    ),
    pytest.param(
        _rs(template=[]),
        "ReplicaSet default/web: spec.template: expected object, got array",
        id="template-not-an-object",
    ),
    pytest.param(
        _rs(template={"metadata": "x"}),
        "spec.template.metadata: expected object, got string",
        id="template-metadata-not-an-object",
    ),
    pytest.param(
        _rs(template={"metadata": {"labels": {"app": "web", "n": 1}}}),
        f"{LABELS}.n: expected string, got integer",
        id="template-label-not-a-string",
    ),
    # Service spec
    pytest.param(
        _svc(type="Internal"),
        'spec.type: Unsupported value: "Internal": supported values: "ClusterIP", '
        '"ExternalName", "LoadBalancer", "NodePort"',
        id="service-type",
    ),
    pytest.param(_svc(ports=[]), "Service default/web: spec.ports: Required value", id="no-ports"),
    pytest.param(
        _svc(ports=[{"port": 0}]),
        "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        id="port-zero",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "protocol": "HTTP"}]),
        'spec.ports[0].protocol: Unsupported value: "HTTP"',
        id="port-protocol",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "targetPort": 70000}]),
        "spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        id="target-port-range",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "targetPort": "Http_Port"}]),
        'spec.ports[0].targetPort: Invalid value: "Http_Port": must be a port number or a port '
        "name",
        id="target-port-name",
    ),
    pytest.param(
        _svc(ports=[{"name": "a", "port": 80}, {"port": 81}]),
        "spec.ports[1].name: Required value",
        id="port-name-required-with-several-ports",
    ),
    pytest.param(
        _svc(ports=[{"name": "a", "port": 80}, {"name": "a", "port": 81}]),
        'spec.ports[1].name: Duplicate value: "a"',
        id="port-name-duplicate",
    ),
    pytest.param(
        _svc(ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80}]),
        'spec.ports[1]: Duplicate value: "80/TCP"',
        id="port-protocol-duplicate",
    ),
    pytest.param(
        _svc(ports=[{"port": 80, "nodePort": 30080}]),
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        id="node-port-on-cluster-ip",
    ),
    pytest.param(
        _svc(type="NodePort", ports=[{"port": 80, "nodePort": 70000}]),
        "spec.ports[0].nodePort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        id="node-port-range",
    ),
    pytest.param(
        _svc(clusterIP="10.0.0.300"),
        "spec.clusterIP: Invalid value: \"10.0.0.300\": must be empty, 'None', or a valid IP",
        id="cluster-ip",
    ),
    pytest.param(
        _svc(type="LoadBalancer", clusterIP="None"),
        "spec.clusterIP: Invalid value: \"None\": may not be set to 'None' for LoadBalancer",
        id="headless-load-balancer",
    ),
]


@pytest.mark.parametrize(("doc", "message"), INVALID)
def test_invalid(doc: dict[str, Any], message: str) -> None:
    assert message in _error(doc)


def test_template_with_a_value_json_cannot_carry_is_rejected() -> None:
    text = """
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, creationTimestamp: 2024-01-02T03:04:05Z}
"""
    with pytest.raises(ManifestError) as excinfo:
        load_manifest_text(text)
    assert "spec.template.metadata.creationTimestamp: expected a JSON value, got datetime" in str(
        excinfo.value
    )


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(_svc(ports=[], clusterIP="None"), id="headless-without-ports"),
        pytest.param(_svc(ports=[], type="ExternalName"), id="external-name-without-ports"),
        pytest.param(_svc(selector=None), id="service-without-selector"),
        pytest.param(_svc(ports=[{"port": 80, "targetPort": "http"}]), id="named-target-port"),
        pytest.param(_svc(clusterIP="fd00::1"), id="ipv6-cluster-ip"),
        pytest.param(_rs(template=None), id="no-template"),
        pytest.param(_rs(replicas=0), id="zero-replicas"),
        pytest.param(
            _rs(
                selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                template={"metadata": {"labels": {"app": "x"}}},
            ),
            id="expression-selector-matches-template",
        ),
        pytest.param(
            _rc(
                selector={"app": "web"}, template={"metadata": {"labels": {"app": "web", "v": "2"}}}
            ),
            id="rc-selector-subset-of-template-labels",
        ),
    ],
)
def test_valid(doc: dict[str, Any]) -> None:
    assert len(_load(doc)) == 1


def test_rc_keeps_its_own_selector_and_labels() -> None:
    doc = _rc(template={"metadata": {"labels": {"app": "web", "v": "2"}}})
    doc["metadata"]["labels"] = {"team": "a"}
    (rc,) = _load(doc).replication_controllers
    assert rc.spec.selector == {"app": "web"}
    assert rc.metadata.labels == {"team": "a"}


def test_service_without_selector_selects_nothing() -> None:
    (svc,) = _load(_svc(selector=None)).services
    assert svc.spec.selector == {}


OBJECTS = [
    pytest.param(make_service("web", {"app": "web"}, namespace="shop"), id="service"),
    pytest.param(make_service("bare", None), id="service-without-selector"),
    pytest.param(make_replication_controller("rc", {"app": "web"}, replicas=0), id="rc"),
    pytest.param(
        make_replica_set("rs", label_selector({"app": "web"}, ("tier", "In", ["a"])), replicas=5),
        id="replica-set",
    ),
    pytest.param(
        make_stateful_set("ss", label_selector({"app": "db"}), service_name="db"), id="stateful"
    ),
]


@pytest.mark.parametrize("obj", OBJECTS)
def test_msgpack_round_trip(obj: Any) -> None:
    assert decode(encode(obj)) == obj


@pytest.mark.parametrize("obj", OBJECTS)
def test_to_dict_round_trips_through_the_manifest_loader(obj: Any) -> None:
    (loaded,) = list(load_manifest_text(json.dumps(to_dict(obj))).objects())
    assert loaded == obj


def test_loaded_real_world_objects_round_trip() -> None:
    for obj in load_manifest_text(REAL_WORLD).objects():
        assert decode(encode(obj)) == obj
        (again,) = list(load_manifest_text(json.dumps(to_dict(obj))).objects())
        assert again == obj


def test_to_dict_shape_and_template_copy() -> None:
    (rs,) = _load(_rs(template=copy.deepcopy(TEMPLATE))).replica_sets
    doc = to_dict(rs)
    assert (doc["apiVersion"], doc["kind"]) == ("apps/v1", "ReplicaSet")
    assert doc["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert doc["spec"]["template"] == TEMPLATE
    doc["spec"]["template"]["metadata"]["labels"]["app"] = "changed"
    assert rs.spec.template == TEMPLATE  # the output does not share the object's template

    (svc,) = _load(_svc(clusterIP="None", ports=[{"port": 80, "targetPort": 8080}])).services
    assert to_dict(svc)["spec"] == {
        "selector": {"app": "web"},
        "ports": [{"port": 80, "targetPort": 8080}],
        "clusterIP": "None",
    }


def test_selector_types() -> None:
    """The controller selectors keep their API types: a map for RC, a LabelSelector else."""
    m = _load(_rc(), _rs(), _rs("StatefulSet"))
    assert m.replication_controllers[0].spec.selector == {"app": "web"}
    assert isinstance(m.replica_sets[0].spec.selector, LabelSelector)
    assert m.stateful_sets[0].spec.selector == label_selector({"app": "web"})
