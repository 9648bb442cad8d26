"""The wire format every berth message shares: msgpack maps ``{"v": SCHEMA_VERSION, "t":
<type>, ...}``, packed and unpacked here, and the one codec of their fields.

A message is a dataclass (shared.messaging.messages, shared.messaging.proposals): its fields'
types, defaults and `wire` metadata (name on the wire, identity check) are its schema.
`encode_body` writes it, leaving out what holds its default; `decode_body` reads it through
shared.models.decoding (the decoder models and the scheduler configuration use, with the WIRE
dialect's leaves), with a MessageError naming the field ("victims[0]: field 'uid': invalid
uid ''")."""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, TypeVar, cast

import msgpack

from shared.models import codec
from shared.models.decoding import Decoder, Dialect, FieldError, object_decoder
from shared.models.names import dns1123_label, dns1123_subdomain
from shared.models.schema import fields_of
from shared.models.validation import UID_MAX

SCHEMA_VERSION = 1


class MessageError(ValueError):
    """A payload that cannot be decoded or does not follow its schema."""


# ---------------------------------------------------------------------------------------------
# the codec: a message is a dataclass; its fields' types and `wire` metadata are its schema


def wire(name: str, check: str = "") -> dict[str, str]:
    """A message field's metadata: its name on the wire and, for identity fields, the `check`
    its value must pass (one of CHECKS)."""
    return {"json": name, "format": check}


# Identity fields every message carries, checked as the store and the queue will use them (a
# pod key becomes part of Redis keys and fields, a tenant part of a hash tag): anything that
# passes here is safe downstream, anything else is a MessageError naming the field.
_BAD_TENANT_CHARS = frozenset("{}*?[]|# \t\r\n")
MAX_ATTEMPT = 2**53 - 1


def _tenant(value: Any) -> str:
    tenant = _str(value)
    if not tenant or len(tenant) > 253 or any(c in _BAD_TENANT_CHARS for c in tenant):
        raise FieldError(f"invalid tenant {tenant!r:.80}")
    return tenant


def _pod_key(value: Any) -> str:
    key = _str(value)
    namespace, slash, pod = key.partition("/")
    if not slash or dns1123_label(namespace) or dns1123_subdomain(pod):
        raise FieldError(f"{key!r:.80} is not namespace/name")
    return key


def _uid(value: Any) -> str:
    uid = _str(value)
    if not uid or len(uid) > UID_MAX or not uid.isprintable() or " " in uid:
        raise FieldError(f"invalid uid {uid!r:.80}")
    return uid


def _attempt(value: Any) -> int:
    attempt = _int(value)
    if not 0 <= attempt <= MAX_ATTEMPT:
        raise FieldError(f"{attempt} is out of range 0..{MAX_ATTEMPT}")
    return attempt


def _node_name(value: Any) -> str:
    node = _str(value)
    if dns1123_subdomain(node):
        raise FieldError(f"{node!r:.80} is not a node name")
    return node


CHECKS: dict[str, Decoder] = {
    "tenant": _tenant,
    "pod-key": _pod_key,
    "uid": _uid,
    "attempt": _attempt,
    "node-name": _node_name,
}


def _expected(kind: str, value: Any) -> FieldError:
    return FieldError(f"expected {kind}, got {value!r:.80}")


def _str(value: Any) -> str:
    if type(value) is str:
        return value
    raise _expected("str", value)


def _int(value: Any) -> int:
    # Never a bool (msgpack keeps them apart; Python's bool is an int subclass).
    if type(value) is int:
        return value
    raise _expected("int", value)


