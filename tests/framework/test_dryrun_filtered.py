"""The dry run's per-pod "filtered" nodes: kept as the cycle's (status, rows) and expanded only
when read, with the same contents and order as the eager node -> status map."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from scheduling.dryrun import (
    FilteredNode,
    FilteredNodes,
    PodResult,
    run_dry,
    to_json,
    to_table,
)
from scheduling.framework.columns import NodeColumns
from scheduling.framework.interfaces import Diagnosis
from scheduling.framework.schedule import rejected_nodes
from scheduling.framework.status import Status
from shared.models.manifest import Manifests
from tests.builders import make_node, make_pod

NAMES = [f"n{i}" for i in range(6)]
FIT = Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit")
TAINT = Status.unschedulable("untolerated taint", "second reason", plugin="TaintToleration")
AFFINITY = Status.unresolvable("node(s) didn't match", plugin="NodeAffinity")


def rows(*values: int) -> np.ndarray[Any, np.dtype[np.intp]]:
    return np.array(values, dtype=np.intp)


@pytest.mark.parametrize(
    "rejections",
    [
        pytest.param([], id="none"),
        pytest.param([(FIT, rows())], id="empty-rows"),
        pytest.param([(FIT, rows(4, 1)), (TAINT, rows(0, 5))], id="row-order-not-input-order"),
        pytest.param([(AFFINITY, rows(0, 1, 2, 3, 4, 5))], id="every-node"),
        pytest.param([(FIT, rows(2, 3)), (TAINT, rows(3))], id="a-later-status-wins"),
        pytest.param([(FIT, rows(-1, 2))], id="a-node-that-left-is-named-nowhere"),
    ],
)
def test_filtered_nodes_match_the_eager_expansion(
    rejections: list[tuple[Status, np.ndarray[Any, np.dtype[np.intp]]]],
) -> None:
    columns = NodeColumns([make_node(name).obj() for name in NAMES])
    assert columns.names == NAMES
    diagnosis = Diagnosis(num_all_nodes=len(NAMES), rejections=rejections)
    eager = {
        node: FilteredNode(status.plugin, list(status.reasons))
        for node, status in rejected_nodes(diagnosis, columns).items()
    }
    lazy = FilteredNodes(list(rejections), columns.names)
    assert list(lazy.items()) == list(eager.items())
    assert lazy == eager
    assert len(lazy) == len(eager)
    result = PodResult("default/p", "Unschedulable", filtered=lazy)
    eager_json = PodResult("default/p", "Unschedulable", filtered=eager).to_dict(False)
    assert json.loads(json.dumps(result.to_dict(False))) == eager_json


def test_a_dry_run_expands_filtered_nodes_only_when_they_are_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expansions: list[int] = []
    expand = FilteredNodes._expand

    def counting(self: FilteredNodes) -> dict[str, FilteredNode]:
        expansions.append(1)
        return expand(self)

    monkeypatch.setattr(FilteredNodes, "_expand", counting)
    nodes = [make_node(f"n{i}").capacity(cpu="1", memory="4Gi", pods=10).obj() for i in range(4)]
    manifests = Manifests(
        nodes=nodes,
        pods=[make_pod(f"p{i}").req(cpu="1").node_selector(zone="none").obj() for i in range(3)]
        + [make_pod("fits").req(cpu="1").obj()],
    )
    report = run_dry(manifests, seed=1)
    to_table(report)
    assert expansions == []
    document: Any = to_json(report)
    assert len(expansions) == len(report.pods)
    unschedulable = document["pods"][0]
    assert unschedulable["filtered"] == {
        f"n{i}": {
            "plugin": "NodeAffinity",
            "reasons": ["node(s) didn't match Pod's node affinity/selector"],
        }
        for i in range(4)
    }
    assert document["pods"][3]["filtered"] == {}
