"""Every Kafka message carries an authenticator that only a component allowed to send that kind
of message can produce; receivers check it before they decode anything.

- Keys: one or more per sending component ("queue", "scheduler", "binder"), in a file named by
  `BERTH_MESSAGE_KEYS` (YAML or JSON: `{component: [base64 key, ...]}`, each key >= 32 bytes),
  or a directory of one file per component (its keys one per line: a mounted Secret).
  A component signs with the first key of its own list and receivers accept any key of the
  sender's list, so a key is rotated by adding the new one second everywhere, then moving it
  first, then dropping the old one. A process needs only its own keys and those of the senders
  it reads (the chart mounts each component's keys from Secrets).
- Who may send what (`SENDERS`): schedule requests come from the queue, proposals from
  workers, outcomes from workers and binders. A message on a topic from any other component,
  or without a valid authenticator, goes to the dead-letter topic with the reason.
- The authenticator (header `berth-auth`: `sender:key id:milliseconds:hex HMAC-SHA256`) covers
  the topic's role, the sender, the time, the record key and the value. A message older than
  `max_age_seconds` (default 10 minutes), or dated too far ahead, is refused: a replay within
  the window meets the pipeline's own idempotence (stale attempts, claimed uids, leases).
- HMAC, not signatures: about a microsecond per message against tens for Ed25519; a receiver
  holding a sender's key could forge that sender's messages, so each process gets only the
  keys it needs, and no component reads the kinds it sends.

Without keys (none configured) nothing is signed or checked, and the services say so at start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ENV_MESSAGE_KEYS = "BERTH_MESSAGE_KEYS"
"""Path of the message keys file (see the module docstring)."""

AUTH_HEADER = "berth-auth"
COMPONENTS = ("queue", "scheduler", "binder")
SENDERS: Mapping[str, frozenset[str]] = {
    "schedule": frozenset({"queue"}),
    "proposals": frozenset({"scheduler"}),
    "outcomes": frozenset({"scheduler", "binder"}),
}
"""Topic role -> the components that may send on it (other roles: any component with keys)."""
MIN_KEY_BYTES = 32
DEFAULT_MAX_AGE_SECONDS = 600.0
FUTURE_SKEW_SECONDS = 60.0


class MessageKeysError(ValueError):
    """The keys file is missing, unreadable or malformed; the message names file and field."""


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class MessageKeys:
    """Component -> its keys, the signing one first."""

    keys: Mapping[str, tuple[bytes, ...]]

    @classmethod
    def generate(cls, components: Sequence[str] = COMPONENTS) -> MessageKeys:
        return cls({c: (secrets.token_bytes(MIN_KEY_BYTES),) for c in components})

    @classmethod
    def load(cls, path: str | Path) -> MessageKeys:
        """A keys file, or a directory of one file per component named after it, each holding
        its keys one per line (a Secret mounted with only the keys a process needs)."""
        where = str(path)
        if Path(path).is_dir():
            return cls._load_directory(Path(path))
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MessageKeysError(f"{ENV_MESSAGE_KEYS}={where}: cannot read it: {exc}") from exc
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise MessageKeysError(f"{where}: not YAML or JSON: {exc}") from exc
        return cls.parse(raw, where)

    @classmethod
    def _load_directory(cls, directory: Path) -> MessageKeys:
        raw: dict[str, list[str]] = {}
        for component in COMPONENTS:
            file = directory / component
            if not file.is_file():
                continue
            try:
                text = file.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as exc:
                raise MessageKeysError(f"{file}: cannot read it: {exc}") from exc
            raw[component] = [line.strip() for line in text.splitlines() if line.strip()]
        return cls.parse(raw, str(directory))

    @classmethod
    def parse(cls, raw: object, where: str) -> MessageKeys:
        if not isinstance(raw, dict) or not raw:
            raise MessageKeysError(f"{where}: want a mapping of component to a list of keys")
        out: dict[str, tuple[bytes, ...]] = {}
        for component, keys in raw.items():
            if component not in COMPONENTS:
                raise MessageKeysError(
                    f"{where}: unknown component {component!r} "
                    f"(want one of {', '.join(COMPONENTS)})"
                )
            if isinstance(keys, str):
                keys = [keys]
            if not isinstance(keys, list) or not keys:
                raise MessageKeysError(f"{where}: {component}: want a non-empty list of keys")
            decoded: list[bytes] = []
            for i, text in enumerate(keys):
                try:
                    key = base64.b64decode(str(text), validate=True)
                except (binascii.Error, ValueError) as exc:
                    raise MessageKeysError(f"{where}: {component}[{i}]: not base64") from exc
                if len(key) < MIN_KEY_BYTES:
                    raise MessageKeysError(
                        f"{where}: {component}[{i}]: {len(key)} bytes, want at least "
                        f"{MIN_KEY_BYTES}"
                    )
                decoded.append(key)
            out[component] = tuple(decoded)
        return cls(out)

    def dump(self) -> str:
        """The keys file's text (JSON)."""
        return json.dumps(
            {c: [base64.b64encode(k).decode() for k in keys] for c, keys in self.keys.items()},
            indent=2,
        )

    def write(self, path: str | Path) -> None:
        """Write the keys file readable by its owner only."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.dump())

    def only(self, *components: str) -> MessageKeys:
        """The keys of these components alone (what one process should hold)."""
        return MessageKeys({c: k for c, k in self.keys.items() if c in components})


def keys_from_env(env: Mapping[str, str]) -> MessageKeys | None:
    """The keys file named by BERTH_MESSAGE_KEYS (None when unset)."""
    path = env.get(ENV_MESSAGE_KEYS, "")
    return MessageKeys.load(path) if path else None


def topic_roles(topics: object) -> dict[str, str]:
    """Topic name -> role, from a shared.messaging.kafka.Topics (its field names are the roles)."""
    names = ("schedule", "proposals", "outcomes", "dlq")
    return {getattr(topics, n): n for n in names if isinstance(getattr(topics, n, None), str)}


def _mac(key: bytes, role: str, sender: str, millis: int, record_key: bytes, value: bytes) -> str:
    head = f"{role}\0{sender}\0{millis}\0{len(record_key)}\0".encode()
    return hmac.digest(key, head + record_key + value, "sha256").hex()


@dataclass(slots=True)
class Signer:
    """Adds the authenticator of `component` to the messages it sends."""

    keys: MessageKeys
    component: str
    roles: Mapping[str, str]
    """Topic name -> role (topic_roles)."""
    clock: Callable[[], float] = time.time
    _key: bytes = field(init=False)
    _id: str = field(init=False)

    def __post_init__(self) -> None:
        own = self.keys.keys.get(self.component)
        if not own:
            raise MessageKeysError(f"no message key for {self.component} in the keys file")
        self._key, self._id = own[0], _key_id(own[0])

    def header(self, topic: str, record_key: bytes | None, value: bytes) -> tuple[str, bytes]:
        millis = int(self.clock() * 1000)
        role = self.roles.get(topic, topic)
        mac = _mac(self._key, role, self.component, millis, record_key or b"", value)
        return AUTH_HEADER, f"{self.component}:{self._id}:{millis}:{mac}".encode()


@dataclass(slots=True)
class Verifier:
    """Checks the authenticator of a received message."""

    keys: MessageKeys
    roles: Mapping[str, str]
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS
    clock: Callable[[], float] = time.time
    _by_id: dict[tuple[str, str], bytes] = field(init=False)

    def __post_init__(self) -> None:
        self._by_id = {(c, _key_id(k)): k for c, keys in self.keys.keys.items() for k in keys}

    def refusal(
        self,
        topic: str,
        record_key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]] | None,
    ) -> str:
        """Why the message is not accepted ("" when it is), for the dead letter."""
        found = [v for k, v in headers or () if k == AUTH_HEADER]
        if len(found) != 1:
            return (
                "unauthenticated: no berth-auth header"
                if not found
                else ("unauthenticated: more than one berth-auth header")
            )
        try:
            sender, key_id, millis_text, mac = found[0].decode("ascii").split(":")
            millis = int(millis_text)
        except (UnicodeDecodeError, ValueError):
            return "unauthenticated: malformed berth-auth header"
        role = self.roles.get(topic, topic)
        allowed = SENDERS.get(role)
        if allowed is not None and sender not in allowed:
            return f"unauthenticated: {sender!r} may not send on {role}"
        key = self._by_id.get((sender, key_id))
        if key is None:
            return f"unauthenticated: unknown key {key_id} for {sender!r}"
        want = _mac(key, role, sender, millis, record_key or b"", value or b"")
        if not hmac.compare_digest(want, mac):
            return "unauthenticated: the authenticator does not match the message"
        age = self.clock() - millis / 1000
        if age > self.max_age_seconds:
            return (
                f"unauthenticated: signed {age:.0f} s ago (older than {self.max_age_seconds:.0f} s)"
            )
        if age < -FUTURE_SKEW_SECONDS:
            return f"unauthenticated: dated {-age:.0f} s ahead"
        return ""
