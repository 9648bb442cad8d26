"""Counting what the Redis clients send, on the real server: a request is one command or one
whole pipeline (for tests that hold a path to a number of round trips)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection


def count_sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list counting the requests sent from now on (until the test ends)."""
    sent = [0]
    send = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent
