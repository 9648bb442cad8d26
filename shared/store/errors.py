"""Store errors.

StoreError (RuntimeError)
 ├── ApplyRejectedError   an object of a batch cannot be written (nothing was written)
 ├── StreamGapError       the change stream was trimmed past the follower's position
 └── CorruptObjectError   stored bytes that do not decode (a newer writer, or damage)
"""

from __future__ import annotations


class StoreError(RuntimeError):
    """Base class of cluster store failures."""


class ApplyRejectedError(StoreError):
    """One object of an apply batch violates an invariant (e.g. a bound pod's nodeName)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


class StreamGapError(StoreError):
    """Changes after the follower's position were trimmed: load a new snapshot."""

    def __init__(self, position: int, first_available: int) -> None:
        super().__init__(
            f"change stream trimmed: wanted changes after {position}, "
            f"the oldest kept is {first_available}"
        )
        self.position = position
        self.first_available = first_available


class CorruptObjectError(StoreError):
    """Stored bytes that shared.models.codec cannot decode."""
