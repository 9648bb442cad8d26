"""Who may do what through the API front door: tokens, and the rule.

The tokens file (`berth up --tokens FILE`, BERTH_TOKENS_FILE) is YAML, a token per key:

    "a-long-random-token-for-team-a": {tenant: team-a, namespaces: [team-a, team-a-dev]}
    "another-long-random-token":      {admin: true}

- A tenant token reads and changes namespaced objects (pods, PodGroups, PDBs, LocalQueues, ...)
  in its namespaces only; cluster objects (nodes, namespaces, PriorityClasses, ResourceFlavors,
  ClusterQueues) need an admin token. An admin token may do anything.
- Tokens are at least 16 characters; the file is read strictly (unknown keys, a tenant without
  namespaces, `admin: false`... are errors naming the token's position, never the token).
- Tokens are compared through their SHA-256 digests, so a lookup's timing tells nothing about
  a token's characters. The file is read again when it changes (class Tokens).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shared.models.schema import KIND_BY_NAME

log = logging.getLogger(__name__)

MIN_TOKEN_LENGTH = 16
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class TokensError(ValueError):
    """The tokens file cannot be used (the message says where and why)."""


@dataclass(frozen=True, slots=True)
class Identity:
    name: str
    """The tenant's name, or "admin"."""
    admin: bool = False
    namespaces: frozenset[str] = frozenset()

    def describe(self) -> str:
        return "admin" if self.admin else f"tenant {self.name}"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(text: str, source: str = "tokens file") -> dict[str, Identity]:
    """token digest -> identity; TokensError on anything unexpected."""
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TokensError(f"{source}: not YAML: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise TokensError(
            f"{source}: want a mapping of token -> {{tenant, namespaces}} or {{admin: true}}"
        )
    out: dict[str, Identity] = {}
    for position, (token, spec) in enumerate(data.items(), start=1):
        where = f"{source}: token #{position}"
        if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
            raise TokensError(f"{where}: a token is a string of {MIN_TOKEN_LENGTH}+ characters")
        out[digest(token)] = _identity(spec, where)
    return out


def _identity(spec: Any, where: str) -> Identity:
    if not isinstance(spec, dict):
        raise TokensError(f"{where}: want {{tenant: NAME, namespaces: [...]}} or {{admin: true}}")
    if "admin" in spec:
        unknown = set(spec) - {"admin", "name"}
        if unknown:
            raise TokensError(f"{where}: unknown field(s) {sorted(unknown)} beside admin")
        if spec["admin"] is not True:
            raise TokensError(f"{where}: admin must be true (leave it out for a tenant)")
        return Identity(str(spec.get("name") or "admin"), admin=True)
    unknown = set(spec) - {"tenant", "namespaces"}
    if unknown:
        raise TokensError(f"{where}: unknown field(s) {sorted(unknown)}")
    tenant, namespaces = spec.get("tenant"), spec.get("namespaces")
    if not isinstance(tenant, str) or not tenant:
        raise TokensError(f"{where}: tenant must be a name")
    if not isinstance(namespaces, list) or not namespaces:
        raise TokensError(f"{where}: namespaces must be a non-empty list")
    for namespace in namespaces:
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise TokensError(f"{where}: {namespace!r} is not a namespace name")
    return Identity(tenant, namespaces=frozenset(namespaces))


def load_tokens(path: str | Path) -> dict[str, Identity]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TokensError(f"{path}: {exc.strerror or exc}") from None
    return parse_tokens(text, str(path))


class Tokens:
    """The tokens of a file, read again when the file changes (its modification time, size or
    inode). A file that turns unreadable or invalid keeps the last good tokens (and says so
    in the log, once per version); a file that is gone takes every token with it (deleting the
    file is how an operator revokes them all)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._version = _version(self.path)
        self._identities = load_tokens(self.path)
        self.problem = ""
        """Why the file in force is not the one on disk ("" when it is)."""

    def identify(self, token: str) -> Identity | None:
        version = _version(self.path)
        if version != self._version:
            self._version = version
            self._reload(version)
        return self._identities.get(digest(token))

    def _reload(self, version: tuple[int, int, int] | None) -> None:
        if version is None:
            self._identities = {}
            self.problem = f"{self.path} is gone: every token is refused until it is back"
            log.warning("front door: %s", self.problem)
            return
        try:
            self._identities = load_tokens(self.path)
        except TokensError as exc:
            self.problem = f"{exc}; keeping the tokens read before"
            log.warning("front door: %s", self.problem)
            return
        self.problem = ""
        log.info("front door: %s read again (%d tokens)", self.path, len(self._identities))


def _version(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def refusal(who: Identity, kind: str, namespace: str, name: str, verb: str) -> str | None:
    """Why `who` may not `verb` ("read", "change") the object, or None when it may."""
    if who.admin:
        return None
    info = KIND_BY_NAME.get(kind)
    if info is None or not info.namespaced:
        return f"{kind} {name} is a cluster object: only an admin token may {verb} it"
    if namespace not in who.namespaces:
        return (
            f"{who.describe()} may not {verb} {kind} {namespace}/{name}: namespace {namespace} "
            f"is not one of its namespaces ({', '.join(sorted(who.namespaces))})"
        )
    return None


def namespace_refusal(who: Identity, namespace: str) -> str | None:
    """Why `who` may not read namespace `namespace`, or None."""
    if who.admin or namespace in who.namespaces:
        return None
    return (
        f"{who.describe()} may not read namespace {namespace}: its namespaces are "
        f"{', '.join(sorted(who.namespaces))}"
    )
