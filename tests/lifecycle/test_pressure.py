"""Node-pressure eviction, table-driven from the seed: the ranking (usage above requests, then
priority, then usage relative to requests; priority alone for PIDs), hard and soft thresholds
with their grace period, minimum reclaim (the seed's nodefs example), percentages, the
default hard thresholds, the node conditions and their transition period."""

from __future__ import annotations

from typing import Any

import pytest

from shared.lifecycle.pressure import (
    MEMORY,
    NODEFS,
    PIDS,
    NodePressure,
    PressureConfig,
    PressureConfigError,
    Threshold,
    decide,
    observe,
    parse_flag,
    rank,
)
from shared.models import Node, Pod
from tests.builders import make_node, make_pod

GI = 1024**3
MI = 1024**2


def mem_pod(
    name: str, *, request: str | None = None, limit: str | None = None, use: str, prio: int = 0
) -> Pod:
    builder = make_pod(name).priority(prio).annotation("berth.dev/memory-usage", use)
    if request is not None and limit is not None:
        builder = builder.req_lim({"memory": request}, {"memory": limit})
    elif request is not None:
        builder = builder.req(memory=request)
    return builder.obj()


def test_memory_ranking_follows_the_seed() -> None:
    pods = [
        mem_pod("guaranteed-under", request="1Gi", limit="1Gi", use="500Mi"),
        mem_pod("besteffort-over", use="100Mi"),
        mem_pod("burstable-over-prio10", request="1Gi", use="2Gi", prio=10),
        mem_pod("burstable-over-500Mi", request="1Gi", use="1536Mi"),
        mem_pod("burstable-under-low-prio", request="2Gi", use="1Gi", prio=-5),
    ]
    assert [p.metadata.name for p in rank(pods, MEMORY)] == [
        # 1. over their requests: by priority, then by how far over
        "burstable-over-500Mi",
        "besteffort-over",
        "burstable-over-prio10",
        # 2. under their requests: by priority
        "burstable-under-low-prio",
        "guaranteed-under",
    ]


def test_pid_ranking_is_by_priority_then_pids() -> None:
    pods = [
        make_pod("a").priority(5).annotation("berth.dev/pids", "900").obj(),
        make_pod("b").priority(0).annotation("berth.dev/pids", "10").obj(),
        make_pod("c").priority(0).annotation("berth.dev/pids", "500").obj(),
    ]
    assert [p.metadata.name for p in rank(pods, PIDS)] == ["c", "b", "a"]


def test_usage_defaults_to_requests() -> None:
    node = make_node("n").capacity({"memory": "10Gi", "ephemeral-storage": "10Gi"}).obj()
    pods = [
        make_pod("a").req(memory="1Gi").obj(),
        make_pod("b").req(memory="1Gi").annotation("berth.dev/memory-usage", "3Gi").obj(),
    ]
    seen = observe(node, pods)
    assert seen[MEMORY].available == 6 * GI
    assert seen[NODEFS].available == 10 * GI
    assert seen[PIDS].available == 32768


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("memory.available<500Mi", Threshold(MEMORY, quantity=500 * MI)),
        ("nodefs.available<10%", Threshold(NODEFS, percentage=0.10)),
        ("pid.available<100", Threshold(PIDS, quantity=100)),
    ],
)
def test_threshold_flags(flag: str, expected: Threshold) -> None:
    assert parse_flag(flag) == expected


