"""One generic, type-hint-driven decoder from Kubernetes-shaped dicts to model dataclasses.

Decoders are compiled once per (class, mode) into closures, so decoding a pod is a walk over
its data with no per-field introspection. Three modes:
- MANIFEST: what people write (quantity strings or numbers, RFC 3339 timestamps,
  resourceVersion as text);
- API: what a Kubernetes API server serves: the same values as MANIFEST, but fields berth does
  not model are dropped, not rejected (the server validated them, and a newer server adds
  fields this version has never heard of);
- RAW: what ``codec.encode`` writes (resource lists already integers, timestamps as floats).
MANIFEST and RAW reject unknown fields (except those in ``schema.IGNORED``); all reject wrong
types. A failure
raises FieldError carrying the JSON path, built on the way up so success costs nothing.

Documents that are not Kubernetes objects bring their own leaf rules as a ``Dialect`` and share
the rest (the compiled per-class closures, lists, optionals, unknown fields, paths): the
KubeSchedulerConfiguration decoder (shared/config/decode.py) is one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import gc
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from shared.models.names import is_extended_resource
from shared.models.quantity import (
    MAX_EXACT_AMOUNT,
    QuantityError,
    parse_quantity,
    resource_value,
)
from shared.models.schema import fields_of, ignored_fields

Decoder = Callable[[Any], Any]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector during a bulk decode.

    Decoding builds many small container objects that all stay alive, which makes CPython run
    repeated full collections for nothing: measured 4-5x slower for 20,000 pods.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Mode(enum.Enum):
    MANIFEST = "manifest"
    API = "api"
    RAW = "raw"


@dataclass(frozen=True, eq=False)
class Dialect:
    """The rules of a kind of document other than Kubernetes objects (compared by identity:
    one compiled decoder per class and dialect)."""

    leaf: Callable[[Any, str], Decoder]
    """The decoder of a field's type that is not a dataclass, a list or an optional, given its
    `format` metadata ("" when none)."""
    wrong_type: Callable[[str, object], FieldError]
    """The error for a value that is not an "object" or not an "array"."""
    lenient: bool = False
    """Skip fields the class does not declare (a message from a newer peer adds some) instead
    of rejecting them."""


class FieldError(Exception):
    """A problem at a JSON path inside one object (path segments collected bottom-up)."""

    def __init__(self, reason: str, *segments: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = list(reversed(segments))

    def at(self, segment: str) -> FieldError:
        self.segments.append(segment)
        return self

    @property
    def path(self) -> str:
        return "".join(reversed(self.segments)).lstrip(".")


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _expected(what: str, value: object) -> FieldError:
    return FieldError(f"expected {what}, got {type_name(value)}")


def _dec_str(value: Any) -> str:
    if type(value) is str:
        return value
    raise _expected("string", value)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _dec_int(value: Any) -> int:
    if type(value) is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            # No str(value): Python refuses to print integers of more than 4,300 digits.
            raise FieldError(
                f"Invalid value: a {value.bit_length()}-bit integer is out of range for a "
                "64-bit integer"
            )
        return value
    raise _expected("integer", value)


def _dec_bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    raise _expected("boolean", value)


def _dec_int_or_str(value: Any) -> int | str:
    if type(value) is int or type(value) is str:
        return value
    raise _expected("integer or string", value)


def _dec_int_string(value: Any) -> int:
    """resourceVersion: text of a non-negative integer (or an integer)."""
    if type(value) is int and value >= 0:
        return value
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    if type(value) is str and value == "":
        return 0
    raise FieldError(f"invalid integer string {_quote(value)}")


def _quote(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return '"' + text.replace('"', '\\"') + '"'


def parse_time(value: Any) -> float:
    """RFC 3339 text (or a YAML timestamp) to epoch seconds."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            raise FieldError(f"invalid RFC 3339 timestamp {_quote(value)}") from None
    else:
        raise _expected("an RFC 3339 timestamp string", value)
    if moment.tzinfo is None:
        if isinstance(value, str):
            raise FieldError(f"invalid RFC 3339 timestamp {_quote(value)}: no time zone")
        moment = moment.replace(tzinfo=dt.UTC)  # YAML timestamps without zone are UTC
    return moment.timestamp()


