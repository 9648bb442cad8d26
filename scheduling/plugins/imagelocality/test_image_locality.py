"""ImageLocality: upstream image_locality_test.go fixtures (facts only), current formula.

Expected values worked by hand, MB = 2**20:
score = 100 * (clamp(sum) - 23MB) // (1000MB * containers - 23MB), where each present image adds
int(size * nodesWithImage / totalNodes).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from scheduling.framework.columns import ALL_ROWS, NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.plugins.imagelocality import new, normalized_image_name
from shared.models import Container, Node, Pod
from tests.builders import make_node, make_pod

MB = 2**20


def node_403002000(name: str = "machine1") -> Node:
    return (
        make_node(name)
        .image("gcr.io/40:latest", 40 * MB, "gcr.io/40:v1", "gcr.io/40:v1")
        .image("gcr.io/300:latest", 300 * MB, "gcr.io/300:v1")
        .image("gcr.io/2000:latest", 2000 * MB)
        .obj()
    )


def node_25010(name: str = "machine2") -> Node:
    return (
        make_node(name)
        .image("gcr.io/250:latest", 250 * MB)
        .image("gcr.io/10:latest", 10 * MB, "gcr.io/10:v1")
        .obj()
    )


def pod(*images: str, init: tuple[str, ...] = ()) -> Pod:
    builder = make_pod("p")
    for image in images:
        builder.container(image)
    result = builder.obj()
    result.spec.init_containers = [Container(name=f"i{i}", image=im) for i, im in enumerate(init)]
    return result


def scores(p: Pod, nodes: list[Node]) -> list[int]:
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    got = plugin.score(CycleState(), p, NodeColumns(nodes), ALL_ROWS)
    assert isinstance(got, np.ndarray)
    return [int(v) for v in got]


@pytest.mark.parametrize(
    ("p", "nodes", "want"),
    [
        pytest.param(
            pod("gcr.io/40", "gcr.io/250"),
            [node_403002000(), node_25010()],
            [0, 5],
            id="two-images-on-two-nodes-prefer-the-larger",  # 40MB/2 < 23MB; (125-23)/1977
        ),
        pytest.param(
            pod("gcr.io/40", "gcr.io/300"),
            [node_403002000(), node_25010()],
            [7, 0],
            id="two-images-on-one-node",  # (20 + 150 - 23) / 1977
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/2000"),
            [node_403002000(), node_25010()],
            [49, 0],
            id="spread-halves-the-large-image",  # (1000 - 23) / 1977
        ),
        pytest.param(
            pod("gcr.io/10", "gcr.io/2000"),
            [node_403002000(), node_25010(), make_node("machine3").obj()],
            [32, 0, 0],
            id="three-nodes-one-third-spread",  # (666.67 - 23) / 1977
        ),
        pytest.param(
            pod("gcr.io/2000"),
            [node_403002000(), node_403002000("machine2")],
            [100, 100],
            id="over-max-threshold-clamps",  # 2000MB on every node > 1000MB * 1
        ),
        pytest.param(
            pod("gcr.io/250", init=("gcr.io/300",)),
            [node_403002000(), node_25010()],
            [6, 5],
            id="init-containers-count",  # (150 - 23) / 1977 and (125 - 23) / 1977
        ),
        pytest.param(pod(), [node_403002000()], [0], id="no-containers"),
        pytest.param(pod("unknown"), [node_403002000()], [0], id="image-on-no-node"),
    ],
)
def test_image_locality(p: Pod, nodes: list[Node], want: list[int]) -> None:
    assert scores(p, nodes) == want


def test_duplicate_name_on_a_node_counts_once() -> None:
    # gcr.io/40:v1 is listed twice on each node: spread 2/2, size 40MB -> (40 - 23) * 100 / 977 = 1.
    assert scores(pod("gcr.io/40:v1"), [node_403002000(), node_403002000("machine2")]) == [1, 1]


def test_score_on_row_subset() -> None:
    nodes = NodeColumns([node_403002000(), node_25010()])
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    rows = np.array([1, 0], dtype=np.intp)
    got = plugin.score(CycleState(), pod("gcr.io/40", "gcr.io/250"), nodes, rows)
    assert isinstance(got, np.ndarray)
    assert got.tolist() == [5, 0]


def test_cache_follows_node_changes() -> None:
    nodes = NodeColumns([node_403002000(), node_25010()])
    plugin = new(None, handle=None)  # type: ignore[arg-type]
    p = pod("gcr.io/250")
    assert plugin.score(CycleState(), p, nodes, ALL_ROWS).tolist() == [0, 10]  # type: ignore[union-attr]
    nodes.add_node(node_25010("machine3"))  # 250MB now on 2 of 3 nodes
    assert plugin.score(CycleState(), p, nodes, ALL_ROWS).tolist() == [0, 14, 14]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("root", "root:latest", id="add-latest-1"),
        pytest.param(
            "gcr.io:5000/root", "gcr.io:5000/root:latest", id="add-latest-2-registry-port"
        ),
        pytest.param("root:tag", "root:tag", id="keep-tag"),
        pytest.param(
            "root@sha256:" + hashlib.sha256(b"root").hexdigest(),
            "root@sha256:" + hashlib.sha256(b"root").hexdigest(),
            id="keep-digest",
        ),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want
