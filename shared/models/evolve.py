"""`evolve(obj, **changes)`: `dataclasses.replace` for the hot paths, ~10x cheaper.

Pods, their metadata and the messages about them are copied with a field or two changed
several times per scheduled pod (a binding restamps the follower's copy, the worker stamps
its proposal): `dataclasses.replace` builds a keyword dict of every field and runs
`__init__`, ~3 us for ObjectMeta. The copier generated here assigns the slots of a fresh
instance directly (~0.3 us). Same result as `replace` for the classes it accepts: dataclasses
with no `__post_init__` and no `init=False` fields (nothing `__init__` would compute); any
other class gets `dataclasses.replace` itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar, cast

T = TypeVar("T")


def evolve(obj: T, **changes: Any) -> T:
    """A shallow copy of dataclass instance `obj` with `changes` applied (TypeError for a
    name that is not one of its fields, as `dataclasses.replace`)."""
    copier = _copier(cast(type, type(obj)))
    if copier is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    return copier(obj, changes)  # type: ignore[no-any-return]


@cache
def _copier(cls: type) -> Callable[[Any, dict[str, Any]], Any] | None:
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return None
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        return None
    names = [f.name for f in fields]
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    lines = ["def copy(o, changes):", "    c = new(cls)"]
    lines += [
        f"    setter(c, {name!r}, o.{name})" if frozen else f"    c.{name} = o.{name}"
        for name in names
    ]
    lines += [
        "    for name, value in changes.items():",
        "        if name not in known:",
        "            raise TypeError(",
        "                f'{cls.__name__}.__init__() got an unexpected keyword argument {name!r}'",
        "            )",
        "        setter(c, name, value)",
        "    return c",
    ]
    namespace: dict[str, Any] = {
        "new": object.__new__,
        "cls": cls,
        "setter": object.__setattr__,
        "known": frozenset(names),
    }
    exec("\n".join(lines), namespace)
    copier: Callable[[Any, dict[str, Any]], Any] = namespace["copy"]
    return copier
