"""`berth run` (one worker, one binder, real Redis and broker, services as processes) places
every pod exactly where `berth schedule` does with the same seed, on sequential workloads."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli.audit import validate_mapping
from cli.bench.workloads import WORKLOADS
from cli.run import run_pipeline
from cli.servers import DevServers
from scheduling.dryrun import run_dry_async, to_json
from shared.config import load_config
from shared.models import Manifests, PriorityClass, cluster_meta, load_manifests
from tests.builders import make_node, make_pod

HOST = "kubernetes.io/hostname"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _examples() -> Manifests:
    return load_manifests(EXAMPLES / "cluster.yaml", EXAMPLES / "pods.yaml")


def _workload(name: str, nodes: int, pods: int, running: int = 0) -> Callable[[], Manifests]:
    def build() -> Manifests:
        workload = WORKLOADS[name](nodes, pods, running)
        return Manifests(nodes=workload.nodes, pods=[*workload.running, *workload.pending])

    return build


def _preemption() -> Manifests:
    """Low-priority pods fill three nodes; two high-priority pods must each evict two."""
    nodes = [
        make_node(f"n{i}").capacity(cpu="4", memory="16Gi", pods=10).label(HOST, f"n{i}").obj()
        for i in range(3)
    ]
    low = [
        make_pod(f"low-{i}").priority_class("low").req(cpu="2").node(f"n{i % 3}").obj()
        for i in range(6)
    ]
    high = [make_pod(f"high-{i}").priority_class("high").req(cpu="3").obj() for i in range(2)]
    classes = [
        PriorityClass(metadata=cluster_meta("low"), value=1),
        PriorityClass(metadata=cluster_meta("high"), value=1000),
    ]
    return Manifests(nodes=nodes, pods=[*low, *high], priority_classes=classes)


def _essentials(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    keys = ("pod", "status", "node", "nominatedNode", "victims", "message")
    return [tuple(p[k] for k in keys) for p in report["pods"]]


@pytest.mark.parametrize(
    ("build", "config", "seed"),
    [
        pytest.param(_examples, None, 0, id="examples"),
        pytest.param(_examples, "binpacking-config.yaml", 3, id="examples-binpacking"),
        pytest.param(
            _workload("scheduling-basic", 120, 400), None, 7, id="basic-120-nodes-random-ties"
        ),
        pytest.param(_workload("topology-spreading", 30, 400, 6), None, 1, id="spread"),
        pytest.param(_workload("pod-anti-affinity", 20, 30), None, 2, id="anti-affinity"),
        pytest.param(_workload("pod-affinity", 20, 40, 1), None, 4, id="affinity"),
        pytest.param(_workload("unschedulable", 10, 30), None, 5, id="unschedulable"),
        pytest.param(_preemption, None, 6, id="preemption"),
    ],
)
async def test_run_places_pods_like_the_dry_run(
    dev_servers: DevServers, build: Callable[[], Manifests], config: str | None, seed: int
) -> None:
    config_path = str(EXAMPLES / config) if config else None
    expected = to_json(
        await run_dry_async(build(), load_config(config_path) if config_path else None, seed=seed)
    )
    manifests = build()
    report, settled = await run_pipeline(
        copy.deepcopy(manifests),
        config_path=config_path,
        seed=seed,
        seconds=120,
        servers=dev_servers,
    )
    assert settled
    assert _essentials(report) == _essentials(expected)
    placements = {p["pod"]: p["node"] for p in report["pods"] if p["node"]}
    evicted = {victim for p in report["pods"] for victim in p["victims"]}
    remaining = [pod for pod in manifests.pods if pod.key not in evicted]
    assert validate_mapping(manifests.nodes, placements, remaining) == []
