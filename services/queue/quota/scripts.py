"""The Lua scripts of quota admission (lua/commit.lua, lua/release.lua): admissions and
releases are written by scripts over the quota keys (`<prefix>{quota}:admitted`, `:usage`), so
usage in Redis is always the sum of the admitted pods' charges."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from shared.runtime.lua import LuaScripts

QUOTA_LUA = LuaScripts("services.queue.quota", prelude=None)


@dataclass
class QuotaWrites:
    """A run of alike quota writes not yet in Redis: admissions (`args`: pod key, packed
    record, ...; `deltas`: their usage, field -> amount) for commit.lua, or releases (`args`:
    pod key, uid, ...) for release.lua."""

    admit: bool
    args: list[Any] = field(default_factory=list)
    deltas: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
