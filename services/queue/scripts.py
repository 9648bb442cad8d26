"""The queue's Lua scripts, loaded once per client (EVALSHA via redis-py register_script)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from shared.runtime.lua import LuaScripts

SCRIPT_NAMES = (
    "upsert",
    "delete",
    "pop",
    "outcome",
    "move",
    "flush_backoff",
    "expire",
    "activate",
)


LUA = LuaScripts("services.queue")


@dataclass(frozen=True, slots=True)
class QueueScripts:
    upsert: AsyncScript
    delete: AsyncScript
    pop: AsyncScript
    outcome: AsyncScript
    move: AsyncScript
    flush_backoff: AsyncScript
    expire: AsyncScript
    activate: AsyncScript

    @classmethod
    def register(cls, redis: Redis) -> QueueScripts:
        loaded: dict[str, Any] = LUA.register_all(redis, SCRIPT_NAMES)
        return cls(**loaded)
