"""Redis clients for the berth services: redis-py asyncio, with hiredis doing the protocol work.

redis-py's asyncio connection packs commands in pure Python (~2 us per argument); the queue
sends scripts with tens of thousands of arguments, so `FastConnection` packs with
`hiredis.pack_command` (C) instead. Replies are parsed by hiredis whenever it is installed.
"""

from __future__ import annotations

from typing import Any

import hiredis
from redis.asyncio import Connection, Redis


class FastConnection(Connection):
    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]
        # Multi-word command names ("CONFIG GET") must be split: leave those to redis-py.
        if (isinstance(first, str) and " " in first) or (
            isinstance(first, bytes) and b" " in first
        ):
            return super().pack_command(*args)
        return [hiredis.pack_command(args)]


def connect(url: str, **options: Any) -> Redis:
    """An asyncio client for `url` (redis://host:port/db) using FastConnection."""
    if url.startswith("redis://") and "connection_class" not in options:
        options["connection_class"] = FastConnection
    return Redis.from_url(url, **options)
