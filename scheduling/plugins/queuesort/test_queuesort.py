import functools

import pytest

from scheduling.framework.interfaces import QueuedPodInfo
from scheduling.plugins.queuesort import PrioritySort, new
from tests.builders import make_pod

LOW, HIGH = 10, 100
T1, T2 = 1000.0, 1001.0


def info(priority: int | None, timestamp: float = 0.0, name: str = "p") -> QueuedPodInfo:
    pod = make_pod(name)
    if priority is not None:
        pod.priority(priority)
    return QueuedPodInfo(pod=pod.obj(), timestamp=timestamp)


@pytest.mark.parametrize(
    ("p1", "p2", "want"),
    [
        # upstream priority_sort_test.go
        pytest.param(info(LOW), info(HIGH), False, id="p1-lower-priority"),
        pytest.param(info(HIGH), info(LOW), True, id="p1-higher-priority"),
        pytest.param(info(HIGH, T1), info(HIGH, T2), True, id="equal-priority-p1-earlier"),
        pytest.param(info(HIGH, T2), info(HIGH, T1), False, id="equal-priority-p2-earlier"),
        # nil priority is 0; equal keys are not less
        pytest.param(info(None, T1), info(0, T2), True, id="nil-priority-is-zero"),
        pytest.param(info(-1, T1), info(None, T2), False, id="negative-below-nil"),
        pytest.param(info(HIGH, T1), info(HIGH, T1), False, id="identical-not-less"),
    ],
)
def test_less(p1: QueuedPodInfo, p2: QueuedPodInfo, want: bool) -> None:
    sort = PrioritySort()
    assert sort.less(p1, p2) is want
    # sort_key must agree with less.
    assert (sort.sort_key(p1) < sort.sort_key(p2)) is want


def test_spec_f14_pop_order() -> None:
    # {A: 10 at t=2, B: 10 at t=1, C: 100 at t=3, D: nil at t=0} -> C, B, A, D.
    pods = [info(10, 2, "A"), info(10, 1, "B"), info(100, 3, "C"), info(None, 0, "D")]
    sort = new(None, None)  # type: ignore[arg-type]

    def compare(a: QueuedPodInfo, b: QueuedPodInfo) -> int:
        return -1 if sort.less(a, b) else int(sort.less(b, a))

    by_key = sorted(pods, key=sort.sort_key)
    by_less = sorted(pods, key=functools.cmp_to_key(compare))
    assert [p.pod.metadata.name for p in by_key] == ["C", "B", "A", "D"]
    assert [p.pod.metadata.name for p in by_less] == ["C", "B", "A", "D"]
    assert sort.name == "PrioritySort"