def test_a_percentage_is_of_capacity() -> None:
    assert parse_flag("nodefs.available<10%").value(10 * GI) == GI


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"evictionHard": {"memory.free": "1Gi"}}, "evictionHard[memory.free]: unknown signal"),
        ({"evictionHard": {"memory.available": "lots"}}, "is not a quantity"),
        ({"evictionHard": {"memory.available": "120%"}}, "between 0% and 100%"),
        (
            {"evictionSoft": {"memory.available": "1Gi"}},
            "evictionSoft[memory.available]: needs evictionSoftGracePeriod[memory.available]",
        ),
        ({"evictionPressureTransitionPeriod": "soon"}, "evictionPressureTransitionPeriod"),
    ],
)
def test_config_errors_name_the_field(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(PressureConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        PressureConfig.from_kubelet_config(doc)


def test_default_hard_thresholds_only_when_unset() -> None:
    defaults = PressureConfig.from_kubelet_config({}).thresholds
    assert {t.text() for t in defaults} == {
        "memory.available<104857600",
        "nodefs.available<10%",
        "imagefs.available<15%",
        "nodefs.inodesFree<5%",
    }
    # Set, evictionHard replaces them whole (the others are not inherited).
    only = PressureConfig.from_kubelet_config({"evictionHard": {"memory.available": "1Gi"}})
    assert [t.text() for t in only.thresholds] == [f"memory.available<{GI}"]


def storage_node(gi: int = 10) -> Node:
    return make_node("n").capacity({"ephemeral-storage": f"{gi}Gi", "memory": "64Gi"}).obj()


def disk_pod(name: str, use_mi: int, prio: int = 0) -> Pod:
    return (
        make_pod(name)
        .priority(prio)
        .annotation("berth.dev/ephemeral-storage-usage", f"{use_mi}Mi")
        .obj()
    )


def test_minimum_reclaim_the_seeds_example() -> None:
    """evictionHard nodefs.available 1Gi with evictionMinimumReclaim 500Mi: once the signal
    is met, pods are evicted until 1.5Gi is available, not merely 1Gi."""
    config = PressureConfig.from_kubelet_config(
        {
            "evictionHard": {"memory.available": "500Mi", "nodefs.available": "1Gi"},
            "evictionMinimumReclaim": {"memory.available": "0Mi", "nodefs.available": "500Mi"},
        }
    )
    node = storage_node()
    # 10Gi disk; pods use 9Gi + 100Mi -> 924Mi available (< 1Gi: met).
    pods = [disk_pod("big", 4096), disk_pod("mid", 3072), disk_pod("small", 2048 + 100)]
    state = NodePressure()
    evicted = []
    for t in range(5):
        decision = decide(config, state, node, pods, float(t))
        if decision.victim is None:
            break
        evicted.append(decision.victim.metadata.name)
        pods = [p for p in pods if p.key != decision.victim.key]
        assert decision.conditions["DiskPressure"] is True
    # The first eviction (the largest user: all are BestEffort at priority 0) frees 4Gi:
    # 4.9Gi available >= 1.5Gi, resolved.
    assert evicted == ["big"]


def test_minimum_reclaim_keeps_evicting_until_threshold_plus_reclaim() -> None:
    config = PressureConfig.from_kubelet_config(
        {
            "evictionHard": {"nodefs.available": "1Gi"},
            "evictionMinimumReclaim": {"nodefs.available": "500Mi"},
        }
    )
    node = storage_node()
    # 10Gi: one big pod of lower priority use, two 300Mi pods at priority 0, a 9Gi - 500Mi
    # pod at priority 100. Available: 10Gi - (9Gi - 500Mi) - 600Mi = 924Mi (< 1Gi).
    pods = [disk_pod("x", 300), disk_pod("y", 300), disk_pod("keeper", 9 * 1024 - 500, prio=100)]
    state = NodePressure()
    order = []
    for t in range(5):
        decision = decide(config, state, node, pods, float(t))
        if decision.victim is None:
            break
        order.append(decision.victim.metadata.name)
        pods = [p for p in pods if p.key != decision.victim.key]
    # After x: 1224Mi >= 1Gi but < 1.5Gi -> still met (minimum reclaim): y goes too (1524Mi).
    assert order == ["x", "y"]
    # Without minimum reclaim only x would go.
    plain = PressureConfig.from_kubelet_config({"evictionHard": {"nodefs.available": "1Gi"}})
    pods = [disk_pod("x", 300), disk_pod("y", 300), disk_pod("keeper", 9 * 1024 - 500, prio=100)]
    state = NodePressure()
    order = []
    for t in range(5):
        decision = decide(plain, state, node, pods, float(t))
        if decision.victim is None:
            break
        order.append(decision.victim.metadata.name)
        pods = [p for p in pods if p.key != decision.victim.key]
    assert order == ["x"]


def test_soft_threshold_waits_for_its_grace_period_condition_does_not() -> None:
    config = PressureConfig.from_kubelet_config(
        {
            "evictionHard": {"memory.available": "100Mi"},
            "evictionSoft": {"memory.available": "1.5Gi"},
            "evictionSoftGracePeriod": {"memory.available": "1m30s"},
        }
    )
    node = make_node("n").capacity(memory="10Gi").obj()
    pods = [mem_pod("hog", request="1Gi", use="9Gi")]  # 1Gi available: soft met, hard not
    state = NodePressure()
    first = decide(config, state, node, pods, 0.0)
    assert first.conditions["MemoryPressure"] is True
    assert first.victim is None
    assert decide(config, state, node, pods, 89.0).victim is None
    fired = decide(config, state, node, pods, 90.0)
    assert fired.victim is not None
    assert fired.victim.metadata.name == "hog"
    assert fired.message.startswith("The node was low on resource: memory.")
    # A hard threshold met (40Mi available) evicts at once.
    hard = decide(config, NodePressure(), node, [mem_pod("x", use="10200Mi")], 0.0)
    assert hard.victim is not None


def test_pressure_condition_outlives_the_signal_by_the_transition_period() -> None:
    config = PressureConfig.from_kubelet_config(
        {"evictionHard": {"memory.available": "1Gi"}, "evictionPressureTransitionPeriod": "5m"}
    )
    node = make_node("n").capacity(memory="10Gi").obj()
    state = NodePressure()
    assert decide(config, state, node, [mem_pod("a", use="9500Mi")], 0.0).conditions[
        "MemoryPressure"
    ]
    calm = [mem_pod("a", use="1Gi")]
    assert decide(config, state, node, calm, 299.0).conditions["MemoryPressure"] is True
    assert decide(config, state, node, calm, 300.0).conditions["MemoryPressure"] is False
