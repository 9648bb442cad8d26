"""cli/audit.py: each rule flags a broken final state and accepts a valid one."""

from __future__ import annotations

import pytest

from cli.audit import (
    AFFINITY,
    ANTI_AFFINITY,
    BOUND_TWICE,
    HOST_PORT,
    NODE_AFFINITY,
    OVERCOMMIT,
    SPREAD,
    TAINT,
    UNKNOWN_NODE,
    UNSCHEDULABLE_NODE,
    validate_mapping,
    validate_placement,
)
from shared.models import Node, Pod
from tests.builders import label_selector, make_namespace, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _node(name: str, zone: str = "a", cpu: str = "4", pods: int = 110) -> Node:
    return (
        make_node(name)
        .capacity(cpu=cpu, memory="8Gi", pods=pods)
        .label(ZONE, zone)
        .label(HOST, name)
        .obj()
    )


NODES = [_node("n1", "a"), _node("n2", "a"), _node("n3", "b")]
WEB = label_selector({"app": "web"})


def _web(name: str, node: str) -> Pod:
    return make_pod(name).label("app", "web").req(cpu="100m").node(node).obj()


@pytest.mark.parametrize(
    ("nodes", "pods", "expected"),
    [
        pytest.param(NODES, [make_pod("p").req(cpu="1").node("n1").obj()], [], id="valid"),
        pytest.param(
            NODES,
            [make_pod(f"p{i}").req(cpu="2").node("n1").obj() for i in range(3)],
            [OVERCOMMIT],
            id="cpu-overcommit",
        ),
        pytest.param(
            [_node("n1", pods=1)],
            [make_pod("a").node("n1").obj(), make_pod("b").node("n1").obj()],
            [OVERCOMMIT],
            id="pod-count",
        ),
        pytest.param(
            NODES,
            [make_pod("gpu").req({"nvidia.com/gpu": 1}).node("n1").obj()],
            [OVERCOMMIT],
            id="resource-the-node-lacks",
        ),
        pytest.param(
            NODES,
            [
                make_pod("a").host_port(80).node("n1").obj(),
                make_pod("b").host_port(80).node("n1").obj(),
            ],
            [HOST_PORT],
            id="host-port-clash",
        ),
        pytest.param(
            NODES,
            [
                make_pod("a").host_port(80, host_ip="10.0.0.1").node("n1").obj(),
                make_pod("b").host_port(80, host_ip="10.0.0.2").node("n1").obj(),
            ],
            [],
            id="host-port-other-ip",
        ),
        pytest.param(NODES, [make_pod("p").node("ghost").obj()], [UNKNOWN_NODE], id="unknown-node"),
        pytest.param(
            [make_node("n1").capacity(cpu="4", pods=10).taint("gpu", "yes").obj()],
            [make_pod("p").node("n1").obj()],
            [TAINT],
            id="untolerated-taint",
        ),
        pytest.param(
            [make_node("n1").capacity(cpu="4", pods=10).taint("gpu", "yes").obj()],
            [make_pod("p").toleration("gpu", "yes", "NoSchedule", "Equal").node("n1").obj()],
            [],
            id="tolerated-taint",
        ),
        pytest.param(
            [
                make_node("n1")
                .capacity(cpu="4", pods=10)
                .taint("x", effect="PreferNoSchedule")
                .obj()
            ],
            [make_pod("p").node("n1").obj()],
            [],
            id="prefer-no-schedule-is-not-filtered",
        ),
        pytest.param(
            [make_node("n1").capacity(cpu="4", pods=10).unschedulable().obj()],
            [make_pod("p").node("n1").obj()],
            [UNSCHEDULABLE_NODE],
            id="cordoned",
        ),
        pytest.param(
            NODES,
            [make_pod("p").node_selector({ZONE: "b"}).node("n1").obj()],
            [NODE_AFFINITY],
            id="node-selector",
        ),
        pytest.param(
            NODES,
            [make_pod("p").node_affinity_in(ZONE, ["a"]).node("n1").obj()],
            [],
            id="node-affinity-ok",
        ),
        pytest.param(
            NODES,
            [make_pod("p").node_affinity_not_in(ZONE, ["a"]).node("n2").obj()],
            [NODE_AFFINITY],
            id="node-affinity-not-in",
        ),
        pytest.param(
            NODES,
            [
                _web("w1", "n1"),
                make_pod("p").pod_affinity(HOST, WEB, anti=True).node("n1").obj(),
            ],
            [ANTI_AFFINITY],
            id="anti-affinity-own-term",
        ),
        pytest.param(
            NODES,
            [
                make_pod("p").pod_affinity(ZONE, WEB, anti=True).node("n1").obj(),
                _web("w1", "n2"),
            ],
            [ANTI_AFFINITY],
            id="anti-affinity-existing-pods-term-zone",
        ),
        pytest.param(
            NODES,
            [
                make_pod("p").pod_affinity(ZONE, WEB, anti=True).node("n1").obj(),
                _web("w1", "n3"),
            ],
            [],
            id="anti-affinity-other-zone",
        ),
        pytest.param(
            NODES,
            [
                make_pod("p").pod_affinity(ZONE, WEB, anti=True).node("n1").obj(),
                make_pod("w").namespace("other").label("app", "web").node("n2").obj(),
            ],
            [],
            id="anti-affinity-other-namespace",
        ),
        pytest.param(
            NODES,
            [
                _web("w1", "n3"),
                make_pod("p").pod_affinity(ZONE, WEB).node("n1").obj(),
            ],
            [AFFINITY],
            id="affinity-unsatisfied",
        ),
        pytest.param(
            NODES,
            [
                _web("w1", "n2"),
                make_pod("p").pod_affinity(ZONE, WEB).node("n1").obj(),
            ],
            [],
            id="affinity-same-zone",
        ),
        pytest.param(
            [*NODES, make_node("bare").capacity(cpu="4", pods=10).obj()],
            [make_pod("p").label("app", "web").pod_affinity(ZONE, WEB).node("bare").obj()],
            [AFFINITY],
            id="affinity-node-without-key",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .spread_constraint(1, ZONE, selector=WEB)
                .node("n1" if i < 3 else "n3")
                .obj()
                for i in range(4)
            ],
            [SPREAD, SPREAD, SPREAD],
            id="spread-skew-2",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .spread_constraint(1, ZONE, selector=WEB)
                .node(["n1", "n3", "n2", "n3"][i])
                .obj()
                for i in range(4)
            ],
            [],
            id="spread-balanced",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .spread_constraint(1, ZONE, "ScheduleAnyway", selector=WEB)
                .node("n1")
                .obj()
                for i in range(4)
            ],
            [],
            id="spread-schedule-anyway-is-soft",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .node_affinity_in(ZONE, ["a"])
                .spread_constraint(1, ZONE, selector=WEB)
                .node("n1")
                .obj()
                for i in range(3)
            ],
            [],
            id="spread-ineligible-zone-not-counted",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .spread_constraint(1, ZONE, selector=WEB, min_domains=3)
                .node(["n1", "n3"][i])
                .obj()
                for i in range(2)
            ],
            [],
            id="spread-min-domains-global-min-zero",
        ),
        pytest.param(
            NODES,
            [
                make_pod(f"s{i}")
                .label("app", "web")
                .spread_constraint(1, ZONE, selector=WEB, min_domains=3)
                .node(["n1", "n3", "n1"][i])
                .obj()
                for i in range(3)
            ],
            [SPREAD, SPREAD],
            id="spread-min-domains-violated",
        ),
    ],
)
def test_rules(nodes: list[Node], pods: list[Pod], expected: list[str]) -> None:
    violations = validate_placement(nodes, pods)
    assert sorted(v.kind for v in violations) == sorted(expected), violations


