"""DefaultBinder Bind (upstream pkg/scheduler/framework/plugins/defaultbinder).

Upstream posts a v1.Binding through the clientset; berth writes it through `handle.binder`
(the in-process snapshot or the cluster store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol

from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import Binder, BindPlugin, Handle
from scheduling.framework.status import SUCCESS, Status
from scheduling.plugins import names
from shared.models import Pod


class BindingHandle(Protocol):
    """All DefaultBinder reads from its handle."""

    @property
    def binder(self) -> Binder: ...


class DefaultBinder:
    name: ClassVar[str] = names.DEFAULT_BINDER

    def __init__(self, handle: BindingHandle) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            await self._handle.binder.bind(pod, node_name)
        # Upstream turns any binding error into an Error status (framework.AsStatus); the pod is
        # then forgotten and retried. Cancellation is a BaseException and still propagates.
        except Exception as exc:  # noqa: BLE001
            return Status.error(str(exc) or type(exc).__name__, plugin=self.name)
        return SUCCESS


def new(args: object | None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)


if TYPE_CHECKING:
    _bind: type[BindPlugin] = DefaultBinder
