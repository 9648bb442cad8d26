"""NodeResourcesFit PreFilter and Filter: upstream fit_test.go (facts only) and worked examples.

Upstream's TestEnoughRequests node: allocatable cpu 10m, memory 20, pods 32, example.com/aaa 5,
ephemeral-storage 20, hugepages-2Mi 5; one existing pod holds the "used" amounts. Current
upstream answers UnschedulableAndUnresolvable when the pod's request of an insufficient
resource is larger than the node's allocatable (preemption cannot help), as the expectations
below say.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import FilterResult
from scheduling.framework.status import Code, Status
from scheduling.plugins.noderesources import (
    TOO_MANY_PODS,
    Fit,
    FitArgsError,
    PodResourceRequest,
    new,
)
from shared.config.plugin_args import NodeResourcesFitArgs, ScoringStrategy
from shared.models import Node, Pod
from shared.models.quantity import QuantityInput
from tests.builders import PodBuilder, make_node, make_pod

NAME = "NodeResourcesFit"
AAA = "example.com/aaa"
BBB = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HUGE = "hugepages-2Mi"
G = 1000**3


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, NAME)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, NAME)


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def statuses(result: FilterResult | Status | None, count: int) -> list[Status | None]:
    """One Status (None = fits) per evaluated row, checking FilterResult's invariants."""
    if result is None:
        return [None] * count
    assert isinstance(result, FilterResult)
    assert result.ok.shape == (count,)
    out: list[Status | None] = [None] * count
    covered = np.zeros(count, dtype=np.int64)
    for status, mask in result.failures:
        covered += mask
        for i in np.flatnonzero(mask).tolist():
            out[i] = status
    assert (covered == ~result.ok).all(), "failure masks must be disjoint and cover ~ok"
    return out


def run_filter(
    plugin: Fit, pod: Pod, nodes: NodeColumns, rows: Rows = ALL_ROWS
) -> list[Status | None]:
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, nodes)
    assert status.is_success()
    return statuses(plugin.filter(state, pod, nodes, rows), nodes.size_of(rows))


def fit(**args: list[str]) -> Fit:
    return new(NodeResourcesFitArgs(**args), handle=None)  # type: ignore[arg-type]


def upstream_node() -> Node:
    return (
        make_node("n1")
        .capacity(
            {
                "cpu": "10m",
                "memory": 20,
                "pods": 32,
                AAA: 5,
                "ephemeral-storage": 20,
                HUGE: 5,
            }
        )
        .obj()
    )


def resource_pod(
    *containers: Mapping[str, QuantityInput], init: tuple[Mapping[str, QuantityInput], ...] = ()
) -> PodBuilder:
    builder = make_pod("p")
    for requests in containers:
        builder.req(requests)
    for requests in init:
        builder.init_req(requests)
    return builder


def existing(**requests: QuantityInput) -> Pod:
    return make_pod("existing").node("n1").req(requests).obj()


# ------------------------------------------------------------------- the request
@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(
            make_pod()
            .init_req(cpu=2, memory="1G")
            .init_req(cpu=2, memory="3G")
            .req(cpu=2, memory="1G")
            .req(cpu=1, memory="1G")
            .obj(),
            {"cpu": 3000, "memory": 3 * G},
            id="max-of-container-sum-and-each-init-container",
        ),
        pytest.param(
            make_pod()
            .init_req(cpu=2, memory="1G")
            .init_req(cpu=2, memory="3G")
            .req(cpu=2, memory="1G")
            .req(cpu=1, memory="1G")
            .overhead(cpu="250m", memory="120Mi")
            .obj(),
            {"cpu": 3250, "memory": 3 * G + 120 * 2**20},
            id="overhead-added-after-the-max",
        ),
        pytest.param(
            make_pod()
            .lim(cpu="500m", memory="100Mi")
            .lim(cpu="1500m", memory="100Mi")
            .overhead(cpu="250m", memory="120Mi")
            .obj(),
            {"cpu": 2250, "memory": 335544320},
            id="limits-as-requests-plus-kata-fc-overhead",
        ),
        pytest.param(
            make_pod().sidecar_req(cpu=1).init_req(cpu=2).req(cpu=1).obj(),
            {"cpu": 3000},
            id="sidecar-runs-beside-a-later-init-container",
        ),
        pytest.param(
            make_pod().init_req(cpu=2).sidecar_req(cpu=1).req(cpu=1).obj(),
            {"cpu": 2000},
            id="sidecar-adds-to-the-containers",
        ),
        pytest.param(make_pod().obj(), {}, id="no-containers"),
    ],
)
def test_pre_filter_computes_the_pod_request(pod: Pod, want: dict[str, int]) -> None:
    state = CycleState()
    result, status = fit().pre_filter(state, pod, NodeColumns())
    assert result is None
    assert status.is_success()
    request = next(v for v in state._data.values() if isinstance(v, PodResourceRequest))
    assert {k: v for k, v in request.requests.items() if v} == want


