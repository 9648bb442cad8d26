import pytest

from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins.schedulinggates import SchedulingGates, new
from tests.builders import PodBuilder, make_pod


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        # upstream scheduling_gates_test.go
        pytest.param(make_pod("p"), SUCCESS, id="pod-without-gates"),
        pytest.param(
            make_pod("p").scheduling_gates("foo", "bar"),
            Status.unresolvable(
                "waiting for scheduling gates: [foo bar]", plugin="SchedulingGates"
            ),
            id="pod-with-gates",
        ),
        pytest.param(
            make_pod("p").scheduling_gates("example.com/one"),
            Status.unresolvable(
                "waiting for scheduling gates: [example.com/one]", plugin="SchedulingGates"
            ),
            id="one-gate",
        ),
    ],
)
def test_pre_enqueue(pod: PodBuilder, want: Status) -> None:
    got = SchedulingGates().pre_enqueue(pod.obj())
    assert got == want
    assert got.is_success() is (want is SUCCESS)


def test_new_and_name() -> None:
    assert new(None, None).name == "SchedulingGates"  # type: ignore[arg-type]
