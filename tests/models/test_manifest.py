"""Manifest loading: decoding, API defaulting and strict validation (one case per rule)."""

import copy
import json
from typing import Any

import pytest

from shared.models import (
    ManifestError,
    ManifestLoader,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    load_manifest_text,
    load_manifests,
    resolve_priorities,
)

Mi, Gi = 1024**2, 1024**3


def pod_doc(name: str = "web-1", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    base["spec"].update(spec)
    return base


def node_doc(name: str = "n1", **status: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def with_path(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of doc with value set at a dotted path ("spec.containers.0.resources")."""
    doc = copy.deepcopy(doc)
    target: Any = doc
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


def load_docs(*docs: Any):
    return load_manifest_text(
        "\n".join(json.dumps(d) for d in docs)
        if len(docs) == 1
        else "---\n".join(json.dumps(d) + "\n" for d in docs)
    )


def error_of(*docs: Any) -> str:
    with pytest.raises(ManifestError) as excinfo:
        load_docs(*docs)
    return str(excinfo.value)


def error_of_text(text: str, source: str = "<string>") -> str:
    with pytest.raises(ManifestError) as excinfo:
        load_manifest_text(text, source=source)
    return str(excinfo.value)


# --- valid input --------------------------------------------------------------------------

ALL_KINDS = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {env: prod}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
globalDefault: false
preemptionPolicy: Never
description: important
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {topology.kubernetes.io/zone: a}
spec:
  taints: [{key: gpu, value: "true", effect: NoSchedule}]
status:
  capacity: {cpu: "4", memory: 32Gi, pods: "110"}
  images: [{names: ["nginx:1"], sizeBytes: 1000}]
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: team-a
  creationTimestamp: "2024-01-02T03:04:05.5+01:00"
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: u1, controller: true}]
  resourceVersion: "42"
spec:
  schedulerName: my-scheduler
  priorityClassName: high
  nodeSelector: {disktype: ssd}
  overhead: {cpu: 250m}
  volumes: [{name: data, emptyDir: {}}]
  initContainers:
  - {name: sidecar, image: envoy, restartPolicy: Always, resources: {requests: {cpu: 100m}}}
  containers:
  - name: main
    image: nginx
    command: [nginx]
    env: [{name: A, value: b}]
    resources:
      requests: {cpu: 2, memory: 0.5Gi}
      limits: {cpu: 2.5, example.com/foo: 3}
    ports: [{containerPort: 80, hostPort: 8080, hostIP: 127.0.0.1, protocol: UDP}]
  tolerations:
  - {key: gpu, operator: Equal, value: "true", effect: NoSchedule}
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: cores, operator: Gt, values: ["3"]}]
          matchFields: [{key: metadata.name, operator: In, values: [n1]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        topologyKey: kubernetes.io/hostname
        namespaceSelector: {}
        matchLabelKeys: [pod-template-hash]
  topologySpreadConstraints:
  - maxSkew: 2
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 3
    labelSelector: {matchExpressions: [{key: app, operator: Exists}]}
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
  schedulingGates: [{name: wait}]
status:
  phase: Pending
  nominatedNodeName: n1
  startTime: "2024-01-02T00:00:00Z"
  podIP: 10.0.0.1
  conditions: [{type: PodScheduled, status: "False"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb, namespace: team-a}
spec:
  minAvailable: 50%
  selector: {matchLabels: {app: web}}
status: {disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: gang}
spec: {minMember: 3, scheduleTimeoutSeconds: 60, minResources: {cpu: "3"}}
status: {phase: Pending}
"""


def test_load_all_kinds():
    m = load_manifest_text(ALL_KINDS)
    assert len(m) == 6
    assert [type(o) for o in m.objects()] == [
        Namespace,
        PriorityClass,
        Node,
        PodGroup,
        PodDisruptionBudget,
        Pod,
    ]
    ns, pc, node, pod = m.namespaces[0], m.priority_classes[0], m.nodes[0], m.pods[0]
    assert ns.metadata.labels == {"env": "prod"}
    assert ns.metadata.namespace == ""
    assert (pc.value, pc.preemption_policy, pc.description) == (1000, "Never", "important")
    assert pc.metadata.namespace == ""
    assert node.metadata.namespace == ""
    assert node.status.capacity == {"cpu": 4000, "memory": 32 * Gi, "pods": 110}
    assert node.status.allocatable == node.status.capacity  # defaulted from capacity
    assert node.spec.taints[0].value == "true"
    assert node.status.images[0].size_bytes == 1000

    assert pod.key == "team-a/web-1"
    assert pod.metadata.creation_timestamp == 1704161045.5
    assert pod.metadata.resource_version == 42
    assert pod.metadata.owner_references[0].controller is True
    main = pod.spec.containers[0]
    assert main.resources.requests == {"cpu": 2000, "memory": Gi // 2, "example.com/foo": 3}
    assert main.resources.limits == {"cpu": 2500, "example.com/foo": 3}
    assert main.ports[0].host_ip == "127.0.0.1"
    assert main.ports[0].protocol == "UDP"
    assert pod.spec.init_containers[0].restart_policy == "Always"
    assert pod.spec.overhead == {"cpu": 250}
    assert pod.spec.tolerations[1].toleration_seconds == 300
    assert pod.spec.scheduler_name == "my-scheduler"
    affinity = pod.spec.affinity
    assert affinity is not None
    assert affinity.pod_anti_affinity is not None
    term = affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert term.namespace_selector is not None
    assert term.namespace_selector.is_empty()
    assert term.match_label_keys == ["pod-template-hash"]
    spread = pod.spec.topology_spread_constraints[0]
    assert (spread.min_domains, spread.node_affinity_policy) == (3, "Ignore")
    assert pod.spec.scheduling_gates[0].name == "wait"
    assert pod.status.nominated_node_name == "n1"
    assert pod.status.phase == "Pending"
    assert pod.status.start_time == 1704153600.0

    pdb = m.pod_disruption_budgets[0]
    assert pdb.spec.min_available == "50%"
    assert pdb.status.disruptions_allowed == 1
    group = m.pod_groups[0]
    assert group.metadata.namespace == "default"
    assert (group.spec.min_member, group.spec.min_resources) == (3, {"cpu": 3000})


def test_order_is_preserved_per_kind():
    docs = [pod_doc(f"p{i}") for i in (3, 1, 2)]
    assert [p.metadata.name for p in load_docs(*docs).pods] == ["p3", "p1", "p2"]


def test_kind_list():
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod_doc("a"), node_doc("n")]})
    m = load_manifest_text(text)
    assert [p.metadata.name for p in m.pods] == ["a"]
    assert [n.metadata.name for n in m.nodes] == ["n"]


def test_json_document():
    m = load_manifest_text(json.dumps(pod_doc("j")))
    assert m.pods[0].metadata.name == "j"


def test_empty_documents_are_skipped():
    m = load_manifest_text("---\n---\n" + json.dumps(pod_doc()) + "\n---\n")
    assert len(m.pods) == 1


def test_null_fields_take_defaults():
    doc = pod_doc(tolerations=None, nodeSelector=None, affinity=None)
    doc["metadata"]["labels"] = None
    pod = load_docs(doc).pods[0]
    assert pod.spec.tolerations == []
    assert pod.metadata.labels == {}
    assert pod.spec.affinity is None


def test_uid_generated_when_absent_and_kept_when_given():
    a, b = load_docs(pod_doc("a"), pod_doc("b")).pods
    assert a.metadata.uid
    assert a.metadata.uid != b.metadata.uid
    given = with_path(pod_doc(), "metadata.uid", "uid-1")
    assert load_docs(given).pods[0].metadata.uid == "uid-1"


def test_requests_default_to_limits():
    doc = pod_doc(
        containers=[
            {
                "name": "c",
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            }
        ]
    )
    pod = load_docs(doc).pods[0]
    assert pod.spec.containers[0].resources.requests == {"cpu": 1000, "memory": Gi}


def test_host_network_makes_container_ports_host_ports():
    doc = pod_doc(hostNetwork=True, containers=[{"name": "c", "ports": [{"containerPort": 53}]}])
    pod = load_docs(doc).pods[0]
    assert pod.spec.containers[0].ports[0].host_port == 53


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(2, 2000, id="yaml-int"),
        pytest.param(0.5, 500, id="yaml-float"),
        pytest.param("1.5", 1500, id="string"),
        pytest.param("100m", 100, id="milli"),
    ],
)
def test_cpu_quantity_forms(value, expected):
    doc = pod_doc(containers=[{"name": "c", "resources": {"requests": {"cpu": value}}}])
    assert load_docs(doc).pods[0].spec.containers[0].resources.requests == {"cpu": expected}