@pytest.mark.parametrize(
    ("allocatable_cpu", "want"),
    [
        pytest.param("4", None, id="4-cpu-node-fits-(56%)"),
        pytest.param("2250m", None, id="exactly-2250m-fits"),
        pytest.param("2249m", unresolvable(insufficient("cpu")), id="2249m-never-fits"),
    ],
)
def test_overhead_counts_in_the_filter(allocatable_cpu: str, want: Status | None) -> None:
    pod = (
        make_pod()
        .lim(cpu="500m", memory="100Mi")
        .lim(cpu="1500m", memory="100Mi")
        .overhead(cpu="250m", memory="120Mi")
        .obj()
    )
    node = make_node("n1").capacity(cpu=allocatable_cpu, memory="32Gi", pods=110).obj()
    assert run_filter(fit(), pod, NodeColumns([node])) == [want]


# ------------------------------------------------------- upstream TestEnoughRequests
ENOUGH_REQUESTS = [
    pytest.param(
        make_pod().obj(),
        existing(cpu="10m", memory=20),
        {},
        None,
        id="no-resources-requested-always-fits",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1}).obj(),
        existing(cpu="10m", memory=20),
        {},
        unschedulable(insufficient("cpu"), insufficient("memory")),
        id="too-many-resources-fails",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1}, init=({"cpu": "3m", "memory": 1},)).obj(),
        existing(cpu="8m", memory=19),
        {},
        unschedulable(insufficient("cpu")),
        id="init-container-cpu",
    ),
    pytest.param(
        resource_pod(
            {"cpu": "1m", "memory": 1},
            init=({"cpu": "3m", "memory": 1}, {"cpu": "2m", "memory": 1}),
        ).obj(),
        existing(cpu="8m", memory=19),
        {},
        unschedulable(insufficient("cpu")),
        id="highest-init-container-cpu",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1}, init=({"cpu": "1m", "memory": 3},)).obj(),
        existing(cpu="9m", memory=19),
        {},
        unschedulable(insufficient("memory")),
        id="init-container-memory",
    ),
    pytest.param(
        resource_pod(
            {"cpu": "1m", "memory": 1},
            init=({"cpu": "1m", "memory": 3}, {"cpu": "1m", "memory": 2}),
        ).obj(),
        existing(cpu="9m", memory=19),
        {},
        unschedulable(insufficient("memory")),
        id="highest-init-container-memory",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1}, init=({"cpu": "1m", "memory": 1},)).obj(),
        existing(cpu="9m", memory=19),
        {},
        None,
        id="init-container-fits-max-not-sum",
    ),
    pytest.param(
        resource_pod(
            {"cpu": "1m", "memory": 1},
            init=({"cpu": "1m", "memory": 1}, {"cpu": "1m", "memory": 1}),
        ).obj(),
        existing(cpu="9m", memory=19),
        {},
        None,
        id="multiple-init-containers-fit-max-not-sum",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1}).obj(),
        existing(cpu="5m", memory=5),
        {},
        None,
        id="both-fit",
    ),
    pytest.param(
        resource_pod({"cpu": "2m", "memory": 1}).obj(),
        existing(cpu="9m", memory=5),
        {},
        unschedulable(insufficient("cpu")),
        id="only-memory-fits",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 2}).obj(),
        existing(cpu="5m", memory=19),
        {},
        unschedulable(insufficient("memory")),
        id="only-cpu-fits",
    ),
    pytest.param(
        resource_pod({"cpu": "5m", "memory": 1}).obj(),
        existing(cpu="5m", memory=19),
        {},
        None,
        id="equal-edge-case",
    ),
    pytest.param(
        resource_pod({"cpu": "4m", "memory": 1}, init=({"cpu": "5m", "memory": 1},)).obj(),
        existing(cpu="5m", memory=19),
        {},
        None,
        id="equal-edge-case-init-container",
    ),
    pytest.param(resource_pod({AAA: 1}).obj(), existing(), {}, None, id="extended-resource-fits"),
    pytest.param(
        resource_pod(init=({AAA: 1},)).obj(), existing(), {}, None, id="extended-resource-fits-init"
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, AAA: 10}).obj(),
        existing(**{AAA: 0}),
        {},
        unresolvable(insufficient(AAA)),
        id="extended-resource-capacity-enforced",
    ),
    pytest.param(
        resource_pod(init=({"cpu": "1m", "memory": 1, AAA: 10},)).obj(),
        existing(**{AAA: 0}),
        {},
        unresolvable(insufficient(AAA)),
        id="extended-resource-capacity-enforced-init",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, AAA: 1}).obj(),
        existing(**{AAA: 5}),
        {},
        unschedulable(insufficient(AAA)),
        id="extended-resource-allocatable-enforced",
    ),
    pytest.param(
        resource_pod(init=({"cpu": "1m", "memory": 1, AAA: 1},)).obj(),
        existing(**{AAA: 5}),
        {},
        unschedulable(insufficient(AAA)),
        id="extended-resource-allocatable-enforced-init",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, AAA: 3}, {"cpu": "1m", "memory": 1, AAA: 3}).obj(),
        existing(**{AAA: 2}),
        {},
        unresolvable(insufficient(AAA)),
        id="extended-resource-multiple-containers",
    ),
    pytest.param(
        resource_pod(
            init=({"cpu": "1m", "memory": 1, AAA: 3}, {"cpu": "1m", "memory": 1, AAA: 3})
        ).obj(),
        existing(**{AAA: 2}),
        {},
        None,
        id="extended-resource-admits-multiple-init-containers",
    ),
    pytest.param(
        resource_pod(
            init=({"cpu": "1m", "memory": 1, AAA: 6}, {"cpu": "1m", "memory": 1, AAA: 3})
        ).obj(),
        existing(**{AAA: 2}),
        {},
        unresolvable(insufficient(AAA)),
        id="extended-resource-enforced-multiple-init-containers",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, BBB: 1}).obj(),
        existing(),
        {},
        unresolvable(insufficient(BBB)),
        id="unknown-extended-resource",
    ),
    pytest.param(
        resource_pod(init=({"cpu": "1m", "memory": 1, BBB: 1},)).obj(),
        existing(),
        {},
        unresolvable(insufficient(BBB)),
        id="unknown-extended-resource-init",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, K8S_A: 10}).obj(),
        existing(),
        {},
        unresolvable(insufficient(K8S_A)),
        id="kubernetes.io-resource-enforced",
    ),
    pytest.param(
        resource_pod(init=({"cpu": "1m", "memory": 1, K8S_B: 10},)).obj(),
        existing(),
        {},
        unresolvable(insufficient(K8S_B)),
        id="kubernetes.io-subdomain-resource-enforced-init",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, HUGE: 10}).obj(),
        existing(**{HUGE: 0}),
        {},
        unresolvable(insufficient(HUGE)),
        id="hugepages-capacity-enforced",
    ),
    pytest.param(
        resource_pod(init=({"cpu": "1m", "memory": 1, HUGE: 10},)).obj(),
        existing(**{HUGE: 0}),
        {},
        unresolvable(insufficient(HUGE)),
        id="hugepages-capacity-enforced-init",
    ),
    pytest.param(
        resource_pod(
            {"cpu": "1m", "memory": 1, HUGE: 3}, {"cpu": "1m", "memory": 1, HUGE: 3}
        ).obj(),
        existing(**{HUGE: 2}),
        {},
        unresolvable(insufficient(HUGE)),
        id="hugepages-multiple-containers",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, BBB: 1}).obj(),
        existing(),
        {"ignored_resources": [BBB]},
        None,
        id="ignored-extended-resource",
    ),
    pytest.param(
        make_pod("p").req(cpu="1m", memory=1).overhead(cpu="3m", memory=13).obj(),
        existing(cpu="5m", memory=5),
        {},
        None,
        id="requests-plus-overhead-fit",
    ),
    pytest.param(
        make_pod("p").req(cpu="1m", memory=1).overhead(cpu="1m", memory=15).obj(),
        existing(cpu="5m", memory=5),
        {},
        unschedulable(insufficient("memory")),
        id="requests-plus-overhead-do-not-fit-memory",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, BBB: 1, K8S_A: 1}).obj(),
        existing(),
        {"ignored_resource_groups": ["example.com"]},
        unresolvable(insufficient(K8S_A)),
        id="ignored-resource-group-only-for-extended-resources",
    ),
    pytest.param(
        resource_pod({"cpu": "1m", "memory": 1, AAA: 0}).obj(),
        existing(**{AAA: 6}),
        {},
        None,
        id="zero-extended-request-not-checked",
    ),
    pytest.param(
        resource_pod({AAA: 1}).obj(),
        existing(cpu="20m", memory=30, **{AAA: 1}),
        {},
        None,
        id="zero-cpu-memory-requests-not-checked",
    ),
    pytest.param(
        resource_pod({HUGE: 10}).obj(),
        existing(),
        {"ignored_resources": [HUGE]},
        unresolvable(insufficient(HUGE)),
        id="ignored-resources-do-not-cover-hugepages",
    ),
    pytest.param(
        resource_pod({"foo": 100}).obj(), existing(), {}, None, id="untracked-resource-not-checked"
    ),
    # upstream TestStorageRequests
    pytest.param(
        resource_pod({"ephemeral-storage": 25}).obj(),
        existing(cpu="2m", memory=2),
        {},
        unresolvable(insufficient("ephemeral-storage")),
        id="ephemeral-storage-exceeds-allocatable",
    ),
    pytest.param(
        resource_pod({"ephemeral-storage": 5}).obj(),
        existing(cpu="2m", memory=2, **{"ephemeral-storage": 10}),
        {},
        None,
        id="ephemeral-storage-sufficient",
    ),
    pytest.param(
        resource_pod({"ephemeral-storage": 11}).obj(),
        existing(**{"ephemeral-storage": 10}),
        {},
        unschedulable(insufficient("ephemeral-storage")),
        id="ephemeral-storage-used-up",
    ),
]


