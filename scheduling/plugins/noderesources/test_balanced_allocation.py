"""NodeResourcesBalancedAllocation: upstream balanced_allocation_test.go (facts only).

Upstream (v1.22+) scores (1 - std) * 100 over the capped fractions; with cpu and memory that
is (1 - |cpuFraction - memFraction| / 2) * 100. Older docs (genericScheduler) describe
(1 - |cpuFraction - memFraction|) * 100 with 0 once a fraction reaches 1, so their printed
values (90/90/80/70, log 93/97) become 95/95/90/85 and 96/98 here, as the ids say.

The upstream table below is the one whose comments print "score (before -> after)": the
"after" value is the v1.35 score checked here (master after v1.35 scores the change instead,
see balanced_allocation.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code
from scheduling.plugins.noderesources import (
    BalancedAllocation,
    BalancedAllocationArgsError,
    new_balanced_allocation,
)
from shared.config.plugin_args import NodeResourcesBalancedAllocationArgs, ResourceSpec
from shared.models import Node, Pod
from shared.models.quantity import QuantityInput
from tests.builders import make_node, make_pod

GPU = "nvidia.com/gpu"


def plugin(*resources: str) -> BalancedAllocation:
    args = None
    if resources:
        specs = [ResourceSpec(name=name, weight=1) for name in resources]
        args = NodeResourcesBalancedAllocationArgs(resources=specs)
    return new_balanced_allocation(args, handle=None)  # type: ignore[arg-type]


def node(name: str, cpu_milli: int, memory: int, gpu: int | None = None) -> Node:
    capacity: dict[str, QuantityInput] = {"cpu": f"{cpu_milli}m", "memory": memory}
    if gpu is not None:
        capacity[GPU] = gpu
    return make_node(name).capacity(capacity).obj()


def cpu_and_memory(node_name: str = "") -> Pod:
    return (
        make_pod(f"cpu-memory-{node_name}")
        .node(node_name)
        .req(cpu="1000m", memory=2000)
        .req(cpu="2000m", memory=3000)
        .obj()
    )


def cpu_only(node_name: str = "") -> Pod:
    return (
        make_pod(f"cpu-{node_name}")
        .node(node_name)
        .req(cpu="1000m", memory=0)
        .req(cpu="2000m", memory=0)
        .obj()
    )


def memory_only(node_name: str = "") -> Pod:
    return make_pod("memory").node(node_name).req(cpu=0, memory=2000).req(cpu=0, memory=3000).obj()


def cpu_memory_gpu(node_name: str) -> Pod:
    return (
        make_pod("gpu")
        .node(node_name)
        .req(cpu="1000m", memory=2000)
        .req({"cpu": "2000m", "memory": 3000, GPU: 3})
        .obj()
    )


def scores(
    ba: BalancedAllocation, pod: Pod, nodes: NodeColumns, *, pre_score: bool = True
) -> list[int]:
    state = CycleState()
    if pre_score:
        assert ba.pre_score(state, pod, nodes, ALL_ROWS).is_success()
    got = ba.score(state, pod, nodes, ALL_ROWS)
    assert not isinstance(got, type(None))
    assert isinstance(got, np.ndarray)
    return [int(v) for v in got]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "resources", "want"),
    [
        pytest.param(
            cpu_and_memory(),
            [node("n1", 4000, 10000), node("n2", 6000, 10000)],
            [],
            (),
            [87, 100],
            id="nothing-scheduled-differently-sized-nodes",
        ),
        pytest.param(
            cpu_and_memory(),
            [node("n1", 10000, 20000), node("n2", 10000, 20000)],
            [cpu_only("n1"), cpu_and_memory("n2")],
            (),
            [82, 95],
            id="pods-scheduled-with-resources",
        ),
        pytest.param(
            cpu_and_memory(),
            [node("n1", 10000, 20000), node("n2", 10000, 50000)],
            [cpu_only("n1"), cpu_and_memory("n2")],
            (),
            [82, 80],
            id="pods-scheduled-differently-sized-nodes",
        ),
        pytest.param(
            memory_only(),
            [node("n1", 3000, 5000), node("n2", 3000, 5000)],
            [cpu_only("n1")],
            (),
            [100, 50],
            id="nodes-reach-min-and-max-score",
        ),
        pytest.param(
            cpu_only(),
            [node("n1", 6000, 10000), node("n2", 6000, 10000)],
            [cpu_only("n1"), cpu_and_memory("n2")],
            (),
            [50, 75],
            id="requested-at-capacity",
        ),
        pytest.param(
            make_pod("p").req({"memory": 0, GPU: 1}).obj(),
            [node("n1", 3500, 40000, gpu=8), node("n2", 3500, 40000, gpu=8)],
            [cpu_and_memory("n2"), cpu_memory_gpu("n1")],
            ("cpu", "memory", GPU),
            [70, 65],
            id="scalar-resource-three-fractions-std-dev",
        ),
        pytest.param(
            cpu_and_memory(),
            [node("n1", 3500, 40000, gpu=8), node("n2", 3500, 40000)],
            [],
            ("cpu", "memory", GPU),
            [63, 63],
            id="scalar-resource-not-requested-is-skipped",
        ),
        pytest.param(
            cpu_only(),
            [node("n1", 4000, 10000)],
            [cpu_and_memory("n1")],
            (),
            [75],
            id="fraction-over-1-is-capped-not-zero",
        ),
        pytest.param(
            make_pod("p").req(cpu=1).obj(),
            [make_node("n1").capacity(pods=10).obj()],
            [],
            (),
            [100],
            id="node-without-cpu-and-memory",
        ),
    ],
)
def test_balanced_allocation(
    pod: Pod, nodes: list[Node], pods: list[Pod], resources: tuple[str, ...], want: list[int]
) -> None:
    assert scores(plugin(*resources), pod, NodeColumns(nodes, pods)) == want


def test_score_without_pre_score_is_the_same() -> None:
    nodes = NodeColumns(
        [node("n1", 10000, 20000), node("n2", 10000, 20000)], [cpu_only("n1"), cpu_and_memory("n2")]
    )
    assert scores(plugin(), cpu_and_memory(), nodes, pre_score=False) == [82, 95]


def test_best_effort_pod_is_skipped() -> None:
    nodes = NodeColumns([node("n1", 4000, 10000), node("n2", 4000, 10000)])
    ba = plugin()
    pod = make_pod("p").container().obj()
    assert ba.pre_score(CycleState(), pod, nodes, ALL_ROWS).code == Code.SKIP
    # Called without PreScore (as upstream allows), a best-effort pod scores 0.
    assert ba.score(CycleState(), pod, nodes, ALL_ROWS).tolist() == [0, 0]  # type: ignore[union-attr]


def test_plain_requests_not_non_zero_defaults() -> None:
    """A container asking nothing adds nothing here (Fit's strategies would add 100m/200Mi)."""
    nodes = NodeColumns([node("n1", 1000, 1000)], [make_pod("e").node("n1").container().obj()])
    pod = make_pod("p").req(cpu="500m", memory=500).obj()
    assert scores(plugin(), pod, nodes) == [100]


@pytest.mark.parametrize(
    ("cpu_milli", "memory", "want"),
    [
        pytest.param(100, 200, 95, id="10%-20%-seed-90"),
        pytest.param(200, 100, 95, id="20%-10%-seed-90"),
        pytest.param(200, 400, 90, id="20%-40%-seed-80"),
        pytest.param(200, 500, 85, id="20%-50%-seed-70"),
        pytest.param(1000, 500, 75, id="cpu-fraction-1-seed-0"),
    ],
)
def test_fraction_table(cpu_milli: int, memory: int, want: int) -> None:
    nodes = NodeColumns([node("n", 1000, 1000)])
    pod = make_pod("p").req(cpu=f"{cpu_milli}m", memory=memory).obj()
    assert scores(plugin(), pod, nodes) == [want]


@pytest.mark.parametrize(
    ("requested", "want"),
    [
        pytest.param((7850, 6786383872), 96, id="log-node-A-seed-93"),
        pytest.param((6950, 7627341824), 98, id="log-node-B-seed-97"),
    ],
)
def test_from_the_log(requested: tuple[int, int], want: int) -> None:
    """cpuF 0.16423 / memF 0.10274 -> (1 - 0.06149 / 2) * 100 = 96.9 -> 96 (seed: 93)."""
    nodes = NodeColumns([node("n", 47800, 66054406144)])
    pod = make_pod("p").req(cpu=f"{requested[0]}m", memory=requested[1]).obj()
    assert scores(plugin(), pod, nodes) == [want]


def test_new_rejects_foreign_args() -> None:
    with pytest.raises(BalancedAllocationArgsError, match="NodeResourcesBalancedAllocationArgs"):
        new_balanced_allocation(object(), handle=None)  # type: ignore[arg-type]
