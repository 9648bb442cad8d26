"""A strict decoder from parsed YAML into the config dataclasses.

Each dataclass field maps to the camelCase of its name, or to `metadata={"json": ...}` where
the API spells it otherwise (enableHTTPS). Unknown keys, wrong types and out-of-range integers
are errors naming the field path, like upstream's strict decoding. A key that is absent or null
keeps the field's default (Go leaves the zero value or nil pointer, which the defaulting step
then fills in the same way).

Field metadata understood here:
- "json": the key in the document;
- "int32": the API type is int32 (other integers are int64);
- "duration": a Go duration string ("30s", "1m30s") decoded to float seconds.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

import yaml

from shared.config.errors import InvalidConfigError

T = TypeVar("T")

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def join(path: str, rest: str) -> str:
    """`path` followed by a relative path such as "a.b[0]" or "[2].c"."""
    if not rest:
        return path
    return path + rest if rest.startswith("[") else child(path, rest)


def fail(message: str) -> typing.NoReturn:
    raise InvalidConfigError([message])


def json_name(field: dataclasses.Field[Any]) -> str:
    name: str = field.metadata.get("json", "")
    if name:
        return name
    head, *rest = field.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


@cache
def _fields(cls: Any) -> dict[str, tuple[dataclasses.Field[Any], Any]]:
    """json key -> (field, resolved type) for a dataclass."""
    hints = typing.get_type_hints(cls)
    return {json_name(f): (f, hints[f.name]) for f in dataclasses.fields(cls)}


def decode(cls: type[T], raw: object, path: str) -> T:
    """Decode a mapping into dataclass `cls`; absent and null keys keep their defaults."""
    mapping = expect_mapping(raw, path)
    known = _fields(typing.cast(Any, cls))
    values: dict[str, Any] = {}
    for key, value in mapping.items():
        if key not in known:
            fail(f"{child(path, str(key))}: unknown field")
        field, hint = known[key]
        if value is not None:
            values[field.name] = decode_value(hint, value, child(path, key), field.metadata)
    return cls(**values)


def decode_value(hint: Any, value: object, path: str, meta: Mapping[str, Any]) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return decode_value(inner, value, path, meta)
    if hint is Any:
        return value
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            fail(f"{path}: expected a list, got {type_name(value)}")
        return [decode_value(item, v, index(path, i), {}) for i, v in enumerate(value)]
    if dataclasses.is_dataclass(hint):
        return decode(typing.cast(type, hint), value, path)
    if meta.get("duration"):
        if not isinstance(value, str):
            fail(f'{path}: expected a duration string such as "30s", got {type_name(value)}')
        return parse_duration(value, path)
    if hint is bool:
        if not isinstance(value, bool):
            fail(f"{path}: expected a boolean, got {type_name(value)}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            fail(f"{path}: expected an integer, got {type_name(value)}")
        low, high = INT32 if meta.get("int32") else INT64
        if not low <= value <= high:
            fail(f"{path}: {value} does not fit in {'int32' if meta.get('int32') else 'int64'}")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            fail(f"{path}: expected a number, got {type_name(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            fail(f"{path}: expected a string, got {type_name(value)}")
        return value
    raise TypeError(f"decode: unsupported field type {hint!r} at {path}")


def expect_mapping(raw: object, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        fail(f"{path or '(document)'}: expected an object, got {type_name(raw)}")
    return raw


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


# ---------------------------------------------------------------- Go durations
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str, path: str) -> float:
    """time.ParseDuration: "0", or an optionally signed sequence like "1h2m3.5s"; seconds."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in ("+", "-") else text
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        fail(f'{path}: invalid duration "{text}"')
    return sign * total


# ---------------------------------------------------------------- YAML
class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key repeated in one mapping (sigs.k8s.io/yaml does too)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f'duplicate key "{key}"', key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def parse_yaml(text: str) -> object:
    """One YAML document; syntax errors and repeated keys become InvalidConfigError."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as err:
        raise InvalidConfigError([f"invalid YAML: {err}"]) from err