def test_unquoted_yaml_timestamp():
    text = (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n\n"
        "  creationTimestamp: 2024-01-02T00:00:00Z\n"
    )
    assert load_manifest_text(text).nodes[0].metadata.creation_timestamp == 1704153600.0


def test_same_name_in_other_namespace_is_not_a_duplicate():
    a = pod_doc("p")
    b = with_path(pod_doc("p"), "metadata.namespace", "other")
    assert len(load_docs(a, b).pods) == 2


def test_load_files_and_duplicates_across_files(tmp_path):
    first = tmp_path / "a.yaml"
    second = tmp_path / "b.json"
    first.write_text(json.dumps(pod_doc("p1")))
    second.write_text(json.dumps(pod_doc("p2")))
    m = load_manifests(first, second)
    assert [p.metadata.name for p in m.pods] == ["p1", "p2"]
    second.write_text(json.dumps(pod_doc("p1")))
    with pytest.raises(ManifestError) as excinfo:
        load_manifests(first, second)
    message = str(excinfo.value)
    assert "Pod default/p1: duplicate object" in message
    assert str(first) in message
    assert str(second) in message


def test_missing_file():
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifests("/nonexistent/berth.yaml")


def test_loader_accumulates():
    loader = ManifestLoader()
    loader.add_document(pod_doc("a"))
    loader.add_text(json.dumps(node_doc("n")))
    assert len(loader.manifests) == 2
    with pytest.raises(ManifestError, match="duplicate"):
        loader.add_document(pod_doc("a"))


