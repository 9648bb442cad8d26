"""NodeResourcesFit Score: worked examples, and upstream least_allocated_test.go,
most_allocated_test.go, requested_to_capacity_ratio_test.go and TestFitScore (facts only).

Upstream's builders give "cpu": "4000" as 4000 cores and "memory": "10000" as 10000 bytes; a
pod built without containers (st.MakePod().Obj()) has no non-zero defaults, one built with a
container that requests nothing counts 100m cpu and 200Mi memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.status import Code, Status
from scheduling.plugins.noderesources import Fit, new
from scheduling.plugins.noderesources.allocation import broken_linear_table
from shared.config.plugin_args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from shared.models import Node, Pod
from shared.models.quantity import QuantityInput
from tests.builders import make_node, make_pod

EXT = "example.com/xyz"
DEFAULT = [("cpu", 1), ("memory", 1)]
WITH_EXT = [("cpu", 1), ("memory", 1), (EXT, 1)]
LEAST_SHAPE = [(0, 10), (100, 0)]
MOST_SHAPE = [(0, 0), (100, 10)]


def plugin(
    strategy: str,
    resources: Sequence[tuple[str, int]] = DEFAULT,
    shape: Sequence[tuple[int, int]] | None = None,
) -> Fit:
    ratio = None
    if shape is not None:
        points = [UtilizationShapePoint(utilization=u, score=s) for u, s in shape]
        ratio = RequestedToCapacityRatioParam(shape=points)
    args = NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type=strategy,
            resources=[ResourceSpec(name=n, weight=w) for n, w in resources],
            requested_to_capacity_ratio=ratio,
        )
    )
    return new(args, handle=None)  # type: ignore[arg-type]


def node(name: str, **capacity: QuantityInput) -> Node:
    return make_node(name).capacity(capacity).obj()


def ext_node(name: str, ext: int | None = None) -> Node:
    capacity: dict[str, QuantityInput] = {"cpu": 6000, "memory": 10000}
    if ext is not None:
        capacity[EXT] = ext
    return make_node(name).capacity(capacity).obj()


def on(node_name: str, **requests: QuantityInput) -> Pod:
    return make_pod(f"on-{node_name}").node(node_name).req(requests).obj()


def pod_req(*containers: dict[str, QuantityInput]) -> Pod:
    builder = make_pod("p")
    for requests in containers:
        builder.req(requests)
    return builder.obj()


def scores(fit: Fit, pod: Pod, nodes: NodeColumns, *, pre_score: bool = True) -> list[int] | Status:
    state = CycleState()
    if pre_score:
        assert fit.pre_score(state, pod, nodes, ALL_ROWS).is_success()
    got = fit.score(state, pod, nodes, ALL_ROWS)
    if isinstance(got, Status):
        return got
    assert got.dtype == np.int64
    return [int(v) for v in got]


TWO_POD = pod_req({"cpu": 1000, "memory": 2000}, {"cpu": 2000, "memory": 3000})
EMPTY = make_pod("empty").obj()


# --------------------------------------------------------------------- LeastAllocated
LEAST_CASES = [
    pytest.param(
        EMPTY,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=4000, memory=10000)],
        [],
        DEFAULT,
        [100, 100],
        id="nothing-scheduled-nothing-requested",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [],
        DEFAULT,
        [37, 50],
        id="differently-sized-nodes",
    ),
    pytest.param(
        EMPTY,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=4000, memory=10000)],
        [
            make_pod("a").node("n1").obj(),
            make_pod("b").node("n1").obj(),
            make_pod("c").node("n2").obj(),
        ],
        DEFAULT,
        [100, 100],
        id="no-resources-requested-pods-scheduled",
    ),
    pytest.param(
        EMPTY,
        [node("n1", cpu=10000, memory=20000), node("n2", cpu=10000, memory=20000)],
        [
            on("n1", cpu=3000, memory=0),
            on("n1", cpu=3000, memory=0),
            on("n2", cpu=3000, memory=0),
            on("n2", cpu=3000, memory=5000),
        ],
        DEFAULT,
        [70, 57],
        id="no-resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=10000, memory=20000), node("n2", cpu=10000, memory=20000)],
        [on("n1", cpu=3000, memory=0), on("n2", cpu=3000, memory=5000)],
        DEFAULT,
        [57, 45],
        id="resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=10000, memory=20000), node("n2", cpu=10000, memory=50000)],
        [on("n1", cpu=3000, memory=0), on("n2", cpu=3000, memory=5000)],
        DEFAULT,
        [57, 60],
        id="resources-requested-differently-sized-nodes",
    ),
    pytest.param(
        pod_req({"cpu": 3000, "memory": 0}),
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=4000, memory=10000)],
        [on("n1", cpu=3000, memory=0), on("n2", cpu=3000, memory=5000)],
        DEFAULT,
        [50, 25],
        id="requested-exceeds-capacity",
    ),
    pytest.param(
        EMPTY,
        [make_node("n1").obj(), make_node("n2").obj()],
        [on("n1", cpu=3000, memory=0), on("n2", cpu=3000, memory=5000)],
        DEFAULT,
        [0, 0],
        id="zero-node-resources",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [],
        [("memory", 2), ("cpu", 1)],
        [41, 50],
        id="weights-memory-2-cpu-1",
    ),
    pytest.param(
        TWO_POD,
        [ext_node("n1"), ext_node("n2", 4)],
        [],
        WITH_EXT,
        [50, 50],
        id="extended-resource-not-requested-is-bypassed",
    ),
    pytest.param(
        pod_req({"cpu": 3000, "memory": 5000, EXT: 2}),
        [ext_node("n1", 4), ext_node("n2", 10)],
        [],
        WITH_EXT,
        [50, 60],
        id="extended-resource-requested-is-honored",
    ),
    pytest.param(
        pod_req({"cpu": 3000, "memory": 4000}),
        [ext_node("n1"), ext_node("n2", 4)],
        [],
        [(EXT, 2), ("cpu", 1), ("memory", 1)],
        [55, 55],
        id="node-without-the-resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), LEAST_CASES)
def test_least_allocated(
    pod: Pod, nodes: list[Node], pods: list[Pod], resources: list[tuple[str, int]], want: list[int]
) -> None:
    assert scores(plugin(LEAST_ALLOCATED, resources), pod, NodeColumns(nodes, pods)) == want


@pytest.mark.parametrize(
    ("requested", "want"),
    [
        pytest.param((7850, 6786383872), 86, id="node-A"),
        pytest.param((6950, 7627341824), 86, id="node-B"),
    ],
)
def test_least_allocated_from_the_log(requested: tuple[int, int], want: int) -> None:
    """From an old scheduler log: cpu (47800-7850)*100/47800 = 83, memory 89, (83+89)/2 = 86;
    node B 85, 88 -> 86."""
    nodes = NodeColumns([node("n", cpu="47800m", memory=66054406144)])
    pod = pod_req({"cpu": f"{requested[0]}m", "memory": requested[1]})
    assert scores(plugin(LEAST_ALLOCATED), pod, nodes) == [want]


@pytest.mark.parametrize(
    ("capacity", "requested", "want"),
    [
        pytest.param(
            {"cpu": "0", "memory": "0"}, {"cpu": "1", "memory": "1"}, 0, id="capacity-0-scores-0"
        ),
        pytest.param(
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "2", "memory": "2Gi"},
            0,
            id="over-capacity-scores-0",
        ),
        pytest.param(
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": "0", "memory": "0"},
            100,
            id="requested-0-scores-100",
        ),
    ],
)
def test_edge_cases(
    capacity: dict[str, QuantityInput], requested: dict[str, QuantityInput], want: int
) -> None:
    nodes = NodeColumns([make_node("n").capacity(capacity).obj()])
    assert scores(plugin(LEAST_ALLOCATED), pod_req(requested), nodes) == [want]


# ---------------------------------------------------------------------- MostAllocated
MOST_CASES = [
    pytest.param(
        EMPTY,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=4000, memory=10000)],
        [],
        DEFAULT,
        [0, 0],
        id="nothing-scheduled-nothing-requested",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [],
        DEFAULT,
        [62, 50],
        id="differently-sized-nodes",
    ),
    pytest.param(
        EMPTY,
        [node("n1", cpu=10000, memory=20000), node("n2", cpu=10000, memory=20000)],
        [
            on("n1", cpu=3000, memory=0),
            on("n1", cpu=3000, memory=0),
            on("n2", cpu=3000, memory=0),
            on("n2", cpu=3000, memory=5000),
        ],
        DEFAULT,
        [30, 42],
        id="no-resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=10000, memory=20000), node("n2", cpu=10000, memory=20000)],
        [on("n1", cpu=3000, memory=0), on("n2", cpu=3000, memory=5000)],
        DEFAULT,
        [42, 55],
        id="resources-requested-pods-scheduled-with-resources",
    ),
    pytest.param(
        pod_req({"cpu": 2000, "memory": 4000}, {"cpu": 3000, "memory": 5000}),
        [node("n1", cpu=5000, memory=10000), node("n2", cpu=10000, memory=9000)],
        [],
        DEFAULT,
        [95, 75],
        id="requested-equals-capacity",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [],
        [("memory", 2), ("cpu", 1)],
        [58, 50],
        id="weights-memory-2-cpu-1",
    ),
    pytest.param(
        make_pod("p").container().obj(),
        [node("n1", cpu="250m", memory="1000Mi"), node("n2", cpu="250m", memory="1000Mi")],
        [make_pod("a").node("n1").container().obj(), make_pod("b").node("n1").container().obj()],
        DEFAULT,
        [80, 30],
        id="non-zero-defaults-capped-at-capacity",
    ),
    pytest.param(
        TWO_POD,
        [ext_node("n1"), ext_node("n2", 4)],
        [],
        WITH_EXT,
        [50, 50],
        id="extended-resource-not-requested-is-bypassed",
    ),
    pytest.param(
        pod_req({"cpu": 3000, "memory": 5000, EXT: 2}),
        [ext_node("n1", 4), ext_node("n2", 10)],
        [],
        WITH_EXT,
        [50, 40],
        id="extended-resource-requested-is-honored",
    ),
    pytest.param(
        pod_req({"cpu": 3000, "memory": 4000}),
        [ext_node("n1"), ext_node("n2", 4)],
        [],
        [(EXT, 2), ("cpu", 1), ("memory", 1)],
        [45, 45],
        id="node-without-the-resource",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "resources", "want"), MOST_CASES)
def test_most_allocated(
    pod: Pod, nodes: list[Node], pods: list[Pod], resources: list[tuple[str, int]], want: list[int]
) -> None:
    assert scores(plugin(MOST_ALLOCATED, resources), pod, NodeColumns(nodes, pods)) == want


@pytest.mark.parametrize("strategy", [LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO])
def test_no_resources_is_an_error(strategy: str) -> None:
    shape = MOST_SHAPE if strategy == REQUESTED_TO_CAPACITY_RATIO else None
    fit = plugin(strategy, resources=[], shape=shape)
    nodes = NodeColumns([node("n1", cpu=4000, memory=10000)])
    assert scores(fit, TWO_POD, nodes) == Status(
        Code.ERROR, ("resources not found",), "NodeResourcesFit"
    )


# ------------------------------------------------------------ RequestedToCapacityRatio
@pytest.mark.parametrize(
    ("points", "expected"),
    [
        pytest.param(
            [(10, 1), (90, 9)],
            {0: 1, 9: 1, 10: 1, 15: 1, 19: 1, 20: 2, 89: 8, 90: 9, 99: 9, 100: 9},
            id="upstream-case-0",
        ),
        pytest.param(
            [(0, 2), (40, 10), (100, 0)],
            {0: 2, 20: 6, 30: 8, 40: 10, 70: 5, 100: 0},
            id="upstream-case-1",
        ),
        pytest.param(
            [(0, 2), (40, 2), (100, 2)],
            {0: 2, 20: 2, 40: 2, 70: 2, 100: 2},
            id="upstream-case-2-flat",
        ),
        pytest.param(
            [(0, 10), (3, 0)],
            {1: 7, 2: 4, 3: 0},
            id="falling-segment-truncates-toward-zero-like-go",
        ),
    ],
)
def test_broken_linear_function(points: list[tuple[int, int]], expected: dict[int, int]) -> None:
    table = broken_linear_table(points)
    assert {p: int(table[p]) for p in expected} == expected


RTCR_CASES = [
    pytest.param(
        EMPTY,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=4000, memory=10000)],
        [make_pod("a").node("n1").obj(), make_pod("b").node("n1").obj()],
        [100, 100],
        id="nothing-scheduled-nothing-requested",
    ),
    pytest.param(
        TWO_POD,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [],
        [38, 50],
        id="differently-sized-nodes-rounds-half-up",
    ),
    pytest.param(
        EMPTY,
        [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)],
        [on("n1", cpu=3000, memory=5000), on("n2", cpu=3000, memory=5000)],
        [38, 50],
        id="no-resources-requested-pods-scheduled-with-resources",
    ),
]


@pytest.mark.parametrize(("pod", "nodes", "pods", "want"), RTCR_CASES)
def test_requested_to_capacity_ratio_least_shape(
    pod: Pod, nodes: list[Node], pods: list[Pod], want: list[int]
) -> None:
    fit = plugin(REQUESTED_TO_CAPACITY_RATIO, DEFAULT, LEAST_SHAPE)
    assert scores(fit, pod, NodeColumns(nodes, pods)) == want


FOO = "intel.com/foo"
BAR = "intel.com/bar"


def bin_node(name: str, **extended: int) -> Node:
    capacity: dict[str, QuantityInput] = {"cpu": "4", "memory": 10000 * 2**20}
    capacity.update({f"intel.com/{k}": v for k, v in extended.items()})
    return make_node(name).capacity(capacity).obj()


@pytest.mark.parametrize(
    ("requested", "existing", "want"),
    [
        pytest.param({}, None, [0, 0], id="nothing-requested"),
        pytest.param({FOO: 2}, None, [2, 5], id="requested"),
        pytest.param({FOO: 2}, {FOO: 2}, [2, 10], id="existing-pod-fills-node2"),
        pytest.param({FOO: 4}, None, [5, 10], id="more-requested"),
    ],
)
def test_bin_packing_single_extended(
    requested: dict[str, QuantityInput], existing: dict[str, QuantityInput] | None, want: list[int]
) -> None:
    """Shape {0: 0, 100: 1} is 0..10 after the x10 scaling."""
    nodes = [bin_node("n1", foo=8), bin_node("n2", foo=4)]
    pods = [make_pod("e").node("n2").req(existing).obj()] if existing else []
    fit = plugin(REQUESTED_TO_CAPACITY_RATIO, [(FOO, 1)], [(0, 0), (100, 1)])
    assert scores(fit, make_pod("p").req(requested).obj(), NodeColumns(nodes, pods)) == want


@pytest.mark.parametrize(
    ("requested", "existing", "want"),
    [
        pytest.param({}, None, [0, 0], id="nothing-requested"),
        pytest.param({FOO: 2, BAR: 2}, None, [4, 3], id="requested"),
        pytest.param(
            {FOO: 2, BAR: 2}, {FOO: 4, BAR: 2}, [4, 7], id="existing-pod-over-capacity-scores-max"
        ),
        pytest.param({FOO: 4, BAR: 2}, None, [5, 5], id="more-requested"),
    ],
)
def test_bin_packing_multiple_extended(
    requested: dict[str, QuantityInput], existing: dict[str, QuantityInput] | None, want: list[int]
) -> None:
    nodes = [bin_node("n1", foo=8, bar=4), bin_node("n2", foo=4, bar=8)]
    pods = [make_pod("e").node("n2").req(existing).obj()] if existing else []
    fit = plugin(REQUESTED_TO_CAPACITY_RATIO, [(FOO, 3), (BAR, 5)], [(0, 0), (100, 1)])
    assert scores(fit, make_pod("p").req(requested).obj(), NodeColumns(nodes, pods)) == want


def test_requested_to_capacity_ratio_worked_example() -> None:
    """The bin-packing docs' example: weights foo 5, memory 1, cpu 3; shape {0: 0, 100: 10}.

    The docs score each resource floor(utilization / 10) on 0..10 and gets 49/9 -> 5 and
    62/9 -> 7 (printed "7", which implies rounding, not integer division). Upstream scores
    each resource on 0..100 (shape x10, utilization = requested * 100 / capacity with integer
    division) and rounds the weighted mean with math.Round:
    node 1: foo 75, memory 50, cpu 3000*100/8000 = 37 -> (375 + 50 + 111) / 9 = 59.6 -> 60;
    node 2: foo 50, memory 75, cpu 100 -> (250 + 75 + 300) / 9 = 69.4 -> 69.
    So upstream rounds (not truncates) and node 2 is 69 on the 0..100 scale, i.e. 6.9 -> "7" on
    the docs' 0..10 scale; node 1 is 60 (the docs' 5 comes from flooring each resource first).
    """
    nodes = [
        make_node("node1").capacity({FOO: 4, "memory": "1024Mi", "cpu": 8, "pods": 110}).obj(),
        make_node("node2").capacity({FOO: 8, "memory": "1024Mi", "cpu": 8, "pods": 110}).obj(),
    ]
    used = [
        make_pod("used1").node("node1").req({FOO: 1, "memory": "256Mi", "cpu": 1}).obj(),
        make_pod("used2").node("node2").req({FOO: 2, "memory": "512Mi", "cpu": 6}).obj(),
    ]
    pod = make_pod("p").req({FOO: 2, "memory": "256Mi", "cpu": 2}).obj()
    fit = plugin(REQUESTED_TO_CAPACITY_RATIO, [(FOO, 5), ("memory", 1), ("cpu", 3)], MOST_SHAPE)
    assert scores(fit, pod, NodeColumns(nodes, used)) == [60, 69]


# ------------------------------------------------------------- upstream TestFitScore
FIT_SCORE_NODES = [node("n1", cpu=4000, memory=10000), node("n2", cpu=6000, memory=10000)]
FIT_SCORE_PODS = [on("n1", cpu=2000, memory=4000), on("n2", cpu=1000, memory=2000)]


@pytest.mark.parametrize(
    "pre_score",
    [pytest.param(True, id="with-pre-score"), pytest.param(False, id="without-pre-score")],
)
@pytest.mark.parametrize(
    ("strategy", "shape", "requested", "want"),
    [
        pytest.param(
            REQUESTED_TO_CAPACITY_RATIO,
            LEAST_SHAPE,
            {"cpu": 3000, "memory": 5000},
            [10, 32],
            id="rtcr-least-shape",
        ),
        pytest.param(
            REQUESTED_TO_CAPACITY_RATIO,
            MOST_SHAPE,
            {"cpu": 3000, "memory": 5000},
            [95, 68],
            id="rtcr-most-shape",
        ),
        pytest.param(
            MOST_ALLOCATED, None, {"cpu": 1000, "memory": 2000}, [67, 36], id="most-allocated"
        ),
        pytest.param(
            LEAST_ALLOCATED, None, {"cpu": 1000, "memory": 2000}, [32, 63], id="least-allocated"
        ),
    ],
)
def test_fit_score(
    strategy: str,
    shape: list[tuple[int, int]] | None,
    requested: dict[str, QuantityInput],
    want: list[int],
    pre_score: bool,
) -> None:
    fit = plugin(strategy, DEFAULT, shape)
    got = scores(
        fit, pod_req(requested), NodeColumns(FIT_SCORE_NODES, FIT_SCORE_PODS), pre_score=pre_score
    )
    assert got == want


def test_score_on_a_row_subset() -> None:
    nodes = NodeColumns(FIT_SCORE_NODES, FIT_SCORE_PODS)
    fit = plugin(LEAST_ALLOCATED)
    pod = pod_req({"cpu": 1000, "memory": 2000})
    state = CycleState()
    rows = np.array([1, 0, 1], dtype=np.intp)
    fit.pre_score(state, pod, nodes, rows)
    assert fit.score(state, pod, nodes, rows).tolist() == [63, 32, 63]  # type: ignore[union-attr]
    empty = np.zeros(0, dtype=np.intp)
    assert fit.score(state, pod, nodes, empty).tolist() == []  # type: ignore[union-attr]
