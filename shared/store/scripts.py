"""The store's Lua scripts, registered once per client (EVALSHA via redis-py register_script)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from shared.runtime.lua import LuaScripts

SCRIPT_NAMES = (
    "apply",
    "delete",
    "snapshot",
    "reserve",
    "bind",
    "unreserve",
    "ended",
    "gang_reject",
    "claim",
    "nominate",
    "expire",
)


LUA = LuaScripts("shared.store")


@dataclass(frozen=True, slots=True)
class StoreScripts:
    apply: AsyncScript
    delete: AsyncScript
    snapshot: AsyncScript
    reserve: AsyncScript
    bind: AsyncScript
    unreserve: AsyncScript
    ended: AsyncScript
    gang_reject: AsyncScript
    claim: AsyncScript
    nominate: AsyncScript
    expire: AsyncScript

    @classmethod
    def register(cls, redis: Redis) -> StoreScripts:
        loaded: dict[str, Any] = LUA.register_all(redis, SCRIPT_NAMES)
        return cls(**loaded)