def _dec_time_raw(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _expected("number", value)


def _dec_str_map(value: Any) -> dict[str, str]:
    if type(value) is not dict:
        raise _expected("object", value)
    for key, item in value.items():
        if type(item) is not str:
            raise _expected("string", item).at(f".{key}")
        if type(key) is not str:
            raise _expected("string key", key).at(f".{key}")
    return dict(value)


def _check_json(value: Any) -> None:
    """A value JSON can carry: null, boolean, number, string, array, object (string keys)."""
    if value is None or type(value) in (str, int, float, bool):
        return
    if type(value) is list:
        for i, item in enumerate(value):
            try:
                _check_json(item)
            except FieldError as e:
                raise e.at(f"[{i}]") from None
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise _expected("string key", key).at(f".{key}")
            try:
                _check_json(item)
            except FieldError as e:
                raise e.at(f".{key}") from None
        return
    # e.g. an unquoted YAML timestamp or a binary value
    raise _expected("a JSON value", value)


def _dec_json_object(value: Any) -> dict[str, Any]:
    """An opaque JSON object (a controller's pod template): checked, kept as it is."""
    if type(value) is not dict:
        raise _expected("object", value)
    _check_json(value)
    return dict(value)


def _dec_resources_manifest(value: Any) -> dict[str, int]:
    if type(value) is not dict:
        raise _expected("object", value)
    out: dict[str, int] = {}
    for name, raw in value.items():
        if type(name) is not str:
            raise _expected("string key", name).at(f".{name}")
        try:
            amount = resource_value(name, raw)
        except QuantityError:
            raise FieldError(f"invalid quantity {_quote(raw)}", f".{name}") from None
        if amount < 0 or (amount == 0 and _is_negative(raw)):
            raise FieldError(f"invalid quantity {_quote(raw)}: must be non-negative", f".{name}")
        if amount > MAX_EXACT_AMOUNT:
            # A valid quantity to the API server ("1E" cpu, "9Ei" memory): kept as the largest
            # amount berth carries exactly, which no node can hold or exceed meaningfully.
            amount = MAX_EXACT_AMOUNT
        if is_extended_resource(name) and parse_quantity(raw).denominator != 1:
            raise FieldError(
                f"invalid quantity {_quote(raw)}: must be an integer (extended resource)",
                f".{name}",
            )
        out[name] = amount
    return out


def _is_negative(raw: Any) -> bool:
    # ceil() turns "-0.1" into 0: look at the value itself before calling it non-negative.
    return parse_quantity(raw) < 0


def _dec_resources_raw(value: Any) -> dict[str, int]:
    if type(value) is not dict:
        raise _expected("object", value)
    for name, amount in value.items():
        if type(name) is not str:
            raise _expected("string key", name).at(f".{name}")
        if type(amount) is not int or amount < 0:
            raise FieldError(f"invalid resource amount {amount!r}", f".{name}")
    return dict(value)


def _list_of(item: Decoder, wrong: Callable[[str, object], FieldError] = _expected) -> Decoder:
    def decode(value: Any) -> list[Any]:
        if type(value) is not list:
            raise wrong("array", value)
        out = []
        for i, element in enumerate(value):
            try:
                out.append(item(element))
            except FieldError as e:
                raise e.at(f"[{i}]") from None
        return out

    return decode


def _optional(inner: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        return None if value is None else inner(value)

    return decode


def _dialect_decoder(hint: Any, dialect: Dialect, fmt: str) -> Decoder:
    """The core's containers (optionals, lists, dataclasses), the dialect's leaves; the field's
    format applies through an optional, not to a list's items."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        present = tuple(a for a in args if a is not type(None))
        if len(present) != 1:
            return dialect.leaf(hint, fmt)
        inner = _decoder_for(present[0], dialect, fmt)
        return _optional(inner) if len(present) < len(args) else inner
    if origin is list:
        return _list_of(_decoder_for(args[0], dialect), dialect.wrong_type)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return object_decoder(typing.cast(Any, hint), dialect)
    return dialect.leaf(hint, fmt)


def _decoder_for(hint: Any, mode: Mode | Dialect, fmt: str = "") -> Decoder:
    if isinstance(mode, Dialect):
        return _dialect_decoder(hint, mode, fmt)
    if fmt == "int-string":
        return _dec_int_string if mode is not Mode.RAW else _dec_int
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is str:
        return _dec_str
    if hint is bool:
        return _dec_bool
    if hint is int:
        return _dec_int
    if hint is float:
        return parse_time if mode is not Mode.RAW else _dec_time_raw
    if origin in (types.UnionType, typing.Union):
        present = tuple(a for a in args if a is not type(None))
        inner: Decoder
        if set(present) == {int, str}:
            inner = _dec_int_or_str
        elif len(present) == 1:
            inner = _decoder_for(present[0], mode)
        else:
            raise TypeError(f"unsupported union {hint!r}")
        return _optional(inner) if len(present) < len(args) else inner
    if origin is list:
        return _list_of(_decoder_for(args[0], mode))
    if origin is dict and args == (str, str):
        return _dec_str_map
    if origin is dict and args == (str, int):
        return _dec_resources_manifest if mode is not Mode.RAW else _dec_resources_raw
    if origin is dict and args == (str, Any):
        return _dec_json_object
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return object_decoder(typing.cast(Any, hint), mode)
    raise TypeError(f"no decoder for {hint!r}")


@cache
def object_decoder(cls: Any, mode: Mode | Dialect) -> Decoder:
    """Decoder for one dataclass: JSON object -> instance (null fields keep their default). A
    dialect's objects may be any Mapping; Kubernetes objects are dicts."""
    table: dict[str, tuple[str, Decoder]] = {}
    for spec in fields_of(cls):
        table[spec.json] = (spec.attr, _decoder_for(spec.hint, mode, spec.fmt))
    ignored = ignored_fields(cls)
    lenient = mode is Mode.API or (isinstance(mode, Dialect) and mode.lenient)
    dialect = isinstance(mode, Dialect)
    required = tuple((spec.attr, spec.json) for spec in fields_of(cls) if spec.required)
    wrong = mode.wrong_type if isinstance(mode, Dialect) else _expected

    def decode(value: Any) -> Any:
        if type(value) is not dict and not (dialect and isinstance(value, Mapping)):
            raise wrong("object", value)
        kwargs: dict[str, Any] = {}
        for key, raw in value.items():
            entry = table.get(key)
            if entry is None:
                if lenient or key in ignored:
                    continue
                raise FieldError("unknown field", f".{key}")
            if raw is None:
                continue
            attr, field_decoder = entry
            try:
                kwargs[attr] = field_decoder(raw)
            except FieldError as e:
                raise e.at(f".{key}") from None
        try:
            return cls(**kwargs)
        except TypeError:
            # Only now look for what is missing: a decode that succeeds pays nothing for it.
            for attr, name in required:
                if attr not in kwargs:
                    raise FieldError(f"missing field {name!r}") from None
            raise

    return decode
