"""PrioritySort QueueSort (upstream pkg/scheduler/framework/plugins/queuesort)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from scheduling.framework.interfaces import Handle, QueuedPodInfo, QueueSortPlugin
from scheduling.plugins import names
from shared.models import priority_of


class PrioritySort:
    name: ClassVar[str] = names.PRIORITY_SORT

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """a goes first: p1 > p2 || (p1 == p2 && ts1 < ts2); a nil priority counts as 0."""
        pa, pb = priority_of(a.pod), priority_of(b.pod)
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, info: QueuedPodInfo) -> tuple[float, ...]:
        """Ascending order of this key is the order of `less`; equal keys are `less`-ties."""
        return (-priority_of(info.pod), info.timestamp)


def new(args: object | None, handle: Handle) -> PrioritySort:
    return PrioritySort()


if TYPE_CHECKING:
    _queue_sort: type[QueueSortPlugin] = PrioritySort
