"""Taint-based eviction, table-driven from the seed's rules (and the controller's
processPodOnNode where the seed is silent)."""

from __future__ import annotations

import pytest

from shared.lifecycle.taint_eviction import TaintEvictionQueue, Verdict, verdict
from shared.models import Taint, Toleration

NE = "NoExecute"
UNREACHABLE = Taint(key="node.kubernetes.io/unreachable", effect=NE)
NOT_READY = Taint(key="node.kubernetes.io/not-ready", effect=NE)
KEY1 = Taint(key="key1", value="value1", effect=NE)
NO_SCHEDULE = Taint(key="key1", value="value1", effect="NoSchedule")


def tol(key: str = "", value: str = "", effect: str = NE, seconds: int | None = None) -> Toleration:
    return Toleration(
        key=key,
        operator="Equal" if value else "Exists",
        value=value,
        effect=effect,
        toleration_seconds=seconds,
    )


@pytest.mark.parametrize(
    ("taints", "tolerations", "delay"),
    [
        # No NoExecute taint: nothing happens (NoSchedule never evicts a running pod).
        ([], [], None),
        ([NO_SCHEDULE], [], None),
        # The seed: a pod that does not tolerate the taint is evicted at once.
        ([KEY1], [], 0.0),
        ([KEY1], [tol("key1", "other")], 0.0),
        # ... tolerating it without tolerationSeconds: stays bound forever.
        ([KEY1], [tol("key1", "value1")], None),
        # ... with tolerationSeconds: 3600 (the seed's example) stays that long.
        ([KEY1], [tol("key1", "value1", seconds=3600)], 3600.0),
        # A NoSchedule-only toleration does not tolerate a NoExecute taint.
        ([KEY1], [tol("key1", "value1", effect="NoSchedule")], 0.0),
        # An empty effect tolerates every effect; an empty key with Exists every taint.
        ([KEY1], [tol("key1", "value1", effect="")], None),
        ([KEY1, UNREACHABLE], [tol(effect="")], None),
        # Two taints: every one must be tolerated; the least tolerationSeconds wins.
        ([KEY1, UNREACHABLE], [tol("key1", "value1")], 0.0),
        (
            [UNREACHABLE, NOT_READY],
            [tol(UNREACHABLE.key, seconds=6000), tol(NOT_READY.key, seconds=300)],
            300.0,
        ),
        ([UNREACHABLE, KEY1], [tol(UNREACHABLE.key, seconds=6000), tol("key1", "value1")], 6000.0),
        # The first toleration matching a taint is the one used (GetMatchingTolerations).
        ([UNREACHABLE], [tol(UNREACHABLE.key), tol(UNREACHABLE.key, seconds=10)], None),
        ([UNREACHABLE], [tol(UNREACHABLE.key, seconds=10), tol(UNREACHABLE.key)], 10.0),
        # tolerationSeconds <= 0: at once.
        ([UNREACHABLE], [tol(UNREACHABLE.key, seconds=0)], 0.0),
        ([UNREACHABLE], [tol(UNREACHABLE.key, seconds=-5)], 0.0),
        # The default tolerations admission adds (DefaultTolerationSeconds, 300 s each).
        (
            [UNREACHABLE],
            [tol(NOT_READY.key, seconds=300), tol(UNREACHABLE.key, seconds=300)],
            300.0,
        ),
        # DaemonSet pods: both tolerated without tolerationSeconds -> never evicted.
        ([UNREACHABLE, NOT_READY], [tol(UNREACHABLE.key), tol(NOT_READY.key)], None),
    ],
)
def test_verdict(taints: list[Taint], tolerations: list[Toleration], delay: float | None) -> None:
    assert verdict(taints, tolerations).delay == delay


def test_verdict_names_the_taints() -> None:
    assert verdict([KEY1, UNREACHABLE], [tol("key1", "value1")]) == Verdict(
        0.0, "taint node.kubernetes.io/unreachable:NoExecute not tolerated"
    )
    assert verdict([UNREACHABLE], [tol(UNREACHABLE.key, seconds=300)]).reason == (
        "taint node.kubernetes.io/unreachable:NoExecute tolerated for 300s"
    )


def test_countdown_from_the_taint_and_cancelled_when_lifted() -> None:
    queue = TaintEvictionQueue()
    tolerations = [tol("key1", "value1", seconds=3600)]
    queue.update("ns/p", "u1", "n1", [KEY1], tolerations, now=100.0)
    # Seen again later: the countdown keeps its start.
    held = queue.update("ns/p", "u1", "n1", [KEY1], tolerations, now=2000.0)
    assert held is not None
    assert (held.started, held.fires) == (100.0, 3700.0)
    assert queue.due(3699.0) == []
    # "If the taint is removed before that time, the pod will not be evicted."
    assert queue.update("ns/p", "u1", "n1", [], tolerations, now=3000.0) is None
    assert queue.due(10_000.0) == []


def test_due_evicts_once_and_at_its_time() -> None:
    queue = TaintEvictionQueue()
    queue.update("ns/a", "ua", "n1", [KEY1], [], now=10.0)
    queue.update("ns/b", "ub", "n1", [KEY1], [tol("key1", "value1", seconds=5)], now=10.0)
    queue.update("ns/c", "uc", "n1", [KEY1], [tol("key1", "value1")], now=10.0)
    assert [k for k, _ in queue.due(10.0)] == ["ns/a"]
    assert queue.due(14.9) == []
    assert [k for k, _ in queue.due(15.0)] == ["ns/b"]
    assert queue.due(1e9) == []
    assert queue.next_due() is None


def test_toleration_changes_move_or_cancel_the_eviction() -> None:
    queue = TaintEvictionQueue()
    queue.update("ns/p", "u", "n1", [KEY1], [tol("key1", seconds=600)], now=0.0)
    # Shortened: fires earlier, counted from the same start.
    moved = queue.update("ns/p", "u", "n1", [KEY1], [tol("key1", seconds=60)], now=30.0)
    assert moved is not None
    assert moved.fires == 60.0
    # The toleration removed: evicted at once.
    now_ = queue.update("ns/p", "u", "n1", [KEY1], [], now=40.0)
    assert now_ is not None
    assert now_.fires == 40.0
    # A toleration without seconds: cancelled.
    assert queue.update("ns/p", "u", "n1", [KEY1], [tol("key1")], now=41.0) is None
    assert queue.due(1e9) == []


def test_a_new_pod_or_node_starts_a_new_countdown() -> None:
    queue = TaintEvictionQueue()
    tolerations = [tol("key1", seconds=100)]
    queue.update("ns/p", "old", "n1", [KEY1], tolerations, now=0.0)
    fresh = queue.update("ns/p", "new", "n1", [KEY1], tolerations, now=50.0)
    assert fresh is not None
    assert fresh.fires == 150.0
    moved = queue.update("ns/p", "new", "n2", [KEY1], tolerations, now=60.0)
    assert moved is not None
    assert moved.fires == 160.0
