"""The one Lua loader: a package's scripts are files in its `lua/` folder, each registered
(EVALSHA via redis-py register_script) as the folder's prelude, when it has one, followed by
the script's body (Redis 6.2 scripts cannot share functions)."""

from __future__ import annotations

from importlib import resources

from redis.asyncio import Redis
from redis.commands.core import AsyncScript


class LuaScripts:
    """The scripts of one package's `lua/` folder (`package`: its dotted name)."""

    def __init__(self, package: str, *, prelude: str | None = "prelude") -> None:
        self._folder = resources.files(package) / "lua"
        self._prelude = prelude

    def source(self, name: str) -> str:
        """The text Redis runs for script `name`: the prelude, then `name.lua`."""
        body = (self._folder / f"{name}.lua").read_text()
        if self._prelude is None:
            return body
        return (self._folder / f"{self._prelude}.lua").read_text() + "\n" + body

    def register(self, redis: Redis, name: str) -> AsyncScript:
        return redis.register_script(self.source(name))

    def register_all(self, redis: Redis, names: tuple[str, ...]) -> dict[str, AsyncScript]:
        return {name: self.register(redis, name) for name in names}
