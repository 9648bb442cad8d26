"""Node conditions and the taints that follow them (the seed's built-in taints table)."""

from __future__ import annotations

import pytest

from shared.lifecycle.node_lifecycle import (
    NOT_READY,
    UNREACHABLE,
    desired_taints,
    fully_disrupted,
    monitor,
    ready_status,
    reconcile_taints,
    with_ready,
)
from shared.models import Node, NodeCondition, Taint
from tests.builders import make_node


def node(*conditions: tuple[str, str], unschedulable: bool = False) -> Node:
    n = make_node("n1").capacity(cpu="4").unschedulable(unschedulable).obj()
    n.status.conditions = [NodeCondition(type=t, status=s) for t, s in conditions]
    return n


def ids(taints: list[Taint]) -> set[str]:
    return {f"{t.key}:{t.effect}" for t in taints}


@pytest.mark.parametrize(
    ("conditions", "unschedulable", "expected"),
    [
        ((), False, set()),
        ((("Ready", "True"),), False, set()),
        (
            (("Ready", "False"),),
            False,
            {f"{NOT_READY}:NoSchedule", f"{NOT_READY}:NoExecute"},
        ),
        (
            (("Ready", "Unknown"),),
            False,
            {f"{UNREACHABLE}:NoSchedule", f"{UNREACHABLE}:NoExecute"},
        ),
        ((("MemoryPressure", "True"),), False, {"node.kubernetes.io/memory-pressure:NoSchedule"}),
        ((("DiskPressure", "True"),), False, {"node.kubernetes.io/disk-pressure:NoSchedule"}),
        ((("PIDPressure", "True"),), False, {"node.kubernetes.io/pid-pressure:NoSchedule"}),
        ((("MemoryPressure", "False"),), False, set()),
        (
            (("NetworkUnavailable", "True"),),
            False,
            {"node.kubernetes.io/network-unavailable:NoSchedule"},
        ),
        ((), True, {"node.kubernetes.io/unschedulable:NoSchedule"}),
    ],
)
def test_taints_by_condition(
    conditions: tuple[tuple[str, str], ...], unschedulable: bool, expected: set[str]
) -> None:
    assert ids(desired_taints(node(*conditions, unschedulable=unschedulable), 5.0)) == expected


def test_no_execute_taints_carry_time_added() -> None:
    (no_schedule, no_execute) = desired_taints(node(("Ready", "Unknown")), 42.0)
    assert (no_schedule.time_added, no_execute.time_added) == (None, 42.0)


def test_reconcile_keeps_user_taints_and_time_added() -> None:
    n = node(("Ready", "Unknown"))
    n.spec.taints = [
        Taint(key="dedicated", value="gpu", effect="NoSchedule"),
        Taint(key=UNREACHABLE, effect="NoExecute", time_added=1.0),
        Taint(key=NOT_READY, effect="NoExecute", time_added=1.0),  # stale: Ready is Unknown now
    ]
    taints = reconcile_taints(n, 99.0)
    assert taints is not None
    assert [(t.key, t.effect, t.time_added) for t in taints] == [
        ("dedicated", "NoSchedule", None),
        (UNREACHABLE, "NoExecute", 1.0),
        (UNREACHABLE, "NoSchedule", None),
    ]
    n.spec.taints = taints
    assert reconcile_taints(n, 100.0) is None  # nothing more to do


def test_recovery_lifts_the_controllers_taints_only() -> None:
    n = node(("Ready", "True"))
    n.spec.taints = [
        Taint(key=UNREACHABLE, effect="NoExecute", time_added=1.0),
        Taint(key=UNREACHABLE, effect="NoSchedule"),
        Taint(key="key1", value="v", effect="NoExecute"),
    ]
    assert ids(reconcile_taints(n, 5.0) or []) == {"key1:NoExecute"}


@pytest.mark.parametrize(
    ("ready", "heartbeat", "now", "status", "changed"),
    [
        # Within the grace period nothing changes (no Ready condition: ready).
        (None, 100.0, 139.0, "True", False),
        # A heartbeat older than the grace period: Unknown, and the unreachable taints.
        (None, 100.0, 141.0, "Unknown", True),
        ("True", 100.0, 141.0, "Unknown", True),
        # Already Unknown and still silent: nothing more to write.
        ("Unknown", 100.0, 500.0, "Unknown", False),
        # A heartbeat again: Ready, taints lifted.
        ("Unknown", 499.0, 500.0, "True", True),
        # Never heard from: the grace period counts from when the controller started watching.
        (None, None, 30.0, "True", False),
        (None, None, 41.0, "Unknown", True),
        # Ready False is the kubelet's report: the controller leaves it (and taints not-ready).
        ("False", 499.0, 500.0, "False", True),
    ],
)
def test_monitor(
    ready: str | None, heartbeat: float | None, now: float, status: str, changed: bool
) -> None:
    n = node(("Ready", ready)) if ready else node()
    if ready == "Unknown":
        n.spec.taints = desired_taints(n, 1.0)
    update = monitor(n, heartbeat, now, grace=40.0, watching_since=0.0)
    assert (update is not None) == changed
    after = update.node if update is not None else n
    assert ready_status(after) == status
    expected = {"Unknown": UNREACHABLE, "False": NOT_READY}.get(status)
    assert {t.key for t in after.spec.taints} == ({expected} if expected else set())


def test_with_ready_sets_transition_and_keeps_other_conditions() -> None:
    n = node(("MemoryPressure", "True"), ("Ready", "True"))
    changed = with_ready(n, "False", "KubeletNotReady", "down", 7.0)
    assert changed is not None
    assert [(c.type, c.status) for c in changed.status.conditions] == [
        ("Ready", "False"),
        ("MemoryPressure", "True"),
    ]
    assert changed.status.conditions[0].last_transition_time == 7.0
    assert n.status.conditions[1].status == "True"  # the input is not mutated
    assert with_ready(changed, "False", "KubeletNotReady", "down", 8.0) is None


@pytest.mark.parametrize(
    ("ready", "beats", "disrupted"),
    [
        ((), {}, False),  # no node at all
        (("True", "True"), {"a": 95.0, "b": 95.0}, False),
        (("True", "True"), {"a": 10.0, "b": 95.0}, False),  # one stale, one fresh
        (("True", "True"), {"a": 10.0, "b": 10.0}, True),  # every heartbeat stale
        (("Unknown", "False"), {"a": 95.0, "b": 95.0}, True),  # none ready by condition
        (("Unknown", "True"), {"a": 10.0, "b": 95.0}, False),
    ],
)
def test_full_disruption(ready: tuple[str, ...], beats: dict[str, float], disrupted: bool) -> None:
    nodes = []
    for name, status in zip("ab", ready, strict=False):
        n = make_node(name).obj()
        n.status.conditions = [NodeCondition(type="Ready", status=status)]
        nodes.append(n)
    assert fully_disrupted(nodes, beats, 100.0, 40.0, 0.0) is disrupted


def test_no_no_execute_taints_while_disrupted() -> None:
    n = node(("Ready", "Unknown"))
    n.spec.taints = [Taint(key=UNREACHABLE, effect="NoExecute", time_added=1.0)]
    update = monitor(n, 10.0, 100.0, grace=40.0, watching_since=0.0, evicting=False)
    assert update is not None
    assert ids(update.node.spec.taints) == {f"{UNREACHABLE}:NoSchedule"}