# --- invalid input: one case per rule -----------------------------------------------------

POD = pod_doc()
CONTAINER0 = "spec.containers.0"


def affinity(kind: str, required: bool, term: dict[str, Any], weight: int = 1) -> dict[str, Any]:
    key = (
        "requiredDuringSchedulingIgnoredDuringExecution"
        if required
        else "preferredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        return pod_doc(affinity={kind: {key: [term]}})
    return pod_doc(affinity={kind: {key: [{"weight": weight, "podAffinityTerm": term}]}})


def node_affinity_term(
    *exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields is not None:
        term["matchFields"] = fields
    return pod_doc(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    )


def spread(**fields: Any) -> dict[str, Any]:
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    constraint.update(fields)
    return pod_doc(topologySpreadConstraints=[constraint])


HOST = "kubernetes.io/hostname"
SEL = {"matchLabels": {"app": "web"}}
RA = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
NA = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
)

INVALID = [
    # kinds and identity
    (
        "unknown-kind",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        'Deployment d: kind: unknown kind "Deployment"',
    ),
    (
        "unknown-api-version",
        with_path(POD, "apiVersion", "v2"),
        'Pod default/web-1: apiVersion: unknown apiVersion "v2" for kind Pod (expected "v1")',
    ),
    (
        "wrong-group-for-kind",
        {"apiVersion": "v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1},
        'PriorityClass x: apiVersion: unknown apiVersion "v1"',
    ),
    ("missing-kind", {"apiVersion": "v1", "metadata": {"name": "x"}}, "kind: Required value"),
    (
        "missing-name",
        with_path(POD, "metadata", {}),
        "Pod default/<unnamed>: metadata.name: Required value",
    ),
    # quantities
    (
        "unparsable-quantity",
        with_path(POD, f"{CONTAINER0}.resources", {"requests": {"cpu": "abc"}}),
        'Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity "abc"',
    ),
    (
        "negative-quantity",
        with_path(POD, f"{CONTAINER0}.resources", {"limits": {"memory": "-1Gi"}}),
        'spec.containers[0].resources.limits.memory: invalid quantity "-1Gi": must be non-negative',
    ),
    ("negative-overhead", pod_doc(overhead={"cpu": -1}), "spec.overhead.cpu: invalid quantity"),
    (
        "node-capacity-quantity",
        node_doc(capacity={"memory": "1 Gi"}),
        'Node n1: status.capacity.memory: invalid quantity "1 Gi"',
    ),
    ("bool-quantity", node_doc(capacity={"cpu": True}), "status.capacity.cpu: invalid quantity"),
    # unknown fields
    (
        "unknown-spec-field",
        pod_doc(nodeSelctor={"a": "b"}),
        "Pod default/web-1: spec.nodeSelctor: unknown field",
    ),
    (
        "unknown-top-level-field",
        with_path(POD, "specs", {}),
        "Pod default/web-1: specs: unknown field",
    ),
    (
        "unknown-status-field",
        with_path(POD, "status", {"phase": "Pending", "bogus": 1}),
        "Pod default/web-1: status.bogus: unknown field",
    ),
    (
        "unknown-nested-field",
        with_path(POD, f"{CONTAINER0}.resource", {}),
        "spec.containers[0].resource: unknown field",
    ),
    ("unknown-node-status-field", node_doc(capasity={}), "Node n1: status.capasity: unknown field"),
    (
        "unknown-list-field",
        {"apiVersion": "v1", "kind": "List", "items": [], "extra": 1},
        "List: extra: unknown field",
    ),
    # label selectors
    (
        "selector-bad-operator",
        affinity(
            "podAntiAffinity",
            True,
            {
                "topologyKey": HOST,
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]
                },
            },
        ),
        f'{RA}.labelSelector.matchExpressions[0].operator: Unsupported value: "Gt"',
    ),
    (
        "selector-values-with-exists",
        affinity(
            "podAntiAffinity",
            True,
            {
                "topologyKey": HOST,
                "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]
                },
            },
        ),
        f"{RA}.labelSelector.matchExpressions[0].values: Forbidden: may not be specified when "
        "`operator` is 'Exists'",
    ),
    (
        "selector-values-with-does-not-exist",
        spread(
            labelSelector={
                "matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": ["x"]}]
            }
        ),
        "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values: Forbidden",
    ),
    (
        "selector-in-without-values",
        affinity(
            "podAntiAffinity",
            True,
            {
                "topologyKey": HOST,
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
            },
        ),
        f"{RA}.labelSelector.matchExpressions[0].values: Required value",
    ),
    (
        "selector-notin-without-values",
        pod_doc(
            affinity={
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": HOST,
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "app", "operator": "NotIn", "values": []}
                                ]
                            },
                        }
                    ]
                }
            }
        ),
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
        ".matchExpressions[0].values: Required value",
    ),
    (
        "namespace-selector-bad-operator",
        affinity(
            "podAntiAffinity",
            True,
            {
                "topologyKey": HOST,
                "namespaceSelector": {
                    "matchExpressions": [{"key": "env", "operator": "in", "values": ["a"]}]
                },
            },
        ),
        f'{RA}.namespaceSelector.matchExpressions[0].operator: Unsupported value: "in"',
    ),
    (
        "pdb-selector-bad-operator",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}},
        },
        "PodDisruptionBudget default/b: spec.selector.matchExpressions[0].operator: Unsupported "
        'value: "Bogus"',
    ),
    # node selectors
    (
        "node-selector-bad-operator",
        node_affinity_term({"key": "a", "operator": "Equals", "values": ["b"]}),
        f'{NA}.matchExpressions[0].operator: Unsupported value: "Equals"',
    ),
    (
        "node-selector-gt-two-values",
        node_affinity_term({"key": "a", "operator": "Gt", "values": ["1", "2"]}),
        f"{NA}.matchExpressions[0].values: Required value: must be specified single value",
    ),
    (
        "node-selector-lt-not-integer",
        node_affinity_term({"key": "a", "operator": "Lt", "values": ["1.5"]}),
        f'{NA}.matchExpressions[0].values[0]: Invalid value: "1.5": must be an integer',
    ),
    (
        "node-selector-exists-with-values",
        node_affinity_term({"key": "a", "operator": "Exists", "values": ["1"]}),
        f"{NA}.matchExpressions[0].values: Forbidden",
    ),
    (
        "node-selector-in-without-values",
        node_affinity_term({"key": "a", "operator": "In"}),
        f"{NA}.matchExpressions[0].values: Required value",
    ),
    (
        "node-selector-field-key",
        node_affinity_term(fields=[{"key": "metadata.uid", "operator": "In", "values": ["x"]}]),
        f'{NA}.matchFields[0].key: Unsupported value: "metadata.uid"',
    ),
    (
        "node-selector-field-two-values",
        node_affinity_term(
            fields=[{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]
        ),
        f"{NA}.matchFields[0].values: Required value: must be only one value",
    ),
    (
        "node-selector-no-terms",
        pod_doc(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
                }
            }
        ),
        "nodeSelectorTerms: Required value: must have at least one node selector term",
    ),
    # topology keys
    (
        "empty-topology-key-required-affinity",
        affinity("podAffinity", True, {"labelSelector": SEL}),
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
        "Required value: can not be empty",
    ),
    (
        "empty-topology-key-preferred-anti-affinity",
        affinity("podAntiAffinity", False, {"labelSelector": SEL, "topologyKey": ""}),
        ""
        "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
        ".topologyKey: Required value",
    ),
    (
        "empty-topology-key-spread",
        spread(topologyKey=""),
        "spec.topologySpreadConstraints[0].topologyKey: Required value",
    ),
    # topology spread
    (
        "max-skew-zero",
        spread(maxSkew=0),
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0",
    ),
    (
        "max-skew-negative",
        spread(maxSkew=-1),
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: -1",
    ),
    (
        "min-domains-with-schedule-anyway",
        spread(whenUnsatisfiable="ScheduleAnyway", minDomains=2),
        "spec.topologySpreadConstraints[0].minDomains: Invalid value: can only use minDomains if "
        "whenUnsatisfiable=DoNotSchedule",
    ),
    (
        "min-domains-zero",
        spread(minDomains=0),
        "spec.topologySpreadConstraints[0].minDomains: Invalid value: 0",
    ),
    (
        "when-unsatisfiable-enum",
        spread(whenUnsatisfiable="Sometimes"),
        'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes"',
    ),
    (
        "node-affinity-policy-enum",
        spread(nodeAffinityPolicy="Maybe"),
        'spec.topologySpreadConstraints[0].nodeAffinityPolicy: Unsupported value: "Maybe"',
    ),
    (
        "node-taints-policy-enum",
        spread(nodeTaintsPolicy="honor"),
        'spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: "honor"',
    ),
    (
        "spread-match-label-keys-without-selector",
        spread(matchLabelKeys=["pod-template-hash"]),
        "spec.topologySpreadConstraints[0].matchLabelKeys: Forbidden",
    ),
    (
        "spread-duplicate-pair",
        pod_doc(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
            ]
        ),
        "spec.topologySpreadConstraints[1].{topologyKey, whenUnsatisfiable}: Duplicate value: "
        '"zone, DoNotSchedule"',
    ),
    # taints and tolerations
    (
        "taint-effect-enum",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "k", "effect": "NoScheduling"}]},
        },
        'Node n1: spec.taints[0].effect: Unsupported value: "NoScheduling"',
    ),
    (
        "taint-effect-missing",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "k"}]},
        },
        "Node n1: spec.taints[0].effect: Required value",
    ),
    (
        "taint-key-missing",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"effect": "NoSchedule"}]},
        },
        "Node n1: spec.taints[0].key: Required value",
    ),
    (
        "taint-duplicate",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {
                "taints": [
                    {"key": "k", "value": "a", "effect": "NoSchedule"},
                    {"key": "k", "value": "b", "effect": "NoSchedule"},
                ]
            },
        },
        "Node n1: spec.taints[1]: Duplicate value",
    ),
    (
        "toleration-effect-enum",
        pod_doc(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExec"}]),
        'spec.tolerations[0].effect: Unsupported value: "NoExec"',
    ),
    (
        "toleration-operator-enum",
        pod_doc(tolerations=[{"key": "k", "operator": "In"}]),
        'spec.tolerations[0].operator: Unsupported value: "In"',
    ),
    (
        "toleration-empty-key-equal",
        pod_doc(tolerations=[{"operator": "Equal", "value": "v"}]),
        "spec.tolerations[0].operator: Invalid value: operator must be Exists when `key` is empty",
    ),
    (
        "toleration-exists-with-value",
        pod_doc(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        "spec.tolerations[0].operator: Invalid value: value must be empty when `operator` is "
        "'Exists'",
    ),
    (
        "toleration-seconds-without-no-execute",
        pod_doc(
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ]
        ),
        "spec.tolerations[0].effect: Invalid value: effect must be 'NoExecute' when "
        "`tolerationSeconds` is set",
    ),
    # weights
    (
        "node-affinity-weight-zero",
        pod_doc(
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 0,
                            "preference": {
                                "matchExpressions": [{"key": "a", "operator": "Exists"}]
                            },
                        }
                    ]
                }
            }
        ),
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "Invalid value: 0: "
        "must be in the range 1-100",
    ),
    (
        "pod-affinity-weight-101",
        affinity("podAffinity", False, {"labelSelector": SEL, "topologyKey": HOST}, weight=101),
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "Invalid value: 101",
    ),
    # other enums and ranges
    (
        "pod-preemption-policy-enum",
        pod_doc(preemptionPolicy="Sometimes"),
        'spec.preemptionPolicy: Unsupported value: "Sometimes"',
    ),
    (
        "priority-class-preemption-policy-enum",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "p"},
            "value": 1,
            "preemptionPolicy": "never",
        },
        'PriorityClass p: preemptionPolicy: Unsupported value: "never"',
    ),
    (
        "priority-class-too-high",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "p"},
            "value": 1_000_000_001,
        },
        "PriorityClass p: value: Invalid value: 1000000001: maximum allowed value of a user "
        "defined priority",
    ),
    (
        "priority-class-system-prefix",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "system-mine"},
            "value": 1,
        },
        "PriorityClass system-mine: metadata.name: Invalid value",
    ),
    (
        "port-protocol-enum",
        with_path(POD, f"{CONTAINER0}.ports", [{"containerPort": 80, "protocol": "tcp"}]),
        'spec.containers[0].ports[0].protocol: Unsupported value: "tcp"',
    ),
    (
        "container-port-range",
        with_path(POD, f"{CONTAINER0}.ports", [{"containerPort": 0}]),
        "spec.containers[0].ports[0].containerPort: Invalid value: 0",
    ),
    (
        "host-port-range",
        with_path(POD, f"{CONTAINER0}.ports", [{"containerPort": 80, "hostPort": 70000}]),
        "spec.containers[0].ports[0].hostPort: Invalid value: 70000",
    ),
    (
        "init-restart-policy-enum",
        pod_doc(initContainers=[{"name": "i", "restartPolicy": "Never"}]),
        'spec.initContainers[0].restartPolicy: Unsupported value: "Never"',
    ),
    (
        "regular-container-restart-policy",
        with_path(POD, f"{CONTAINER0}.restartPolicy", "Always"),
        "spec.containers[0].restartPolicy: Forbidden",
    ),
    (
        "pod-phase-enum",
        with_path(POD, "status", {"phase": "Sleeping"}),
        'status.phase: Unsupported value: "Sleeping"',
    ),
    (
        "pdb-both-set",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": 1, "maxUnavailable": 1},
        },
        "PodDisruptionBudget default/b: spec: Invalid value: minAvailable and maxUnavailable "
        "cannot be both set",
    ),
    (
        "pdb-bad-percentage",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"maxUnavailable": "150%"},
        },
        'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
    ),
    (
        "pdb-not-a-percentage",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": "half"},
        },
        'spec.minAvailable: Invalid value: "half": must be an integer or percentage',
    ),
    (
        "pdb-negative",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": -1},
        },
        "spec.minAvailable: Invalid value: -1",
    ),
    (
        "pod-group-timeout",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2, "scheduleTimeoutSeconds": 0},
        },
        "PodGroup default/g: spec.scheduleTimeoutSeconds: Invalid value: 0",
    ),
    # containers
    ("no-containers", pod_doc(containers=[]), "Pod default/web-1: spec.containers: Required value"),
    (
        "container-name-missing",
        pod_doc(containers=[{"image": "x"}]),
        "spec.containers[0].name: Required value",
    ),
    (
        "container-name-duplicate",
        pod_doc(initContainers=[{"name": "c"}]),
        'spec.containers[0].name: Duplicate value: "c"',
    ),
    (
        "request-above-limit",
        with_path(
            POD, f"{CONTAINER0}.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
        ),
        "spec.containers[0].resources.requests.cpu: Invalid value: must be less than or equal to "
        "the limit",
    ),
    (
        "scheduling-gate-duplicate",
        pod_doc(schedulingGates=[{"name": "a"}, {"name": "a"}]),
        'spec.schedulingGates[1].name: Duplicate value: "a"',
    ),
    (
        "pod-affinity-match-label-keys-without-selector",
        affinity("podAffinity", True, {"topologyKey": HOST, "matchLabelKeys": ["x"]}),
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".matchLabelKeys: Forbidden",
    ),
    # wrong types
    (
        "string-for-list",
        pod_doc(containers="nginx"),
        "Pod default/web-1: spec.containers: expected array, got string",
    ),
    (
        "string-for-object",
        with_path(POD, "metadata.labels", "app=web"),
        "metadata.labels: expected object, got string",
    ),
    (
        "int-label-value",
        with_path(POD, "metadata.labels", {"app": 1}),
        "metadata.labels.app: expected string, got integer",
    ),
    (
        "string-for-int",
        spread(maxSkew="1"),
        "spec.topologySpreadConstraints[0].maxSkew: expected integer, got string",
    ),
    (
        "float-for-int",
        spread(maxSkew=1.5),
        "spec.topologySpreadConstraints[0].maxSkew: expected integer, got number",
    ),
    (
        "int-for-bool",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"unschedulable": 1},
        },
        "Node n1: spec.unschedulable: expected boolean, got integer",
    ),
    (
        "list-for-spec",
        with_path(POD, "spec", []),
        "Pod default/web-1: spec: expected object, got array",
    ),
    (
        "bad-timestamp",
        with_path(POD, "metadata.creationTimestamp", "yesterday"),
        'metadata.creationTimestamp: invalid RFC 3339 timestamp "yesterday"',
    ),
    (
        "timestamp-without-zone",
        with_path(POD, "metadata.creationTimestamp", "2024-01-02T00:00:00"),
        'metadata.creationTimestamp: invalid RFC 3339 timestamp "2024-01-02T00:00:00": no time '
        "zone",
    ),
    (
        "bad-resource-version",
        with_path(POD, "metadata.resourceVersion", "abc"),
        'metadata.resourceVersion: invalid integer string "abc"',
    ),
    (
        "list-items-not-a-list",
        {"apiVersion": "v1", "kind": "List", "items": {"a": 1}},
        "List: items: expected array",
    ),
    ("document-not-a-mapping", ["a", "b"], "expected a mapping (an object), got array"),
    ("document-is-a-string", "just text", "expected a mapping (an object), got string"),
]


