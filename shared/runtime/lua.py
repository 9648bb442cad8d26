"""The one Lua loader: a package's scripts are files in a folder of it (`lua/` unless named),
each registered (EVALSHA via redis-py register_script) as the folder's prelude, when it has
one, followed by the script's body (Redis 6.2 scripts cannot share functions). Scripts that
need no prelude live in a folder without one."""

from __future__ import annotations

from importlib import resources

from redis.asyncio import Redis
from redis.commands.core import AsyncScript


class LuaScripts:
    """The scripts of one folder of a package (`package`: its dotted name; `folder`: a path
    inside it)."""

    def __init__(
        self, package: str, *, folder: str = "lua", prelude: str | None = "prelude"
    ) -> None:
        self._folder = resources.files(package).joinpath(*folder.split("/"))
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
