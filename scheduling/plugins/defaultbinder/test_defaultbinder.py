from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.framework.columns import NodeColumns
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import Binder
from scheduling.framework.status import Code
from scheduling.plugins.defaultbinder import DefaultBinder
from shared.models import Pod
from tests.builders import make_pod


class BindConflictError(RuntimeError):
    pass


@dataclass
class RecordingBinder:
    """A real in-memory Binder: records bindings, refuses to bind a pod twice."""

    bound: dict[str, str] = field(default_factory=dict)

    async def bind(self, pod: Pod, node_name: str) -> None:
        if pod.key in self.bound:
            raise BindConflictError(f"pod {pod.key} is already assigned to a node")
        self.bound[pod.key] = node_name


@dataclass
class FakeHandle:
    binder: Binder
    nodes: NodeColumns = field(default_factory=NodeColumns)


@pytest.mark.parametrize(
    ("already_bound", "want_code", "want_reasons"),
    [
        pytest.param(False, Code.SUCCESS, (), id="binds"),
        pytest.param(
            True,
            Code.ERROR,
            ("pod default/p is already assigned to a node",),
            id="binder-error-becomes-error-status",
        ),
    ],
)
async def test_bind(already_bound: bool, want_code: Code, want_reasons: tuple[str, ...]) -> None:
    binder = RecordingBinder()
    pod = make_pod("p").obj()
    if already_bound:
        binder.bound[pod.key] = "other"
    plugin = DefaultBinder(FakeHandle(binder))
    status = await plugin.bind(CycleState(), pod, "n1")
    assert status.code == want_code
    assert status.reasons == want_reasons
    assert binder.bound[pod.key] == ("other" if already_bound else "n1")
    if want_code != Code.SUCCESS:
        assert status.plugin == "DefaultBinder"


def test_name() -> None:
    assert DefaultBinder(FakeHandle(RecordingBinder())).name == "DefaultBinder"
