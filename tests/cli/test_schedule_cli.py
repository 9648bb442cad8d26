"""`berth schedule` and `berth bench` honour their command-line contract (issue 2, section 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def schedule_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, out, err = run(
        capsys,
        "schedule",
        "-f",
        str(EXAMPLES / "cluster.yaml"),
        "-f",
        str(EXAMPLES / "pods.yaml"),
        "-o",
        "json",
        *extra,
    )
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def test_json_lists_every_pending_pod_in_input_order(capsys):
    pods = schedule_json(capsys)["pods"]
    assert isinstance(pods, list)
    assert [p["pod"] for p in pods] == [
        "team-a/etl-1",
        "team-b/trainer-1",
        "team-b/gpu-job-1",
        "serving/web-1",
        "team-a/huge-1",
        "team-a/gated-1",
        "team-c/other-1",
    ]
    by_name = {p["pod"]: p for p in pods}
    # The only node with the accelerator label, the toleration and free GPUs.
    assert by_name["team-b/gpu-job-1"]["node"] == "zone-b-gpu"
    # Highest priority goes first and prefers ssd + its image: zone-a-1.
    assert by_name["team-b/trainer-1"]["node"] == "zone-a-1"
    assert by_name["team-a/gated-1"]["status"] == "Gated"
    assert by_name["team-c/other-1"]["status"] == "Skipped"
    web = by_name["serving/web-1"]
    assert web["status"] == "Unschedulable"
    assert web["node"] is None
    assert web["message"].startswith("0/6 nodes are available: ")
    assert web["filtered"]["zone-a-2"] == {
        "plugin": "NodePorts",
        "reasons": ["node(s) didn't have free ports for the requested pod ports"],
    }
    assert web["filtered"]["zone-c-1"]["plugin"] == "NodeUnschedulable"
    for pod in pods:
        assert set(pod) >= {"pod", "status", "node", "nominatedNode", "victims", "message"}
        assert "scores" not in pod or pod["scores"] == {}


def test_explain_adds_weighted_scores_that_sum_to_the_total(capsys):
    pods = schedule_json(capsys, "--explain")["pods"]
    etl = next(p for p in pods if p["pod"] == "team-a/etl-1")
    assert etl["scores"], "a pod with several feasible nodes has scores"
    for node, score in etl["scores"].items():
        assert score["total"] == sum(score["plugins"].values()), node
    best = max(score["total"] for score in etl["scores"].values())
    assert etl["scores"][etl["node"]]["total"] == best


def test_same_seed_same_answer(capsys):
    first = schedule_json(capsys, "--seed", "7")
    second = schedule_json(capsys, "--seed", "7")
    assert first == second


def test_table_output_is_readable(capsys):
    code, out, _ = run(
        capsys, "schedule", "-f", str(EXAMPLES / "cluster.yaml"), "-f", str(EXAMPLES / "pods.yaml")
    )
    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.split()[:3] == ["POD", "STATUS", "NODE"]
    assert any(row.startswith("team-b/gpu-job-1") and "zone-b-gpu" in row for row in rows)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelctor: {a: b}\n"
            "  containers: [{name: c, image: i}]\n",
            "spec.nodeSelctor",
            id="unknown-field",
        ),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    image: i\n    resources: {requests: {cpu: -1}}\n",
            "requests.cpu",
            id="negative-quantity",
        ),
        pytest.param("apiVersion: v9\nkind: Pod\nmetadata: {name: p}\n", "v9", id="bad-version"),
        pytest.param("kind: [\n", "pods.yaml", id="yaml-syntax"),
    ],
)
def test_invalid_input_exits_1_with_the_error_on_stderr_only(capsys, tmp_path, document, expected):
    bad = tmp_path / "pods.yaml"
    bad.write_text(document)
    code, out, err = run(capsys, "schedule", "-f", str(EXAMPLES / "cluster.yaml"), "-f", str(bad))
    assert code == 1
    assert out == ""
    assert expected in err


def test_missing_file_exits_1(capsys, tmp_path):
    code, out, err = run(capsys, "schedule", "-f", str(tmp_path / "absent.yaml"))
    assert code == 1
    assert out == ""
    assert "absent.yaml" in err


def test_invalid_config_exits_1(capsys, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "percentageOfNodesToScore: 150\n"
    )
    code, out, err = run(
        capsys,
        "schedule",
        "-f",
        str(EXAMPLES / "cluster.yaml"),
        "-f",
        str(EXAMPLES / "pods.yaml"),
        "--config",
        str(config),
    )
    assert code == 1
    assert out == ""
    assert "percentageOfNodesToScore" in err


def test_binpacking_config_packs_pods_onto_the_fullest_node(capsys):
    spread = {p["pod"]: p["node"] for p in schedule_json(capsys)["pods"]}
    packed = {
        p["pod"]: p["node"]
        for p in schedule_json(capsys, "--config", str(EXAMPLES / "binpacking-config.yaml"))["pods"]
    }
    # LeastAllocated puts etl-1 on an empty large node; MostAllocated on the busiest that fits.
    assert spread["team-a/etl-1"] != packed["team-a/etl-1"]


def test_bench_prints_the_contracted_figures(capsys):
    code, out, _ = run(
        capsys, "bench", "--mode", "in-process", "--nodes", "60", "--pods", "200", "-o", "json"
    )
    assert code == 0
    figures = json.loads(out)
    assert figures["pods_scheduled"] == 200
    assert figures["throughput_avg"] > 0
    assert 0 < figures["cycle_p50_ms"] <= figures["cycle_p99_ms"]
    # The floor is measured in the same run, and the ratio is of the figure to it.
    assert figures["floor_pods_per_s"] > 0
    ratio = figures["throughput_avg"] / figures["floor_pods_per_s"]
    assert figures["ratio_to_floor"] == round(ratio, 2)
    # Identical pods: one signature built once, then every pod reused it.
    reuse = figures["signature_reuse"]
    assert (reuse["builds"], reuse["hits"], reuse["fallbacks"]) == (1, 199, {})


def test_bench_without_reuse_places_the_same_pods(capsys):
    """--no-reuse runs the full cycle for every pod; the placements are the same, so every
    pod is scheduled either way (the property test compares them node by node)."""
    code, out, _ = run(
        capsys, "bench", "--nodes", "60", "--pods", "200", "--no-reuse", "-o", "json"
    )
    assert code == 0
    figures = json.loads(out)
    assert figures["pods_scheduled"] == 200
    assert "signature_reuse" not in figures


def test_bench_rejects_an_unknown_workload(capsys):
    code, out, err = run(capsys, "bench", "--workload", "nope", "--nodes", "5", "--pods", "1")
    assert code == 1
    assert out == ""
    assert "unknown workload" in err