def test_only_checked_pods_are_judged() -> None:
    pods = [
        make_pod("old").node_selector({ZONE: "b"}).node("n1").obj(),
        make_pod("new").node("n1").obj(),
    ]
    assert validate_placement(NODES, pods, checked={"default/new"}) == []
    assert [v.pod for v in validate_placement(NODES, pods)] == ["default/old"]


def test_anti_affinity_against_prebound_pod_counts_when_the_other_side_is_checked() -> None:
    pods = [
        make_pod("old").pod_affinity(HOST, WEB, anti=True).node("n1").obj(),
        _web("new", "n1"),
    ]
    violations = validate_placement(NODES, pods, checked={"default/new"})
    assert [(v.kind, v.pod) for v in violations] == [(ANTI_AFFINITY, "default/new")]


def test_namespace_selector_terms() -> None:
    namespaces = [make_namespace("team-a", {"team": "a"}), make_namespace("team-b", {"team": "b"})]
    pods = [
        make_pod("w").namespace("team-a").label("app", "web").node("n1").obj(),
        make_pod("p")
        .pod_affinity(HOST, WEB, anti=True, namespace_selector=label_selector({"team": "a"}))
        .node("n1")
        .obj(),
    ]
    assert [v.kind for v in validate_placement(NODES, pods, namespaces=namespaces)] == [
        ANTI_AFFINITY
    ]


@pytest.mark.parametrize(
    ("bindings", "twice"),
    [
        pytest.param([("u1", "n1"), ("u2", "n1")], [], id="once-each"),
        pytest.param([("u1", "n1"), ("u1", "n2")], ["u1"], id="two-nodes"),
        pytest.param([("u1", "n1"), ("u1", "n1")], ["u1"], id="same-node-twice"),
    ],
)
def test_bound_twice(bindings: list[tuple[str, str]], twice: list[str]) -> None:
    violations = validate_placement(NODES, [], bindings=bindings)
    assert [(v.kind, v.pod) for v in violations] == [(BOUND_TWICE, uid) for uid in twice]


def test_validate_mapping_applies_a_report() -> None:
    pods = [make_pod("a").req(cpu="3").obj(), make_pod("b").req(cpu="3").obj()]
    assert validate_mapping(NODES, {"default/a": "n1", "default/b": "n2"}, pods) == []
    assert [
        v.kind for v in validate_mapping(NODES, {"default/a": "n1", "default/b": "n1"}, pods)
    ] == [OVERCOMMIT]
