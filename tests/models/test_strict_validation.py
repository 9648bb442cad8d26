"""What the API server refuses in a user's write that berth's decoding alone let through
(issue 19, item 7), each case named after the field and worded as upstream's
pkg/apis/core/validation words it; the accepted cases beside them are the boundaries."""

from __future__ import annotations

import pytest

from shared.models import ManifestError, Manifests, load_manifest_text
from shared.models.admission import admit

POD = """apiVersion: v1
kind: Pod
metadata:
  name: p
{meta}
spec:
{spec}
  containers:
{containers}
"""
CONTAINER = """  - name: c
    image: busybox"""


def pod_text(spec: str = "", containers: str = CONTAINER, meta: str = "") -> str:
    return POD.format(spec=spec, containers=containers, meta=meta)


CASES = [
    # (id, manifest, the refusal's text or "" when accepted)
    ("valid", pod_text(), ""),
    (
        "container-name-uppercase",
        pod_text(containers="  - {name: C1, image: i}"),
        'spec.containers[0].name: Invalid value: "C1"',
    ),
    (
        "container-name-64",
        pod_text(containers=f"  - {{name: {'c' * 64}, image: i}}"),
        "must be no more than 63 characters",
    ),
    ("container-name-63", pod_text(containers=f"  - {{name: {'c' * 63}, image: i}}"), ""),
    ("no-image", pod_text(containers="  - {name: c}"), "spec.containers[0].image: Required value"),
    (
        "image-with-spaces",
        pod_text(containers="  - {name: c, image: ' busybox'}"),
        "must not have spaces",
    ),
    (
        "duplicate-host-ports",
        pod_text(
            containers="""  - name: a
    image: i
    ports: [{containerPort: 80, hostPort: 8080}]
  - name: b
    image: i
    ports: [{containerPort: 81, hostPort: 8080}]"""
        ),
        'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"',
    ),
    (
        "same-host-port-other-protocol",
        pod_text(
            containers="""  - name: a
    image: i
    ports:
    - {containerPort: 80, hostPort: 8080}
    - {containerPort: 80, hostPort: 8080, protocol: UDP}"""
        ),
        "",
    ),
    (
        "host-network-port-mismatch",
        pod_text(
            spec="  hostNetwork: true",
            containers="  - {name: c, image: i, ports: [{containerPort: 80, hostPort: 8080}]}",
        ),
        "must match `containerPort` when `hostNetwork` is true",
    ),
    (
        "extended-without-limit",
        pod_text(
            containers="  - {name: c, image: i, resources: {requests: {example.com/foo: '1'}}}"
        ),
        "Limit must be set for non overcommitable resources (example.com/foo)",
    ),
    (
        "extended-request-not-limit",
        pod_text(
            containers="  - {name: c, image: i, resources: {requests: {example.com/foo: '1'}, "
            "limits: {example.com/foo: '2'}}}"
        ),
        "must be equal to example.com/foo limit",
    ),
    (
        "extended-limit-only",
        pod_text(containers="  - {name: c, image: i, resources: {limits: {example.com/foo: '2'}}}"),
        "",
    ),
    (
        "hugepages-alone",
        pod_text(
            containers="  - {name: c, image: i, resources: {requests: {hugepages-2Mi: 2Mi}, "
            "limits: {hugepages-2Mi: 2Mi}}}"
        ),
        "HugePages require cpu or memory",
    ),
    (
        "hugepages-with-memory",
        pod_text(
            containers="  - {name: c, image: i, resources: {requests: {hugepages-2Mi: 2Mi, "
            "memory: 1Gi}, limits: {hugepages-2Mi: 2Mi, memory: 1Gi}}}"
        ),
        "",
    ),
    (
        "node-selector-bad-key",
        pod_text(spec="  nodeSelector: {'bad key': x}"),
        'spec.nodeSelector: Invalid value: "bad key"',
    ),
    (
        "node-selector-bad-value",
        pod_text(spec="  nodeSelector: {zone: 'a b'}"),
        'spec.nodeSelector: Invalid value: "a b"',
    ),
    (
        "toleration-bad-key",
        pod_text(spec="  tolerations: [{key: 'no good', operator: Exists}]"),
        'spec.tolerations[0].key: Invalid value: "no good"',
    ),
    (
        "toleration-bad-value",
        pod_text(spec="  tolerations: [{key: k, value: 'x y'}]"),
        'spec.tolerations[0].value: Invalid value: "x y"',
    ),
    (
        "restart-policy",
        pod_text(spec="  restartPolicy: Sometimes"),
        'spec.restartPolicy: Unsupported value: "Sometimes"',
    ),
    ("restart-policy-never", pod_text(spec="  restartPolicy: Never"), ""),
    (
        "dns-policy",
        pod_text(spec="  dnsPolicy: Bogus"),
        'spec.dnsPolicy: Unsupported value: "Bogus"',
    ),
    (
        "annotation-key",
        pod_text(meta="  annotations: {'Bad Key!': x}"),
        'metadata.annotations: Invalid value: "Bad Key!"',
    ),
    (
        "owner-without-uid",
        pod_text(meta="  ownerReferences: [{apiVersion: v1, kind: ReplicaSet, name: rs}]"),
        'metadata.ownerReferences[0].uid: Invalid value: "": uid must not be empty',
    ),
]


@pytest.mark.parametrize(("text", "refusal"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_api_servers_validation(text: str, refusal: str) -> None:
    manifests: Manifests = load_manifest_text(text, source="pod.yaml")
    if not refusal:
        admit(manifests, [])
        return
    with pytest.raises(ManifestError) as caught:
        admit(manifests, [])
    assert refusal in str(caught.value)
    assert str(caught.value).startswith("Pod default/p: ")


def test_taint_syntax_on_nodes() -> None:
    text = """apiVersion: v1
kind: Node
metadata: {name: n1}
spec:
  taints: [{key: 'has space', value: v, effect: NoSchedule}]
"""
    with pytest.raises(ManifestError) as caught:
        admit(load_manifest_text(text), [])
    assert 'Node n1: spec.taints[0].key: Invalid value: "has space"' in str(caught.value)