@pytest.mark.parametrize(("doc", "expected"), [pytest.param(d, e, id=i) for i, d, e in INVALID])
def test_invalid_manifest(doc, expected):
    assert expected in error_of(doc)


def test_error_message_format_is_exact():
    doc = with_path(POD, f"{CONTAINER0}.resources", {"requests": {"cpu": "abc"}})
    with pytest.raises(ManifestError) as excinfo:
        load_manifest_text(json.dumps(doc), source="pods.yaml")
    e = excinfo.value
    assert str(e) == (
        'Pod default/web-1: spec.containers[0].resources.requests.cpu: invalid quantity "abc" '
        "(pods.yaml document 1)"
    )
    assert (e.kind, e.name, e.path) == (
        "Pod",
        "default/web-1",
        "spec.containers[0].resources.requests.cpu",
    )


def test_error_names_the_namespace():
    doc = with_path(pod_doc(nodeSelctor={}), "metadata.namespace", "team")
    assert "Pod team/web-1: spec.nodeSelctor: unknown field" in error_of(doc)


def test_duplicate_objects_in_one_text():
    message = error_of_text(
        json.dumps(pod_doc()) + "\n---\n" + json.dumps(pod_doc()), source="x.yaml"
    )
    assert message.startswith(
        "Pod default/web-1: duplicate object (first defined in x.yaml document 1)"
    )
    assert "x.yaml document 2" in message


