"""The components' Redis ACL rules (deploy/helm/berth/files/redis-acl.yaml, the one source
the chart renders too), rendered as the chart renders them: `ACL SETUSER` arguments for one
component, for Redis 7 (read-only keys %R~, selectors) or Redis 6.2 (neither)."""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from redis.asyncio import Redis

from shared.runtime.security import ENV_REDIS_PASSWORD, ENV_REDIS_USERNAME

RULES_FILE = (
    Path(__file__).resolve().parents[2] / "deploy" / "helm" / "berth" / "files" / "redis-acl.yaml"
)
_GLOB = re.compile(r"([*?\[\]\\])")


@cache
def rules() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULES_FILE.read_text())
    return loaded


def components() -> tuple[str, ...]:
    return tuple(rules()["components"])


def _expand(items: list[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, dict):
            out.extend(_expand(rules()["groups"][item["group"]]))
        else:
            out.append(str(item))
    return list(dict.fromkeys(out))


def escape_glob(text: str) -> str:
    return _GLOB.sub(r"\\\1", text)


@dataclass(frozen=True, slots=True)
class Prefixes:
    store: str = "berth:"
    cluster: str = "default"
    queue: str = "berth:q:"

    def substitute(self, pattern: str) -> str:
        store = escape_glob(f"{self.store}{{{self.cluster}}}:")
        return pattern.replace("$STORE", store).replace("$QUEUE", escape_glob(self.queue))


@dataclass(frozen=True, slots=True)
class Rule:
    """One component's rule with its prefixes substituted."""

    component: str
    commands: tuple[str, ...]
    read: tuple[str, ...]
    write: tuple[str, ...]
    scripts: tuple[str, ...]

    @classmethod
    def of(cls, component: str, prefixes: Prefixes = Prefixes()) -> Rule:
        spec = rules()["components"][component]

        def patterns(name: str) -> tuple[str, ...]:
            return tuple(prefixes.substitute(p) for p in _expand(spec.get(name) or []))

        return cls(
            component,
            tuple(_expand(spec["commands"])),
            patterns("read"),
            patterns("write"),
            patterns("scripts"),
        )

    def arguments(self, *, redis7: bool) -> list[str]:
        """The arguments of `ACL SETUSER <user>` after the user name (no password)."""
        args = ["on", "resetkeys", "resetchannels"]
        if redis7:
            args.append("clearselectors")
        args.append("-@all")
        args += [f"+{command}" for command in self.commands]
        if redis7:
            args += [f"%R~{p}" for p in self.read]
            args += [f"~{p}" for p in self.write]
            if self.scripts:
                args.append("(" + " ".join([*(f"~{p}" for p in self.scripts), "+evalsha"]) + ")")
        else:
            merged = dict.fromkeys([*self.read, *self.write, *self.scripts])
            args += [f"~{p}" for p in merged]
        return args

    def line(self, user: str, *, redis7: bool) -> str:
        """The line the chart's ConfigMap holds (redis-cli input: a selector quoted)."""
        words = ["ACL", "SETUSER", user, *self.arguments(redis7=redis7)]
        return " ".join(f'"{w}"' if " " in w else w for w in words)


async def command(redis: Redis, *words: str) -> Any:
    """A raw command (ACL SETUSER with selectors, ACL LOG as Redis sends it: redis-py's own
    helpers cover neither)."""
    send: Any = redis.execute_command  # untyped in redis-py
    return await send(*words)


async def server_major(redis: Redis) -> int:
    """The server's major version (INFO server, as the admin)."""
    info = await redis.info("server")
    return int(str(info["redis_version"]).split(".")[0])


async def create_user(admin: Redis, user: str, password: str, rule: Rule, *, redis7: bool) -> None:
    await command(admin, "ACL", "SETUSER", user, *rule.arguments(redis7=redis7))
    await command(admin, "ACL", "SETUSER", user, f">{password}")


def split_line(line: str) -> list[str]:
    """A ConfigMap line back into its words (redis-cli quoting)."""
    return shlex.split(line)


Users = dict[str, tuple[str, str]]
"""rule name -> (user, password)"""


async def make_users(
    admin: Redis, names: Iterable[str], prefixes: Prefixes, tag: str, *, redis7: bool
) -> Users:
    """One user per rule (`berth-<rule>-<tag>`, a random password)."""
    users: Users = {}
    for name in names:
        users[name] = (f"berth-{name}-{tag}", secrets.token_hex(16))
        await create_user(admin, *users[name], Rule.of(name, prefixes), redis7=redis7)
    return users


async def drop_users(admin: Redis, users: Users) -> None:
    for user, _ in users.values():
        await admin.acl_deluser(user)


def component_env(users: Users, kinds: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """cli.supervisor.Stack's `component_env`: each kind of process logs in as the user of
    its rule (`kinds`: kind -> rule)."""
    return {
        kind: {ENV_REDIS_USERNAME: users[rule][0], ENV_REDIS_PASSWORD: users[rule][1]}
        for kind, rule in kinds.items()
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def acl_refusals(admin: Redis, users: set[str]) -> list[dict[str, str]]:
    """The ACL LOG's refusals of `users`, but CLIENT SETINFO: redis-py sends it on every
    connection and ignores a refusal; it is not granted."""
    entries: Any = await command(admin, "ACL", "LOG", "128")
    out = []
    for entry in entries:
        if isinstance(entry, dict):
            fields = entry
        else:
            fields = dict(zip(entry[::2], entry[1::2], strict=True))
        record = {_text(k): _text(v) for k, v in fields.items()}
        if record.get("username") in users and not record.get("object", "").startswith("client"):
            out.append(record)
    return out
