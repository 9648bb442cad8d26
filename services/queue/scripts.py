"""The queue's Lua scripts, loaded once per client (EVALSHA via redis-py register_script)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

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


def script_source(name: str) -> str:
    """The prelude followed by the script body (scripts cannot share functions in Redis 6.2)."""
    lua = resources.files("services.queue") / "lua"
    return (lua / "prelude.lua").read_text() + "\n" + (lua / f"{name}.lua").read_text()


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
        loaded: dict[str, Any] = {
            name: redis.register_script(script_source(name)) for name in SCRIPT_NAMES
        }
        return cls(**loaded)
