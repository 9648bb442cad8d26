"""Input the API server would refuse is refused at the door, with the object and the field:
names the pipeline cannot carry, resource names and quantities out of any valid range, labels,
duplicate uids, out-of-range integers, and texts too large or nested too deep to parse."""

from __future__ import annotations

from typing import Any

import pytest

from shared.models import ManifestError, load_manifest_text
from shared.models.manifest import MAX_DEPTH, ManifestLoader
from shared.models.quantity import MAX_EXACT_AMOUNT
from tests.models.test_manifest import error_of, load_docs, node_doc, pod_doc, with_path

CONTAINER = "spec.containers.0"


def _ns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _pod_with(path: str, value: Any) -> dict[str, Any]:
    return with_path(pod_doc(), path, value)


CASES = [
    # (document, message fragment that names the object and the field)
    pytest.param(_ns("team a"), "Namespace team a: metadata.name: Invalid value", id="ns-space"),
    pytest.param(_ns("Team"), "lowercase RFC 1123 label", id="ns-uppercase"),
    pytest.param(
        _pod_with("metadata.namespace", "has space"),
        "Pod has space/web-1: metadata.namespace: Invalid value",
        id="pod-namespace-space",
    ),
    pytest.param(
        with_path(pod_doc(), "metadata.name", "a/b"),
        "Pod default/a/b: metadata.name: Invalid value",
        id="pod-name-slash",
    ),
    pytest.param(
        with_path(node_doc(), "metadata.name", "N1"), "Node N1: metadata.name", id="node-upper"
    ),
    pytest.param(
        _pod_with("metadata.labels", {"bad key!": "x"}),
        "Pod default/web-1: metadata.labels: Invalid value",
        id="label-key",
    ),
    pytest.param(
        _pod_with("metadata.labels", {"app": "x" * 64}),
        "metadata.labels.app: Invalid value",
        id="label-value-too-long",
    ),
    pytest.param(
        _pod_with("metadata.uid", "has space"), "metadata.uid: Invalid value", id="uid-space"
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"a b": "1"}}),
        f"{CONTAINER.replace('.0', '[0]')}.resources.requests.a b",
        id="resource-name-space",
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"example/com/aaa": "1"}}),
        "spec.containers[0].resources.requests.example/com/aaa: Invalid value",
        id="resource-name-two-slashes",
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"hugepages/2Mi": "1"}}),
        "prefix must be a domain name",
        id="resource-name-hugepages-typo",
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"example.com/gpu": "0.5"}}),
        "must be an integer (extended resource)",
        id="fractional-extended-resource",
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"cpu": "."}}),
        "invalid quantity",
        id="quantity-dot",
    ),
    pytest.param(
        _pod_with(f"{CONTAINER}.resources", {"requests": {"memory": "e1"}}),
        "invalid quantity",
        id="quantity-e1",
    ),
    pytest.param(
        with_path(node_doc(), "status", {"allocatable": {"a b": "1"}}),
        "Node n1: status.allocatable.a b: Invalid value",
        id="node-resource-name",
    ),
    pytest.param(
        with_path(node_doc(), "status", {"images": [{"names": ["app:1"], "sizeBytes": 2**64 - 1}]}),
        "out of range for a 64-bit integer",
        id="image-size-beyond-int64",
    ),
    pytest.param(
        with_path(node_doc(), "status", {"images": [{"names": ["app:1"], "sizeBytes": 2**60}]}),
        "status.images[0].sizeBytes: Invalid value",
        id="image-size-beyond-exact-range",
    ),
    pytest.param(
        _pod_with(
            "spec.topologySpreadConstraints",
            [{"maxSkew": 2**40, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        ),
        "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 1099511627776: must be a "
        "32-bit integer",
        id="max-skew-int32",
    ),
    pytest.param(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2**31},
        },
        "PodGroup default/g: spec.minMember: Invalid value",
        id="min-member-int32",
    ),
]


@pytest.mark.parametrize(("doc", "fragment"), CASES)
def test_invalid_input_is_refused_naming_object_and_field(doc: dict[str, Any], fragment: str):
    assert fragment in error_of(doc)


def test_duplicate_uids_are_refused():
    a = with_path(pod_doc("a"), "metadata.uid", "same")
    b = with_path(pod_doc("b"), "metadata.uid", "same")
    message = error_of(a, b)
    assert 'Pod default/b: metadata.uid: Duplicate value: "same"' in message
    assert "Pod default/a" in message


def test_valid_names_and_resources_pass():
    doc = with_path(pod_doc("web-1.a"), "metadata.labels", {"example.com/app": "x_y.z-1"})
    doc = with_path(
        doc,
        f"{CONTAINER}.resources",
        {"requests": {"example.com/gpu": "2", "hugepages-2Mi": "4Mi"}},
    )
    [pod] = load_docs(doc, _ns("team-a")).pods
    assert pod.spec.containers[0].resources.requests["example.com/gpu"] == 2


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[" * 5000 + "]" * 5000, id="json-arrays"),
        pytest.param('{"a":' * 3000 + "1" + "}" * 3000, id="json-objects"),
        pytest.param("a:\n" + "".join(" " * (2 * i) + "b:\n" for i in range(1, 3000)), id="yaml"),
        pytest.param("- " * 3000 + "x\n", id="yaml-compact-sequences"),
    ],
)
def test_deep_nesting_is_refused_before_parsing(text: str):
    with pytest.raises(ManifestError, match=f"nested too deeply \\(more than {MAX_DEPTH} levels"):
        load_manifest_text(text, source="deep.yaml")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"kind": "Pod", "n": ' + "9" * 5000 + "}", id="json"),
        pytest.param("kind: Pod\nn: " + "9" * 5000 + "\n", id="yaml"),
    ],
)
def test_numbers_of_thousands_of_digits_are_an_error_not_a_crash(text: str):
    """Python refuses to convert more than 4,300 digits (a ValueError inside the parser)."""
    with pytest.raises(ManifestError, match=r"huge\.yaml: cannot read a value"):
        load_manifest_text(text, source="huge.yaml")


def test_an_integer_field_beyond_int64_is_refused():
    doc = with_path(pod_doc(), "spec.priority", 10**4000)
    assert "spec.priority: Invalid value: a 13288-bit integer is out of range" in error_of(doc)


def test_a_quantity_of_thousands_of_digits_is_an_invalid_quantity():
    doc = _pod_with(f"{CONTAINER}.resources", {"requests": {"cpu": "1" * 5000}})
    assert "spec.containers[0].resources.requests.cpu: invalid quantity" in error_of(doc)


@pytest.mark.parametrize(
    ("name", "raw"),
    [("cpu", "1E"), ("cpu", "1Ei"), ("cpu", "1e18"), ("memory", "9Ei"), ("cpu", str(2**70))],
)
def test_quantities_the_api_server_accepts_are_kept_at_the_largest_exact_amount(
    name: str, raw: str
) -> None:
    """Issue 19: valid quantities beyond what berth carries exactly were refused; they are
    kept as MAX_EXACT_AMOUNT, which no node holds (such a pod stays unschedulable)."""
    doc = _pod_with(f"{CONTAINER}.resources", {"requests": {name: raw}})
    manifests = ManifestLoader()
    manifests.add_document(doc, source="pod.yaml")
    [pod] = manifests.manifests.pods
    assert pod.spec.containers[0].resources.requests[name] == MAX_EXACT_AMOUNT
