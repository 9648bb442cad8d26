"""The KubeSchedulerConfiguration dialect of the models' decoder: strict YAML -> config dataclasses.

The config dataclasses decode with the models' compiled per-class decoders
(shared.models.decoding: a `Dialect` of it); this module holds the config's leaf rules and
wording. Each dataclass field maps to the camelCase of its name, or to `metadata={"json": ...}`
where the API spells it otherwise (enableHTTPS). Unknown keys, wrong types and out-of-range
integers are errors naming the field path, like upstream's strict decoding. A key that is
absent or null keeps the field's default (Go leaves the zero value or nil pointer, which the
defaulting step then fills in the same way).

Field metadata understood here (besides "json"), as `metadata={"format": ...}`:
- "int32": the API type is int32 (other integers are int64);
- "duration": a Go duration string ("30s", "1m30s") decoded to float seconds.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import yaml

from shared.config.errors import InvalidConfigError
from shared.models.decoding import Decoder, Dialect, FieldError, object_decoder
from shared.models.schema import camel

T = TypeVar("T")

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
INT32_FORMAT = {"format": "int32"}
"""Field metadata: an int32 in the API."""
DURATION_FORMAT = {"format": "duration"}
"""Field metadata: a Go duration string, decoded to float seconds."""


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
    """The field's key in the document (the decoder's own table: shared.models.schema)."""
    name: str = field.metadata.get("json", "")
    return name or camel(field.name)


def decode(cls: type[T], raw: object, path: str) -> T:
    """Decode a mapping into dataclass `cls`; absent and null keys keep their defaults."""
    try:
        decoded: T = object_decoder(typing.cast(Any, cls), CONFIG)(raw)
    except _Unsupported as err:
        where = join(path, err.path)
        raise TypeError(f"decode: unsupported field type {err.reason} at {where}") from None
    except FieldError as err:
        where = join(path, err.path) or "(document)"
        raise InvalidConfigError([f"{where}: {err.reason}"]) from None
    return decoded


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


# ---------------------------------------------------------------- the dialect's leaves
class _Unsupported(FieldError):
    """A field type the config decoder has no rule for (a bug in the types, met lazily)."""


def _wrong_type(what: str, value: object) -> FieldError:
    article = "a list" if what == "array" else f"an {what}"
    return FieldError(f"expected {article}, got {type_name(value)}")


def _any(value: Any) -> Any:
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise FieldError(f"expected a boolean, got {type_name(value)}")
    return value


def _integer(bits: str, low: int, high: int) -> Decoder:
    def decode(value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise FieldError(f"expected an integer, got {type_name(value)}")
        if not low <= value <= high:
            raise FieldError(f"{value} does not fit in {bits}")
        return value

    return decode


_int32 = _integer("int32", *INT32)
_int64 = _integer("int64", *INT64)


def _float(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise FieldError(f"expected a number, got {type_name(value)}")
    return float(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise FieldError(f"expected a string, got {type_name(value)}")
    return value


def _duration(value: Any) -> float:
    if not isinstance(value, str):
        raise FieldError(f'expected a duration string such as "30s", got {type_name(value)}')
    seconds = duration_seconds(value)
    if seconds is None:
        raise FieldError(f'invalid duration "{value}"')
    return seconds


def _unsupported(hint: Any) -> Decoder:
    def decode(value: Any) -> Any:
        raise _Unsupported(repr(hint))

    return decode


def _leaf(hint: Any, fmt: str) -> Decoder:
    if hint is Any:
        return _any
    if fmt == "duration":
        return _duration
    if hint is bool:
        return _bool
    if hint is int:
        return _int32 if fmt == "int32" else _int64
    if hint is float:
        return _float
    if hint is str:
        return _str
    return _unsupported(hint)


CONFIG = Dialect(leaf=_leaf, wrong_type=_wrong_type)
"""The KubeSchedulerConfiguration dialect of shared.models.decoding."""


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


def duration_seconds(text: str) -> float | None:
    """time.ParseDuration: "0", or an optionally signed sequence like "1h2m3.5s", in seconds;
    None when `text` is not a Go duration."""
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
        return None
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