@pytest.mark.parametrize(("pod", "used", "args", "want"), ENOUGH_REQUESTS)
def test_enough_requests(
    pod: Pod, used: Pod, args: dict[str, list[str]], want: Status | None
) -> None:
    nodes = NodeColumns([upstream_node()], [used])
    assert run_filter(fit(**args), pod, nodes) == [want]


# ----------------------------------------------------- upstream TestNotEnoughRequests
@pytest.mark.parametrize(
    ("pod", "used", "want"),
    [
        pytest.param(
            make_pod().obj(),
            existing(cpu="10m", memory=20),
            unschedulable(TOO_MANY_PODS),
            id="no-requests",
        ),
        pytest.param(
            resource_pod({"cpu": "1m", "memory": 1}).obj(),
            existing(cpu="5m", memory=5),
            unschedulable(TOO_MANY_PODS),
            id="resources-fit",
        ),
        pytest.param(
            resource_pod({"cpu": "5m", "memory": 1}).obj(),
            existing(cpu="5m", memory=19),
            unschedulable(TOO_MANY_PODS),
            id="equal-edge-case",
        ),
        pytest.param(
            resource_pod({"cpu": "5m", "memory": 1}, init=({"cpu": "5m", "memory": 1},)).obj(),
            existing(cpu="5m", memory=19),
            unschedulable(TOO_MANY_PODS),
            id="equal-edge-case-init-container",
        ),
        pytest.param(
            resource_pod({"cpu": "6m", "memory": 2}).obj(),
            existing(cpu="5m", memory=19),
            unschedulable(TOO_MANY_PODS, insufficient("cpu"), insufficient("memory")),
            id="too-many-pods-comes-first",
        ),
        pytest.param(
            resource_pod({"cpu": "11m", "memory": 1}).obj(),
            existing(),
            unresolvable(TOO_MANY_PODS, insufficient("cpu")),
            id="too-many-pods-and-cpu-beyond-allocatable",
        ),
    ],
)
def test_not_enough_pods(pod: Pod, used: Pod, want: Status) -> None:
    node = make_node("n1").capacity(cpu="10m", memory=20, pods=1).obj()
    assert run_filter(fit(), pod, NodeColumns([node], [used])) == [want]


