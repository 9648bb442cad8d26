"""The wire format every berth message shares: msgpack maps ``{"v": SCHEMA_VERSION, "t":
<type>, ...}``, packed and unpacked here, and strict field readers that name the field in
their MessageError. The message schemas are in shared.messages and shared.proposals."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import msgpack

from shared.models.names import dns1123_label, dns1123_subdomain
from shared.models.validation import UID_MAX

SCHEMA_VERSION = 1


class MessageError(ValueError):
    """A payload that cannot be decoded or does not follow its schema."""


# ---------------------------------------------------------------------------------------------
# field readers: strict, with the field name in the error


def need_field(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """body[name], which must be there and be a `kind`. A bool is never a number here (msgpack
    keeps them apart; Python's bool is an int subclass)."""
    if name not in body:
        raise MessageError(f"missing field {name!r}")
    value = body[name]
    if not isinstance(value, kind) or (type(value) is bool and not _admits_bool(kind)):
        raise MessageError(f"field {name!r}: expected {_kind_name(kind)}, got {value!r:.80}")
    return value


def _admits_bool(kind: type | tuple[type, ...]) -> bool:
    return bool in kind if isinstance(kind, tuple) else kind is bool


def opt_field(
    body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any
) -> Any:
    """body[name] as `need_field` reads it, or `default` when absent or nil."""
    if body.get(name) is None:
        return default
    return need_field(body, name, kind)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def strings_field(body: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """An optional list of strings (absent: empty)."""
    values = opt_field(body, name, list, [])
    if not all(isinstance(v, str) for v in values):
        raise MessageError(f"field {name!r}: expected a list of strings")
    return tuple(values)


def _string_map(body: Mapping[str, Any], name: str) -> dict[str, str]:
    values = opt_field(body, name, dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise MessageError(f"field {name!r}: expected a map of strings")
    return cast(dict[str, str], values)


def _all_str(values: Any) -> bool:
    # A plain loop: all() over a generator costs twice as much on the pod-event hot path.
    for value in values:  # noqa: SIM110
        if type(value) is not str:
            return False
    return True


def choice_field(
    body: Mapping[str, Any], name: str, choices: Sequence[str], default: str | None = None
) -> Any:
    """One of `choices`; required unless a `default` is given."""
    value = need_field(body, name, str) if default is None else opt_field(body, name, str, default)
    if value not in choices:
        raise MessageError(f"field {name!r}: {value!r} is not one of {', '.join(choices)}")
    return value


def number_field(body: Mapping[str, Any], name: str, default: float | None = None) -> float:
    if default is not None and body.get(name) is None:
        return default
    return float(need_field(body, name, (int, float)))


# Identity fields every message carries, checked as the store and the queue will use them (a
# pod key becomes part of Redis keys and fields, a tenant part of a hash tag): anything that
# passes here is safe downstream, anything else is a MessageError naming the field.
_BAD_TENANT_CHARS = frozenset("{}*?[]|# \t\r\n")
MAX_ATTEMPT = 2**53 - 1


def tenant_field(body: Mapping[str, Any]) -> str:
    tenant: str = need_field(body, "tenant", str)
    if not tenant or len(tenant) > 253 or any(c in _BAD_TENANT_CHARS for c in tenant):
        raise MessageError(f"field 'tenant': invalid tenant {tenant!r:.80}")
    return tenant


def pod_key_field(body: Mapping[str, Any], name: str = "key") -> str:
    key: str = need_field(body, name, str)
    namespace, slash, pod = key.partition("/")
    if not slash or dns1123_label(namespace) or dns1123_subdomain(pod):
        raise MessageError(f"field {name!r}: {key!r:.80} is not namespace/name")
    return key


def uid_field(body: Mapping[str, Any], name: str = "uid") -> str:
    uid: str = need_field(body, name, str)
    if not uid or len(uid) > UID_MAX or not uid.isprintable() or " " in uid:
        raise MessageError(f"field {name!r}: invalid uid {uid!r:.80}")
    return uid


def attempt_field(body: Mapping[str, Any]) -> int:
    attempt: int = need_field(body, "attempt", int)
    if not 0 <= attempt <= MAX_ATTEMPT:
        raise MessageError(f"field 'attempt': {attempt} is out of range 0..{MAX_ATTEMPT}")
    return attempt


def pack_message(body: dict[str, Any]) -> bytes:
    return cast(bytes, msgpack.packb(body, use_bin_type=True))


def pack_value(value: Any) -> bytes:
    return cast(bytes, msgpack.packb(value, use_bin_type=True))


def array_header(count: int) -> bytes:
    """msgpack's array header for `count` items (fixarray, array 16 or array 32)."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def unpack(data: bytes | bytearray | memoryview) -> tuple[str, dict[str, Any]]:
    """(type, body) of any berth message; MessageError if it is not one."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises many unrelated exception types on bad input
        raise MessageError(f"undecodable msgpack: {e}") from e
    if not isinstance(body, dict):
        raise MessageError(f"expected a map, got {type(body).__name__}")
    version = body.get("v")
    if version != SCHEMA_VERSION:
        raise MessageError(f"unsupported schema version {version!r} (expected {SCHEMA_VERSION})")
    kind = body.get("t")
    if not isinstance(kind, str):
        raise MessageError("missing message type 't'")
    return kind, body


def expect_message(data: bytes | bytearray | memoryview, kind: str) -> dict[str, Any]:
    found, body = unpack(data)
    if found != kind:
        raise MessageError(f"expected a {kind!r} message, got {found!r}")
    return body


# ---------------------------------------------------------------------------------------------
# batches: several messages of one type in one Kafka record

MAX_BATCH_ITEMS = 1024
"""Items one batch message may carry (writers send far fewer: see shared.batch_sender)."""
ITEM_HEADERS = "hdr"
"""An item's own Kafka-style headers (its trace context), as [[name, bytes], ...]: the
record's headers (its authenticator) belong to the whole batch."""


def pack_batch(kind: str, items: Sequence[Mapping[str, Any]]) -> bytes:
    """A batch message: ``{"v", "t": kind, "items": [body, ...]}``, each body a single
    message's fields without "v" and "t" (and its ITEM_HEADERS when it has any)."""
    return pack_message({"v": SCHEMA_VERSION, "t": kind, "items": list(items)})


def with_headers(
    body: dict[str, Any], headers: Sequence[tuple[str, bytes]] | None
) -> dict[str, Any]:
    """`body` carrying its own headers (a batch item's trace context)."""
    if headers:
        body[ITEM_HEADERS] = [[name, value] for name, value in headers]
    return body


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One item of a consumed record: its fields (checked by the message's `from_body`) and
    headers, or the error that makes it unusable."""

    body: Mapping[str, Any]
    headers: list[tuple[str, bytes]]
    error: str = ""

    def alone(self, kind: str) -> bytes:
        """The item as a single message of type `kind` (a dead letter keeps only the bad
        item of a batch, so that replaying it replays nothing else)."""
        return pack_message({**self.body, "v": SCHEMA_VERSION, "t": kind})


def batch_items(
    data: bytes | bytearray | memoryview,
    single: str,
    batch: str,
    record_headers: Sequence[tuple[str, bytes]] = (),
) -> list[BatchItem]:
    """The items of a record holding one message of type `single` (with the record's
    headers) or a batch of them (type `batch`, each item with its own). MessageError when the
    record as a whole is unusable; an item that is not a map, or whose headers are malformed,
    comes back with its `error` set, and the others are unaffected."""
    kind, body = unpack(data)
    if kind == single:
        return [BatchItem(body, list(record_headers))]
    if kind != batch:
        raise MessageError(f"expected a message of type {single!r} or {batch!r}, got {kind!r}")
    items = need_field(body, "items", list)
    if not items or len(items) > MAX_BATCH_ITEMS:
        raise MessageError(f"field 'items': expected 1..{MAX_BATCH_ITEMS} items, got {len(items)}")
    out: list[BatchItem] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            out.append(BatchItem({}, [], f"items[{index}]: expected a map, got {item!r:.80}"))
            continue
        raw = item.pop(ITEM_HEADERS, None)
        headers = _item_headers(raw)
        if headers is None:
            out.append(BatchItem(item, [], f"items[{index}]: field {ITEM_HEADERS!r}: malformed"))
            continue
        out.append(BatchItem(item, headers))
    return out


def _item_headers(raw: Any) -> list[tuple[str, bytes]] | None:
    if raw is None:
        return []
    if not isinstance(raw, list):
        return None
    headers: list[tuple[str, bytes]] = []
    for pair in raw:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or type(pair[0]) is not str
            or type(pair[1]) is not bytes
        ):
            return None
        headers.append((pair[0], pair[1]))
    return headers


def checked(item: BatchItem) -> Mapping[str, Any]:
    """The item's fields; MessageError when the item is unusable."""
    if item.error:
        raise MessageError(item.error)
    return item.body


T = TypeVar("T")


def decode_items(
    items: Sequence[BatchItem], from_body: Callable[[Mapping[str, Any]], T], *, lenient: bool
) -> list[T]:
    """Every item decoded by `from_body`; MessageError at the first invalid one, unless
    `lenient` (then invalid ones are skipped). For readers that dead-letter nothing."""
    out: list[T] = []
    for item in items:
        try:
            out.append(from_body(checked(item)))
        except MessageError:
            if not lenient:
                raise
    return out
