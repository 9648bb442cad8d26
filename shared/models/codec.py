"""Encoding models: Kubernetes JSON shape (``to_dict``) and versioned msgpack (``encode``).

``to_dict`` writes what ``kubectl get -o json`` would show for the modeled fields: camelCase,
quantities as canonical strings ("1500m", "1Gi", "110"), RFC 3339 timestamps, and fields
holding their default left out. ``load``-ing that dict again gives an equal object.

``encode`` / ``decode`` are the storage and wire format (Redis, Kafka): a msgpack map
``{"v": SCHEMA_VERSION, "kind": ..., "object": ...}`` where the object has the same shape as
``to_dict`` but keeps resource lists as integers and timestamps as floats, so decoding
parses no text. ``decode`` checks types and unknown fields (not the API validation rules:
test objects without containers must round-trip) and raises CodecError on any problem.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import types
import typing
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, cast

import msgpack

from shared.models.decoding import FieldError, Mode, object_decoder, paused_gc
from shared.models.quantity import format_resource
from shared.models.schema import KIND_BY_CLASS, KIND_BY_NAME, KubeObject, fields_of

SCHEMA_VERSION = 1

Encoder = Callable[[Any], Any]


class CodecError(ValueError):
    """Bytes that are not a valid encoded berth object (or an object that cannot be encoded)."""


def format_time(value: float) -> str:
    """Epoch seconds to RFC 3339 in UTC ("2024-01-02T03:04:05Z"), keeping any fraction."""
    moment = dt.datetime.fromtimestamp(value, tz=dt.UTC)
    text = moment.isoformat(timespec="seconds" if value == int(value) else "microseconds")
    return text.replace("+00:00", "Z")


def _identity(value: Any) -> Any:
    return value


def _resources_text(value: dict[str, int]) -> dict[str, str]:
    return {name: format_resource(name, amount) for name, amount in value.items()}


def _copy_dict(value: dict[str, Any]) -> dict[str, Any]:
    return dict(value)


def _encoder_for(hint: Any, mode: Mode, fmt: str = "") -> Encoder:
    if fmt == "int-string":
        return str if mode is Mode.MANIFEST else _identity
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in (str, int, bool):
        return _identity
    if hint is float:
        return format_time if mode is Mode.MANIFEST else _identity
    if origin in (types.UnionType, typing.Union):
        present = tuple(a for a in args if a is not type(None))
        if len(present) == 1:
            inner = _encoder_for(present[0], mode)
            return lambda v: None if v is None else inner(v)
        return _identity  # int | str
    if origin is list:
        item = _encoder_for(args[0], mode)
        if item is _identity:
            return list
        return lambda v: [item(x) for x in v]
    if origin is dict and args == (str, int) and mode is Mode.MANIFEST:
        return _resources_text
    if origin is dict and args == (str, Any):
        return copy.deepcopy  # opaque JSON (a pod template): the output must not share it
    if origin is dict:
        return _copy_dict
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _object_encoder(cast(Any, hint), mode)
    raise TypeError(f"no encoder for {hint!r}")


@cache
def _object_encoder(cls: Any, mode: Mode) -> Encoder:
    plan = [
        (spec.attr, spec.json, _encoder_for(spec.hint, mode, spec.fmt), spec)
        for spec in fields_of(cls)
    ]

    def encode(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, json_name, field_encoder, spec in plan:
            value = getattr(obj, attr)
            if spec.emit_nonempty:
                if not value:
                    continue
            elif spec.has_default and value == spec.default:
                continue
            out[json_name] = field_encoder(value)
        return out

    return encode


def to_dict(obj: Any) -> dict[str, Any]:
    """The Kubernetes JSON shape of a model object (apiVersion/kind added for API kinds)."""
    body = _object_encoder(cast(Any, type(obj)), Mode.MANIFEST)(obj)
    info = KIND_BY_CLASS.get(type(obj))
    if info is None:
        return cast(dict[str, Any], body)
    return {"apiVersion": info.api_version, "kind": info.kind, **body}


def encode_fields(obj: KubeObject) -> dict[str, Any]:
    """The fields `encode` packs (wire names; defaults left out), for callers that pack
    parts of them too (a fingerprint) without walking the object twice."""
    info = KIND_BY_CLASS.get(type(obj))
    if info is None:
        raise CodecError(f"cannot encode {type(obj).__name__}: not an API kind")
    return cast(dict[str, Any], _object_encoder(info.cls, Mode.RAW)(obj))


def encode(obj: KubeObject, fields: dict[str, Any] | None = None) -> bytes:
    """msgpack bytes of an API object, with the schema version (`fields`: its
    `encode_fields`, when the caller has them already)."""
    info = KIND_BY_CLASS.get(type(obj))
    if info is None:
        raise CodecError(f"cannot encode {type(obj).__name__}: not an API kind")
    body = fields if fields is not None else _object_encoder(info.cls, Mode.RAW)(obj)
    try:
        data = msgpack.packb(
            {"v": SCHEMA_VERSION, "kind": info.kind, "object": body}, use_bin_type=True
        )
    except (OverflowError, TypeError, ValueError) as e:
        raise CodecError(f"cannot encode {info.kind} {obj.metadata.name}: {e}") from e
    return cast(bytes, data)


def unpack_map(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """A msgpack map (an envelope: an object's here, a message's in shared.messaging.wire);
    CodecError if `data` is not one."""
    try:
        message = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises many unrelated exception types on bad input
        raise CodecError(f"undecodable msgpack: {e}") from e
    if not isinstance(message, dict):
        raise CodecError(f"expected a map, got {type(message).__name__}")
    return message


def decode(data: bytes | bytearray | memoryview) -> KubeObject:
    """Inverse of ``encode``; CodecError for bad bytes, another version or an invalid object."""
    message = unpack_map(data)
    version = message.get("v")
    if version != SCHEMA_VERSION:
        raise CodecError(f"unsupported schema version {version!r} (expected {SCHEMA_VERSION})")
    kind = message.get("kind")
    info = KIND_BY_NAME.get(kind) if isinstance(kind, str) else None
    if info is None:
        raise CodecError(f"unknown kind {kind!r}")
    try:
        obj = object_decoder(info.cls, Mode.RAW)(message.get("object"))
    except FieldError as e:
        raise CodecError(f"invalid {info.kind}: {e.path or '<object>'}: {e.reason}") from None
    except (TypeError, ValueError) as e:
        raise CodecError(f"invalid {info.kind}: {e}") from e
    if not info.namespaced:
        obj.metadata.namespace = ""
    return cast(KubeObject, obj)


def decode_many(items: Iterable[bytes | bytearray | memoryview]) -> list[KubeObject]:
    """``decode`` for a bulk load (a snapshot): same result, several times faster."""
    with paused_gc():
        return [decode(data) for data in items]