def test_node_without_pods_allocatable_is_full() -> None:
    node = make_node("n1").capacity(cpu=1, memory="1Gi").obj()
    assert run_filter(fit(), make_pod().obj(), NodeColumns([node])) == [
        unschedulable(TOO_MANY_PODS)
    ]


def test_filter_without_pre_filter_is_an_error() -> None:
    nodes = NodeColumns([upstream_node()])
    got = fit().filter(CycleState(), make_pod().obj(), nodes, ALL_ROWS)
    assert got == Status(
        Code.ERROR, ('error reading "PreFilterNodeResourcesFit" from cycleState: not found',), NAME
    )


# ---------------------------------------------------------- many nodes in one call
def many_nodes() -> NodeColumns:
    """Rows whose failures differ: each row gets its own combination of reasons."""
    capacity: dict[str, QuantityInput] = {"cpu": "4", "memory": "4Gi", "pods": 10, AAA: 2}
    nodes = [
        make_node("fits").capacity(capacity).obj(),
        make_node("cpu").capacity(capacity).obj(),
        make_node("cpu-memory").capacity(capacity).obj(),
        make_node("small-cpu").capacity({**capacity, "cpu": "1"}).obj(),
        make_node("no-aaa").capacity({"cpu": "4", "memory": "4Gi", "pods": 10}).obj(),
        make_node("full").capacity({**capacity, "pods": 1}).obj(),
        make_node("fits-too").capacity(capacity).obj(),
        make_node("cpu-too").capacity(capacity).obj(),
    ]
    pods = [
        make_pod("a").node("cpu").req(cpu=3).obj(),
        make_pod("b").node("cpu-memory").req(cpu=3, memory="3Gi").obj(),
        make_pod("c").node("full").req(cpu="1m").obj(),
        make_pod("d").node("cpu-too").req(cpu="3500m").obj(),
    ]
    return NodeColumns(nodes, pods)


