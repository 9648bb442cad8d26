"""The Lua scripts of quota admission (lua/commit.lua, lua/release.lua): each admission and
each release is one script over the quota keys (`<prefix>{quota}:admitted`, `:usage`), so
usage in Redis is always the sum of the admitted pods' charges."""

from __future__ import annotations

from shared.runtime.lua import LuaScripts

QUOTA_LUA = LuaScripts("services.queue.quota", prelude=None)