def test_duplicate_cluster_scoped_ignores_namespace():
    a = node_doc("n")
    b = with_path(node_doc("n"), "metadata.namespace", "other")
    assert "Node n: duplicate object" in error_of(a, b)


def test_yaml_syntax_error_names_file_and_line():
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n"
    message = error_of_text(text, source="pods.yaml")
    assert message.startswith("pods.yaml:")
    assert "YAML syntax error" in message
    assert "line 5" in message or "line 4" in message


def test_yaml_syntax_error_line_number():
    text = "a: 1\nb: 2\nc: : :\n"
    message = error_of_text(text, source="f.yaml")
    assert message.startswith("f.yaml:3: YAML syntax error")


def test_json_syntax_error():
    message = error_of_text('{"apiVersion": "v1",\n "kind": }', source="p.json")
    assert message.startswith("p.json:2: invalid JSON")


def test_multi_document_error_names_the_document():
    text = json.dumps(pod_doc("a")) + "\n---\n" + json.dumps(pod_doc("b", nodeSelctor={}))
    assert "(cluster.yaml document 2)" in error_of_text(text, source="cluster.yaml")


# --- priorities ---------------------------------------------------------------------------


def pc_doc(name: str, value: int, **extra: Any) -> dict[str, Any]:
    doc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    doc.update(extra)
    return doc