MANY_WANT: dict[str, Status | None] = {
    "fits": None,
    "cpu": unschedulable(insufficient("cpu")),
    "cpu-memory": unschedulable(insufficient("cpu"), insufficient("memory")),
    "small-cpu": unresolvable(insufficient("cpu")),
    "no-aaa": unresolvable(insufficient(AAA)),
    "full": unschedulable(TOO_MANY_PODS),
    "fits-too": None,
    "cpu-too": unschedulable(insufficient("cpu")),
}


def test_distinct_failures_get_one_status_each() -> None:
    nodes = many_nodes()
    pod = make_pod("p").req({"cpu": 2, "memory": "2Gi", AAA: 1}).obj()
    got = dict(zip(nodes.names, run_filter(fit(), pod, nodes), strict=True))
    assert got == MANY_WANT
    state = CycleState()
    plugin = fit()
    plugin.pre_filter(state, pod, nodes)
    result = plugin.filter(state, pod, nodes, ALL_ROWS)
    assert isinstance(result, FilterResult)
    # Equal combinations share one Status: 5 distinct failures over 6 failing rows.
    assert len(result.failures) == 5


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["cpu-too", "fits", "no-aaa"], id="subset"),
        pytest.param(["full", "small-cpu", "cpu", "fits-too"], id="reordered"),
        pytest.param([], id="empty"),
    ],
)
def test_filter_on_row_subsets(names: list[str]) -> None:
    nodes = many_nodes()
    pod = make_pod("p").req({"cpu": 2, "memory": "2Gi", AAA: 1}).obj()
    rows = np.array([nodes.index[n] for n in names], dtype=np.intp)
    assert run_filter(fit(), pod, nodes, rows) == [MANY_WANT[n] for n in names]


def test_new_rejects_foreign_args() -> None:
    with pytest.raises(FitArgsError, match="NodeResourcesFitArgs"):
        new({"ignoredResources": []}, handle=None)  # type: ignore[arg-type]
    with pytest.raises(FitArgsError, match="not supported"):
        new(NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="Bogus")), handle=None)  # type: ignore[arg-type]
