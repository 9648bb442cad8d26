"""Status: the value every extension point returns.

Status is a value, not an exception. The code decides what happens to the pod:

- SUCCESS: go on.
- ERROR: an internal failure; the cycle aborts and the pod is retried with backoff.
- UNSCHEDULABLE: the pod does not fit now, but preemption (PostFilter) may help.
- UNSCHEDULABLE_AND_UNRESOLVABLE: the pod does not fit and preemption cannot help on that node.
- WAIT: a Permit plugin holds the pod (gangs); the binding cycle waits.
- SKIP: PreFilter/PreScore: this plugin has nothing to do for the pod (its Filter/Score is skipped);
  Bind: this plugin does not handle the pod.
- PENDING: the pod waits for something outside the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    """The plugin that produced a non-success status (set by the framework when empty)."""

    @staticmethod
    def unschedulable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE, reasons, plugin)

    @staticmethod
    def unresolvable(*reasons: str, plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @staticmethod
    def error(message: str, plugin: str = "") -> Status:
        return Status(Code.ERROR, (message,), plugin)

    @staticmethod
    def skip() -> Status:
        return SKIP

    @staticmethod
    def wait(plugin: str = "") -> Status:
        return Status(Code.WAIT, (), plugin)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_rejected(self) -> bool:
        """Unschedulable, unresolvable or pending: the pod cannot go on, through no error."""
        return self.code in (
            Code.UNSCHEDULABLE,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            Code.PENDING,
        )

    def is_unschedulable(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin or self.code in (Code.SUCCESS, Code.SKIP):
            return self
        return Status(self.code, self.reasons, plugin)

    def message(self) -> str:
        return ", ".join(self.reasons)


SUCCESS = Status()
SKIP = Status(Code.SKIP)