def resolved(*docs: Any):
    m = load_docs(*docs)
    resolve_priorities(m)
    return m.pods


def priority_error(*docs: Any) -> str:
    m = load_docs(*docs)
    with pytest.raises(ManifestError) as excinfo:
        resolve_priorities(m)
    return str(excinfo.value)


def test_priority_from_class():
    (pod,) = resolved(pc_doc("high", 1000), pod_doc(priorityClassName="high"))
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "PreemptLowerPriority")


def test_preemption_policy_from_class():
    (pod,) = resolved(
        pc_doc("batch", 10, preemptionPolicy="Never"), pod_doc(priorityClassName="batch")
    )
    assert (pod.spec.priority, pod.spec.preemption_policy) == (10, "Never")


def test_global_default_applies_to_pods_without_class():
    a, b = resolved(
        pc_doc("default", 5, globalDefault=True),
        pc_doc("high", 1000),
        pod_doc("a"),
        pod_doc("b", priorityClassName="high"),
    )
    assert (a.spec.priority, a.spec.priority_class_name) == (5, "default")
    assert b.spec.priority == 1000


def test_no_class_and_no_default_is_zero():
    (pod,) = resolved(pod_doc())
    assert pod.spec.priority == 0
    assert pod.spec.priority_class_name == ""


