"""CycleState: per-pod, per-cycle scratch space shared by a profile's plugins.

Plugins write during PreFilter/PreScore and read during Filter/Score. Keys are typed
(`StateKey[T]`), so a reader gets back what the writer stored without casts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key; create one per plugin at module level: `_STATE = StateKey[MyState]("X")`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class MissingStateError(KeyError):
    """A plugin read state that its PreFilter/PreScore never wrote."""


@dataclass(slots=True)
class CycleState:
    _data: dict[str, object] = field(default_factory=dict)
    skip_filter_plugins: set[str] = field(default_factory=set)
    """Plugins whose PreFilter returned Skip: their Filter is not called this cycle."""
    skip_score_plugins: set[str] = field(default_factory=set)
    """Plugins whose PreScore returned Skip: their Score is not called this cycle."""
    pods_to_activate: dict[str, object] = field(default_factory=dict)
    """Pods (by key) that plugins ask the queue to activate after this cycle."""

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            return cast(T, self._data[key.name])
        except KeyError:
            raise MissingStateError(f"error reading {key.name!r} from cycle state") from None

    def get(self, key: StateKey[T]) -> T | None:
        return cast(T | None, self._data.get(key.name))

    def delete(self, key: StateKey[T]) -> None:
        self._data.pop(key.name, None)

    def merge(self, other: CycleState) -> None:
        """Take `other`'s values and skip sets (a signature's PreFilter and PreScore state,
        computed once for every pod that shares it; values are never mutated in place)."""
        self._data.update(other._data)
        self.skip_filter_plugins = set(other.skip_filter_plugins)
        self.skip_score_plugins = set(other.skip_score_plugins)

    def clone(self) -> CycleState:
        """A shallow copy: preemption evaluates nodes on copies (plugins copy their own values)."""
        return CycleState(
            dict(self._data),
            set(self.skip_filter_plugins),
            set(self.skip_score_plugins),
            dict(self.pods_to_activate),
        )
