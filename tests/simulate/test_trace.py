"""`berth simulate`'s trace: parsing (errors name file, event and field), replicas, node
selections, time compression."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.simulate_trace import NodeSelection, TraceError, parse_trace, split_files
from tests.builders import make_node

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulate"

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "job",
        "namespace": "t",
        "annotations": {
            "pod-complete.stage.kwok.x-k8s.io/delay": "20s",
            "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "40s",
        },
    },
    "spec": {
        "containers": [{"name": "c", "image": "i"}],
        "tolerations": [
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 30,
            }
        ],
    },
}


def trace(*events: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"kind": "Trace", "spec": {"events": list(events), **spec}}


def test_a_trace_parses_sorted_with_replicas() -> None:
    parsed = parse_trace(
        trace(
            {"at": "1m", "recover": {"nodes": ["n1"]}},
            {"at": 0, "pods": [{"replicas": 3, "template": POD}]},
            {"at": "30s", "fail": {"zone": "z", "notReady": True}},
        ),
        "t.yaml",
    )
    assert [(e.at, e.kind) for e in parsed.events] == [
        (0.0, "pods"),
        (30.0, "fail"),
        (60.0, "recover"),
    ]
    names = [p.metadata.name for p in parsed.pods]
    assert names == ["job-0", "job-1", "job-2"]
    assert len({p.metadata.uid for p in parsed.pods}) == 3  # each a pod of its own
    assert parsed.events[1].not_ready is True


def test_time_compression() -> None:
    parsed = parse_trace(
        trace({"at": "10s", "pods": [{"template": POD}]}, duration="100s"), "t.yaml"
    ).scaled(5)
    (pod,) = parsed.pods
    assert parsed.events[0].at == 2.0
    assert parsed.duration == 20.0
    assert pod.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"] == "4.000s"
    assert pod.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] == "8.000s"
    assert pod.spec.tolerations[0].toleration_seconds == 6


def test_node_selection() -> None:
    nodes = [
        make_node("a").label("topology.kubernetes.io/zone", "z1").obj(),
        make_node("b").label("topology.kubernetes.io/zone", "z2").obj(),
    ]
    assert NodeSelection(zone="z2").resolve(nodes) == ["b"]
    assert NodeSelection(nodes=("a", "x")).resolve(nodes) == ["a", "x"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Trace"}, "t.yaml: Trace: spec: expected a map"),
        (trace(), "t.yaml: Trace: spec.events: expected a non-empty list"),
        (trace({"pods": []}), "t.yaml: Trace: spec.events[0].at: required"),
        (trace({"at": "soon", "pods": []}), "spec.events[0].at: invalid duration"),
        (trace({"at": -1, "pods": []}), "spec.events[0].at: must not be negative"),
        (trace({"at": 0}), "spec.events[0]: exactly one of pods, fail, recover"),
        (
            trace({"at": 0, "fail": {"zone": "z", "nodes": ["n"]}}),
            "spec.events[0].fail: give either zone or a list of nodes",
        ),
        (
            trace({"at": 0, "pods": [{"replicas": 0, "template": POD}]}),
            "spec.events[0].pods[0].replicas: expected a positive integer",
        ),
        (
            trace({"at": 0, "pods": [{"template": {"kind": "Pod", "spec": {"x": 1}}}]}),
            "spec.events[0].pods[0]",
        ),
        (
            trace({"at": 0, "pods": [{"template": POD}]}, {"at": 1, "pods": [{"template": POD}]}),
            "pod t/job arrives more than once",
        ),
        (trace({"at": 0, "pods": []}, duration="x"), "t.yaml: Trace: spec.duration"),
    ],
)
def test_errors_name_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_trace(doc, "t.yaml")
    assert message in str(info.value)


def test_split_files(tmp_path: Path) -> None:
    cluster, parsed = split_files(
        [str(EXAMPLES / "zone-failure-cluster.yaml"), str(EXAMPLES / "zone-failure-trace.yaml")]
    )
    assert cluster == [str(EXAMPLES / "zone-failure-cluster.yaml")]
    assert len(parsed.pods) == 60
    assert [e.text() for e in parsed.events if e.kind != "pods"] == [
        "fail zone zone-b",
        "recover zone zone-b",
    ]
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(yaml.safe_dump_all([trace({"at": 0, "pods": []}), POD]))
    with pytest.raises(TraceError, match="a trace file holds the Trace alone"):
        split_files([str(mixed)])
    with pytest.raises(TraceError, match="expected exactly one Trace"):
        split_files([str(EXAMPLES / "zone-failure-cluster.yaml")])