def test_system_classes_exist():
    (pod,) = resolved(pod_doc(priorityClassName="system-node-critical"))
    assert pod.spec.priority == 2_000_001_000


def test_explicit_priority_matching_class_is_fine():
    (pod,) = resolved(pc_doc("high", 1000), pod_doc(priorityClassName="high", priority=1000))
    assert pod.spec.priority == 1000


def test_unknown_class_names_the_pod():
    message = priority_error(pod_doc("web-1", priorityClassName="nope"))
    assert (
        message
        == 'Pod default/web-1: spec.priorityClassName: no PriorityClass with name "nope" was found'
    )


def test_two_global_defaults():
    message = priority_error(
        pc_doc("a", 1, globalDefault=True), pc_doc("b", 2, globalDefault=True), pod_doc()
    )
    assert "only one PriorityClass can be marked as globalDefault" in message
    assert "a, b" in message


@pytest.mark.parametrize(
    ("docs", "priority", "warning"),
    [
        pytest.param(
            [pc_doc("high", 1000), pod_doc(priorityClassName="high", priority=7)],
            7,
            'Pod default/web-1: spec.priority: 7 differs from PriorityClass "high" (1000); '
            "using spec.priority 7",
            id="class-value-changed-since",
        ),
        pytest.param(
            [pod_doc(priorityClassName="gone", priority=50)],
            50,
            'Pod default/web-1: spec.priorityClassName: no PriorityClass with name "gone" '
            "was found; using spec.priority 50",
            id="class-deleted-since",
        ),
        pytest.param([pod_doc(priority=7)], 7, "", id="no-class-at-all"),
        pytest.param(
            [pc_doc("default", 5, globalDefault=True), pod_doc(priority=0)],
            0,
            "",
            id="from-before-a-global-default",
        ),
        pytest.param(
            [pc_doc("high", 1000), pod_doc(priorityClassName="high", priority=1000)],
            1000,
            "",
            id="agrees",
        ),
    ],
)
def test_a_present_spec_priority_is_trusted(docs: list[Any], priority: int, warning: str):
    """Existing pods keep the priority they were admitted with (Kubernetes Pod Priority docs); a
    disagreement
    with today's classes is a warning, never an error (kube-scheduler reads spec.priority)."""
    m = load_docs(*docs)
    warnings = resolve_priorities(m)
    assert m.pods[0].spec.priority == priority
    assert warnings == ([warning] if warning else [])
    assert m.pods[0].spec.priority_class_name == docs[-1]["spec"].get("priorityClassName", "")


def test_explicit_preemption_policy_disagreeing_with_class():
    message = priority_error(pod_doc(preemptionPolicy="Never"))
    assert "spec.preemptionPolicy: the string value of PreemptionPolicy (Never)" in message


def test_resolve_with_classes_from_elsewhere():
    m = load_docs(pod_doc(priorityClassName="high"))
    stored = load_docs(pc_doc("high", 42)).priority_classes
    resolve_priorities(m, stored)
    assert m.pods[0].spec.priority == 42
