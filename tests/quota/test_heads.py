"""Heads of one ClusterQueue (services/queue/quota/heads.py), pure: the active heap in order,
parking, and what comes back when quota is released (the first of each shape group, every
parked one alone) or one of a shape is admitted (the next of that shape)."""

from __future__ import annotations

from services.queue.quota.heads import Backlog, Heads
from services.queue.quota.workload import Workload


def _workloads(*specs: tuple[str, int, float]) -> dict[str, Workload]:
    return {key: Workload(key, "q", prio, created) for key, prio, created in specs}


def _order(wl: Workload) -> tuple[int, float, str]:
    return wl.order


def test_the_head_is_the_first_in_priority_then_creation_order() -> None:
    wls = _workloads(("a", 0, 3.0), ("b", 10, 5.0), ("c", 0, 1.0))
    heads = Heads()
    for wl in wls.values():
        heads.push(wl.key, wl.order)
    seen = []
    while (key := heads.head()) is not None:
        seen.append(key)
        heads.discard(key)
    assert seen == ["b", "c", "a"]


def test_a_changed_workload_takes_its_new_place_and_stale_entries_are_skipped() -> None:
    wls = _workloads(("a", 0, 1.0), ("b", 0, 2.0))
    heads = Heads()
    heads.push("a", wls["a"].order)
    heads.push("b", wls["b"].order)
    wls["a"].created = 9.0  # a gang member came later... then the gang changed
    heads.push("a", wls["a"].order)
    assert heads.head() == "b"
    heads.discard("b")
    assert heads.head() == "a"
    assert len(heads) == 1


def test_a_release_brings_back_the_first_of_each_shape_and_every_one_alone() -> None:
    wls = _workloads(("s1", 0, 1.0), ("s2", 0, 2.0), ("t1", 0, 3.0), ("x", 0, 4.0), ("y", 0, 5.0))
    heads = Heads()
    for key in wls:
        heads.push(key, wls[key].order)
    for key, shape in [("s1", "S"), ("s2", "S"), ("t1", "T"), ("x", None), ("y", None)]:
        assert heads.head() == key
        heads.park(key, wls[key].order, shape)
    assert heads.head() is None
    assert heads.unpark(wls, _order) == 4  # s1, t1, x, y; s2 stays behind s1
    assert sorted(heads.live) == ["s1", "t1", "x", "y"]
    assert heads.parked == {"s2"}
    heads.discard("s1")  # admitted: the next of its shape may fit too
    assert heads.wake("S", wls, _order) == 1
    assert heads.head() == "s2"
    assert heads.wake("S", wls, _order) == 0
    assert not heads.groups


def test_gone_workloads_do_not_come_back() -> None:
    wls = _workloads(("a", 0, 1.0), ("b", 0, 2.0))
    heads = Heads()
    for key in wls:
        heads.push(key, wls[key].order)
        heads.park(key, wls[key].order, "S" if key == "a" else None)
    del wls["a"], wls["b"]
    assert heads.unpark(wls, _order) == 1  # b was counted, but is dropped
    assert heads.head() is None
    assert not heads.parked


def test_reasons_of_a_group_member_follow_its_group_when_a_later_round_looked() -> None:
    backlog = Backlog()
    heads = backlog.heads("q")
    heads.push("a", (0, 1.0, "a"))
    heads.park("a", (0, 1.0, "a"), "S")
    backlog.reasons["a"] = (1, "insufficient ..., 2 more needed")
    backlog.group_reasons[("q", "S")] = (1, "insufficient ..., 2 more needed; preempting")
    assert backlog.reason("q", "a") == "insufficient ..., 2 more needed"  # same round: its own
    backlog.group_reasons[("q", "S")] = (4, "insufficient ..., 3 more needed")
    assert backlog.reason("q", "a") == "insufficient ..., 3 more needed"
    heads.push("a", (0, 1.0, "a"))  # active again: its own until looked at
    assert backlog.reason("q", "a") == "insufficient ..., 2 more needed"
