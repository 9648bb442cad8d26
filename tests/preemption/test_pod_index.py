"""PodIndex follows NodeColumns incrementally; Scratch edits a private copy of it."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.pod_index import PodIndex
from scheduling.framework.scratch import Scratch
from shared.models import ContainerPort, Pod, priority_of
from tests.builders import make_pod
from tests.preemption.tables import node


def random_pod(rng: random.Random, i: int, node_name: str) -> Pod:
    b = make_pod(f"p{i}").uid(f"p{i}").node(node_name).priority(rng.choice((0, 5, 10)))
    b = b.req(cpu=f"{rng.randint(1, 9) * 100}m", memory="1Mi")
    if rng.random() < 0.7:
        b = b.start_time(float(rng.randint(0, 5)))
    if rng.random() < 0.2:
        b = b.host_port(8000 + rng.randint(0, 2))
    return b.obj()


def snapshot(index: PodIndex, nodes: NodeColumns) -> dict[str, object]:
    """What the index says, independent of slot numbers."""
    per_row = []
    for row in range(len(nodes)):
        slots = index.row_slots[row]
        assert [index.pod(s) for s in slots] == nodes.pods_by_node[row]
        requested = index.requests[slots].sum(axis=0) if slots else np.zeros(index.num_resources)
        per_row.append(requested.tolist())
    ordered = [index.pod(int(s)).metadata.name for s in index.ordered]
    return {"requested": per_row, "ordered": ordered}


def expected_order(nodes: NodeColumns) -> list[str]:
    out: list[str] = []
    for pods in nodes.pods_by_node:
        ranked = sorted(
            enumerate(pods),
            key=lambda ip: (
                -priority_of(ip[1]),
                ip[1].status.start_time if ip[1].status.start_time is not None else np.inf,
                ip[0],
            ),
        )
        out.extend(p.metadata.name for _, p in ranked)
    return out


@pytest.mark.parametrize("listen", [True, False], ids=["listener", "row-scan"])
@pytest.mark.parametrize("seed", range(8))
def test_incremental_sync_matches_a_rebuild(seed: int, listen: bool) -> None:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(12)]
    pods = [random_pod(rng, i, rng.choice(names)) for i in range(40)]
    nodes = NodeColumns([node(n) for n in names], pods)
    index = PodIndex(listen=listen)
    index.sync(nodes)
    assert (index._listener is not None) is listen
    bound = list(pods)
    for step in range(60):
        if bound and rng.random() < 0.5:
            nodes.remove_pod(bound.pop(rng.randrange(len(bound))))
        else:
            fresh = random_pod(rng, 100 + step, rng.choice(names))
            nodes.add_pod(fresh)
            bound.append(fresh)
        index.sync(nodes)
        rebuilt = PodIndex()
        rebuilt.sync(nodes)
        assert snapshot(index, nodes) == snapshot(rebuilt, nodes)
        assert snapshot(index, nodes)["ordered"] == expected_order(nodes)
        assert int(index.alive.sum()) == len(bound)
        requested = nodes.requested[:, : index.num_resources]
        for row in range(len(nodes)):
            slots = index.row_slots[row]
            total = index.requests[slots].sum(axis=0) if slots else 0
            assert (requested[row] == total).all()
    assert index.full_rebuilds == 1


def test_rebuilt_columns_rebuild_the_index() -> None:
    nodes = NodeColumns([node("a")], [make_pod("p").node("a").req(cpu="1").obj()])
    index = PodIndex()
    index.sync(nodes)
    nodes.add_node(node("b"))
    nodes.add_pod(make_pod("q").node("b").req(cpu="1").obj())
    index.sync(nodes)
    assert index.full_rebuilds == 2
    assert [index.pod(s).metadata.name for s in index.row_slots[nodes.index["b"]]] == ["q"]


def test_scratch_edits_never_touch_the_base() -> None:
    rng = random.Random(3)
    names = ["a", "b", "c"]
    pods = [random_pod(rng, i, rng.choice(names)) for i in range(15)]
    nodes = NodeColumns([node(n) for n in names], pods)
    index = PodIndex()
    index.sync(nodes)
    requested = nodes.requested.copy()
    ports = {k: {r: Counter(ips) for r, ips in v.items()} for k, v in nodes.used_ports.items()}
    lists = [list(p) for p in nodes.pods_by_node]

    scratch = Scratch(nodes, index)
    everything = index.ordered.copy()
    scratch.remove_slots(everything)
    assert (scratch.columns.requested[:, nodes.resource_index["cpu"]] == 0).all()
    assert scratch.columns.used_ports == {}
    assert all(p == [] for p in scratch.columns.pods_by_node)
    extra = make_pod("nominated").req(cpu="2").host_port(9000).obj()
    scratch.add_pod(0, extra)
    assert scratch.columns.pods_by_node[0] == [extra]
    assert scratch.columns.used_ports == {("TCP", 9000): {0: Counter({"0.0.0.0": 1})}}
    scratch.remove_added(0, extra)
    scratch.restore_slots(everything[::2])
    scratch.restore_slots(everything[1::2])

    assert (scratch.columns.requested == requested).all()
    assert scratch.columns.used_ports == ports
    assert [list(p) for p in scratch.columns.pods_by_node] == lists
    # The scheduler's own view never moved.
    assert (nodes.requested == requested).all()
    assert nodes.used_ports == ports
    assert [list(p) for p in nodes.pods_by_node] == lists


def test_sidecar_host_ports_follow_the_pod() -> None:
    sidecar = make_pod("s").node("a").sidecar_req(cpu="100m").obj()
    sidecar.spec.init_containers[0].ports.append(ContainerPort(container_port=53, host_port=53))
    nodes = NodeColumns([node("a")], [sidecar])
    assert nodes.used_ports == {("TCP", 53): {0: Counter({"0.0.0.0": 1})}}
    index = PodIndex()
    index.sync(nodes)
    scratch = Scratch(nodes, index)
    scratch.remove_slots(index.ordered.copy())
    assert scratch.columns.used_ports == {}
    scratch.restore_slots(index.ordered.copy())
    assert scratch.columns.used_ports == nodes.used_ports
