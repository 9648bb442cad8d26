"""LocalCluster: the one cache, loaded from objects, binding in place (the dry run's)."""

from __future__ import annotations

import pytest

from scheduling.cache.local import BindError, LocalCluster
from tests.builders import make_node, make_pod


def _on(cluster: LocalCluster) -> dict[str, list[str]]:
    return {
        name: sorted(p.metadata.name for p in cluster.nodes.pods_by_node[row])
        for name, row in cluster.nodes.index.items()
    }


async def test_assume_then_bind_counts_the_pod_once():
    running = make_pod("r").node("n1").obj()
    cluster = LocalCluster([make_node("n1").obj(), make_node("n2").obj()], [running])
    pod = make_pod("p").obj()
    cluster.nominate(pod, "n1")
    cluster.assume(pod, "n1")
    await cluster.bind(pod, "n1")
    assert _on(cluster) == {"n1": ["p", "r"], "n2": []}
    assert cluster.assumed == {}
    assert cluster.bound[pod.metadata.uid].spec.node_name == "n1"
    assert cluster.nominated_pods == {}  # a bound pod is no longer nominated
    with pytest.raises(BindError, match="already bound to n1"):
        await cluster.bind(pod, "n2")


async def test_bind_elsewhere_than_assumed_moves_the_pod():
    cluster = LocalCluster([make_node("n1").obj(), make_node("n2").obj()])
    pod = make_pod("p").obj()
    cluster.assume(pod, "n1")
    await cluster.bind(pod, "n2")
    assert _on(cluster) == {"n1": [], "n2": ["p"]}
    with pytest.raises(BindError, match='node "ghost" not found'):
        await cluster.bind(make_pod("q").obj(), "ghost")


def test_delete_pod_frees_its_node():
    running = make_pod("r").node("n1").obj()
    cluster = LocalCluster([make_node("n1").obj()], [running])
    cluster.delete_pod(running)
    assert _on(cluster) == {"n1": []}
    assert "default/r" not in cluster.pods