def _number(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _expected("int or float", value)


def _bytes(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    raise _expected("bytes", value)


def _strings(value: Any) -> tuple[str, ...]:
    if type(value) is list:
        for item in value:
            if type(item) is not str:
                break
        else:
            return tuple(value)
    raise FieldError("expected a list of strings")


def _choice(choices: tuple[str, ...]) -> Decoder:
    def decode(value: Any) -> str:
        if _str(value) not in choices:
            raise FieldError(f"{value!r} is not one of {', '.join(choices)}")
        return cast(str, value)

    return decode


def _objects(cls: Any) -> Decoder:
    def decode(value: Any) -> tuple[Any, ...]:
        if type(value) is not list:
            raise _expected("list", value)
        item = object_decoder(cls, WIRE)
        out = []
        for index, element in enumerate(value):
            try:
                out.append(item(element))
            except FieldError as e:
                raise e.at(f"[{index}]") from None
        return tuple(out)

    return decode


def _leaf(hint: Any, check: str) -> Decoder:
    if check:
        return CHECKS[check]
    simple = {str: _str, int: _int, float: _number, bytes: _bytes}.get(hint)
    if simple is not None:
        return simple
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Literal:
        return _choice(args)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        if args[0] is str:
            return _strings
        if dataclasses.is_dataclass(args[0]):
            return _objects(args[0])
    raise TypeError(f"no wire decoder for {hint!r}")


def _wrong_type(kind: str, value: object) -> FieldError:
    return FieldError("expected a map" if kind == "object" else f"expected {kind}")


WIRE = Dialect(leaf=_leaf, wrong_type=_wrong_type, lenient=True)
"""Messages, in shared.models.decoding's terms: their fields' types and checks; fields a newer
peer adds are skipped."""

M = TypeVar("M")


def decode_body(cls: type[M], body: Mapping[str, Any]) -> M:
    """The message `cls` from its fields (a single message's or a batch item's; "v", "t" and
    fields this version does not know are skipped); MessageError naming the field."""
    try:
        return cast(M, object_decoder(cast(Any, cls), WIRE)(body))
    except FieldError as e:
        raise MessageError(_describe(e)) from None


def _describe(error: FieldError) -> str:
    """ "victims[0]: field 'uid': invalid uid ''", from the error's path."""
    segments = error.segments  # innermost first
    text = error.reason
    if segments and segments[0].startswith("."):
        text = f"field {segments[0][1:]!r}: {text}"
        segments = segments[1:]
    where = "".join(reversed(segments)).lstrip(".")
    return f"{where}: {text}" if where else text


def encode_body(message: Any) -> dict[str, Any]:
    """The fields of a message (wire names; fields holding their default left out, as the
    decoder puts them back)."""
    return _encoder(cast(Any, type(message)))(message)


@functools.cache
def _encoder(cls: Any) -> Callable[[Any], dict[str, Any]]:
    """An encoder written out for `cls`, one statement per field, as dataclasses writes its
    __init__: a loop over the fields costs 3.5x as much, and workers and binders encode a
    proposal and an outcome per pod."""
    lines = ["def encode(m):", "    out = {}"]
    scope: dict[str, Any] = {}
    for index, spec in enumerate(fields_of(cls)):
        args = typing.get_args(spec.hint)
        value = f"m.{spec.attr}"
        if typing.get_origin(spec.hint) is tuple and dataclasses.is_dataclass(args[0]):
            scope[f"nested{index}"] = _encoder(cast(Any, args[0]))
            value = f"[nested{index}(item) for item in m.{spec.attr}]"
        elif typing.get_origin(spec.hint) is tuple:
            value = f"list(m.{spec.attr})"
        if spec.required:
            lines.append(f"    out[{spec.json!r}] = {value}")
        else:
            lines.append(f"    if {_differs(f'm.{spec.attr}', spec.default, index, scope)}:")
            lines.append(f"        out[{spec.json!r}] = {value}")
    lines.append("    return out")
    exec("\n".join(lines), scope)  # the source is built above from the fields alone
    return cast(Callable[[Any], dict[str, Any]], scope["encode"])


def _differs(value: str, default: Any, index: int, scope: dict[str, Any]) -> str:
    """The test that `value` is not `default`: its truth for 0, "", () and b"" (the only
    false value of their types; -0.0 == 0.0), `is not None` for None, else a comparison."""
    if default is None:
        return f"{value} is not None"
    if type(default) in (int, float, str, bytes, tuple) and not default:
        return value
    scope[f"default{index}"] = default
    return f"{value} != default{index}"


class WireBody:
    """A dataclass on this codec: `to_body` / `from_body` are its fields (a batch item's, or a
    single message's without "v" and "t")."""

    __slots__ = ()

    def to_body(self) -> dict[str, Any]:
        return encode_body(self)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return decode_body(cls, body)


class WireMessage(WireBody):
    """A message with an envelope of its own: ``{"v": SCHEMA_VERSION, "t": TYPE, ...}``."""

    __slots__ = ()
    TYPE: ClassVar[str]

    def encode(self) -> bytes:
        return pack_message({"v": SCHEMA_VERSION, "t": self.TYPE, **encode_body(self)})

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Self:
        return cls.from_body(expect_message(data, cls.TYPE))


class BatchedMessage(WireMessage):
    """A message also sent in batches (type `BATCH`, see `pack_batch`): one record carries
    those that ended or were decided together."""

    __slots__ = ()
    BATCH: ClassVar[str]

    @classmethod
    def items_of(
        cls, data: bytes | bytearray | memoryview, headers: Sequence[tuple[str, bytes]] = ()
    ) -> list[BatchItem]:
        """The messages of a record, one or a batch, unchecked (`from_body` checks each): a
        reader interested in few of them looks at a field or two before building one."""
        return batch_items(data, cls.TYPE, cls.BATCH, headers)

    @classmethod
    def decode_all(
        cls, data: bytes | bytearray | memoryview, *, lenient: bool = False
    ) -> list[Self]:
        """Every message of a record; MessageError if the record or (unless `lenient`: then
        they are skipped) one of them is invalid. For readers that dead-letter nothing
        (tools, the dashboard, tests)."""
        return decode_items(cls.items_of(data), cls.from_body, lenient=lenient)


def wire_names(cls: Any) -> tuple[str, ...]:
    """Every field name a message of `cls` may carry."""
    return tuple(spec.json for spec in fields_of(cls))


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


def unpack_map(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """A msgpack map; MessageError if `data` is not one."""
    try:
        return codec.unpack_map(data)
    except codec.CodecError as e:
        raise MessageError(str(e)) from e


def unpack(data: bytes | bytearray | memoryview) -> tuple[str, dict[str, Any]]:
    """(type, body) of any berth message; MessageError if it is not one."""
    body = unpack_map(data)
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
"""Items one batch message may carry (writers send far fewer: see shared.messaging.batch_sender)."""
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
    items = body.get("items")
    if type(items) is not list:
        raise MessageError(f"field 'items': expected list, got {items!r:.80}")
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
