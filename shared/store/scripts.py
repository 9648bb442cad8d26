"""The store's Lua scripts, registered once per client (EVALSHA via redis-py register_script)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

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


def script_source(name: str) -> str:
    """The prelude followed by the script body (Redis 6.2 scripts cannot share functions)."""
    lua = resources.files("shared.store") / "lua"
    return (lua / "prelude.lua").read_text() + "\n" + (lua / f"{name}.lua").read_text()


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
        loaded: dict[str, Any] = {
            name: redis.register_script(script_source(name)) for name in SCRIPT_NAMES
        }
        return cls(**loaded)
