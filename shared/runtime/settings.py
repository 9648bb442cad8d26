"""Typed settings: a settings class declares each setting once (its environment variable, its
flag, its type, bounds and default), and `read` fills it from flags, the environment and a
settings file, validated by msgspec, with one line naming the setting and the bad value.

    class DashboardConfig:                      # a frozen dataclass (or a msgspec Struct)
        port: Annotated[int, Meta(ge=0, le=65535), setting("BERTH_DASHBOARD_PORT", "...")] = 8280

    config = read(DashboardConfig, os.environ)  # SettingsError: BERTH_DASHBOARD_PORT='x': ...

Precedence: a flag given on the command line, else the environment, else the settings file
($BERTH_SETTINGS_FILE: a YAML or JSON map of BERTH_* names to values), else the default. An
empty variable counts as unset. Values are converted as strings are (`"3"` -> 3, `"1"`/`"true"`
-> True); a field's `parse` turns a raw string into its value first (durations: `40s`).
`settings_table` renders a class's settings for docs/settings.md (tests keep it true).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

ENV_SETTINGS_FILE = "BERTH_SETTINGS_FILE"
"""A YAML or JSON map of BERTH_* settings; the environment overrides it."""

_KEY = "berth_setting"


class StackError(RuntimeError):
    """The stack could not start, or a client found no running stack (shared.runtime.env re-exports
    it: every service and client catches it)."""


class SettingsError(StackError):
    """A setting's value is refused (the message names the setting and the value)."""


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """What a field's `setting(...)` says about it."""

    env: str
    doc: str = ""
    flag: str = ""
    parse: Callable[[str], object] | None = None
    secret: bool = False
    kind: str = ""
    """How the docs name what the variable holds, when not the field's type."""
    default_text: str = ""
    """How the docs show the default, when not as the field's value (`forbid` for False)."""
    many: bool = False
    """The flag may be given again (its values are joined with commas, as the variable
    lists them)."""


def setting(
    env: str,
    doc: str = "",
    *,
    flag: str = "",
    parse: Callable[[str], object] | None = None,
    secret: bool = False,
    kind: str = "",
    many: bool = False,
    default_text: str = "",
) -> msgspec.Meta:
    """The metadata of a settings field (put it in the field's `Annotated[...]`)."""
    spec = SettingSpec(
        env=env,
        doc=doc,
        flag=flag,
        parse=parse,
        secret=secret,
        kind=kind,
        many=many,
        default_text=default_text,
    )
    return msgspec.Meta(extra={_KEY: spec})


@dataclass(frozen=True, slots=True)
class Field:
    """One setting of a settings class."""

    name: str
    spec: SettingSpec
    type: str
    default: object
    required: bool
    choices: tuple[object, ...] = ()
    """A Literal type's values (the flag refuses others)."""


_FIELDS: dict[type[Any], tuple[Field, ...]] = {}


def fields(cls: type[Any]) -> tuple[Field, ...]:
    """The settings of `cls` (fields without `setting(...)` are not read), in order."""
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = _inspect(cls)
    return known


def _inspect(cls: type[Any]) -> tuple[Field, ...]:
    info = msgspec.inspect.type_info(cls)
    out: list[Field] = []
    for item in getattr(info, "fields", ()):
        spec, kind, choices = _spec(item.type)
        if spec is None:
            continue
        default = item.default
        if default is msgspec.NODEFAULT and item.default_factory is not msgspec.NODEFAULT:
            default = item.default_factory()
        out.append(Field(item.name, spec, spec.kind or kind, default, item.required, choices))
    return tuple(out)


def _spec(kind: msgspec.inspect.Type) -> tuple[SettingSpec | None, str, tuple[object, ...]]:
    spec = None
    while isinstance(kind, msgspec.inspect.Metadata):
        found = (kind.extra or {}).get(_KEY)
        if isinstance(found, SettingSpec):
            spec = found
        kind = kind.type
    options = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    literals = [t for t in options if isinstance(t, msgspec.inspect.LiteralType)]
    choices = tuple(literals[0].values) if len(literals) == 1 else ()
    return spec, _type_name(kind), choices


def _type_name(kind: msgspec.inspect.Type) -> str:
    if isinstance(kind, msgspec.inspect.UnionType):
        nothing = msgspec.inspect.NoneType
        parts = [_type_name(t) for t in kind.types if not isinstance(t, nothing)]
        return " | ".join(parts)
    if isinstance(kind, msgspec.inspect.LiteralType):
        return " | ".join(str(v) for v in kind.values)
    names: dict[type[msgspec.inspect.Type], str] = {
        msgspec.inspect.IntType: "int",
        msgspec.inspect.FloatType: "float",
        msgspec.inspect.BoolType: "bool",
        msgspec.inspect.StrType: "str",
    }
    return names.get(type(kind), type(kind).__name__.removesuffix("Type").lower())


def read(
    cls: type[T],
    env: Mapping[str, str],
    flags: Mapping[str, object] | None = None,
    given: Mapping[str, object] | None = None,
) -> T:
    """`cls` filled from flags (by field name; None: not given), the environment (by each
    setting's variable) and `given` (values the caller computed, below flags and the
    environment); SettingsError naming the setting and its value when one is refused."""
    flags = flags or {}
    values: dict[str, object] = dict(given or {})
    origin: dict[str, tuple[str, object]] = {}
    for item in fields(cls):
        label, value = _first(item, flags, env)
        if label is None:
            continue
        origin[item.name] = (label, value)
        if item.spec.parse is not None and isinstance(value, str):
            try:
                value = item.spec.parse(value)
            except ValueError as exc:
                raise SettingsError(f"{label}={_shown(item, value)}: {exc}") from None
        values[item.name] = value
    try:
        return msgspec.convert(values, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise _refusal(cls, str(exc), origin) from None


def _first(
    item: Field, flags: Mapping[str, object], env: Mapping[str, str]
) -> tuple[str | None, object]:
    flagged = flags.get(item.name)
    if isinstance(flagged, list):
        flagged = ",".join(str(v) for v in flagged) if flagged else None
    if flagged is not None and item.spec.flag:
        return item.spec.flag, flagged
    raw = env.get(item.spec.env, "")
    if raw.strip():
        # A secret is taken as given (a password may begin or end with a space).
        return item.spec.env, raw if item.spec.secret else raw.strip()
    return None, None


def _shown(item: Field, value: object) -> str:
    return "<secret>" if item.spec.secret else repr(value)


def _refusal(cls: type[Any], message: str, origin: Mapping[str, tuple[str, object]]) -> Exception:
    """One line from msgspec's "Expected `int`, got `str` - at `$.port`"."""
    text, _, path = message.rpartition(" - at `")
    text = text or message
    name = path.strip("`").removeprefix("$.").split(".")[0].split("[")[0]
    reason = (text[:1].lower() + text[1:]).replace(" | null`", "`")
    by_name = {item.name: item for item in fields(cls)}
    if name in by_name and by_name[name].choices:
        reason = "expected one of " + ", ".join(str(c) for c in by_name[name].choices)
    if name in origin:
        label, value = origin[name]
        return SettingsError(f"{label}={_shown(by_name[name], value)}: {reason}")
    if name in by_name:
        return SettingsError(f"{by_name[name].spec.env}: {reason}")
    return SettingsError(f"{cls.__name__}: {reason}")


def to_env(settings: object, **render: Callable[[Any], str]) -> dict[str, str]:
    """The variables that `read` turns back into `settings` (the environment of a child
    process): every setting, an unset one (None, "", False) as "" so that it overrides
    what the child would inherit. `render[field]` writes a value as its variable holds it
    (a resolved path)."""
    out: dict[str, str] = {}
    for item in fields(type(settings)):
        value = getattr(settings, item.name)
        if value is None or value == "" or value is False:
            out[item.spec.env] = ""
        elif item.name in render:
            out[item.spec.env] = render[item.name](value)
        elif value is True:
            out[item.spec.env] = "1"
        else:
            out[item.spec.env] = str(value)
    return out


# ------------------------------------------------------------------------------ flags
def add_flags(parser: argparse.ArgumentParser, cls: type[Any]) -> None:
    """One argparse option per setting that has a flag (default None: not given, so the
    environment and the defaults apply); `read(cls, env, vars(args))` takes them."""
    for item in fields(cls):
        if not item.spec.flag:
            continue
        help_text = f"{item.spec.doc} (${item.spec.env})" if item.spec.doc else f"${item.spec.env}"
        if item.type == "bool":
            parser.add_argument(
                item.spec.flag, dest=item.name, action="store_const", const=True, help=help_text
            )
        elif item.spec.many:
            parser.add_argument(
                item.spec.flag,
                dest=item.name,
                action="append",
                metavar=item.type.upper(),
                help=f"{help_text}; repeatable",
            )
        elif item.choices:
            parser.add_argument(
                item.spec.flag, dest=item.name, choices=item.choices, help=help_text
            )
        else:
            parser.add_argument(
                item.spec.flag, dest=item.name, metavar=item.type.upper(), help=help_text
            )


# ------------------------------------------------------------------------------ the file
def with_settings_file(env: MutableMapping[str, str], known: Iterable[str] | None = None) -> None:
    """Fill `env` from $BERTH_SETTINGS_FILE where a variable is unset (the environment wins);
    SettingsError naming the file and the key when it cannot be read or names an unknown
    setting (`known`: every name a service reads; None: any BERTH_* name)."""
    path = env.get(ENV_SETTINGS_FILE, "").strip()
    if not path:
        return
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise SettingsError(f"{ENV_SETTINGS_FILE}={path!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise SettingsError(f"{ENV_SETTINGS_FILE}={path!r}: not YAML: {problem}") from None
    if not isinstance(doc, dict):
        raise SettingsError(f"{ENV_SETTINGS_FILE}={path!r}: expected a map of BERTH_* settings")
    allowed = None if known is None else set(known)
    for key, value in doc.items():
        name = str(key)
        if not name.startswith("BERTH_") or (allowed is not None and name not in allowed):
            raise SettingsError(
                f"{ENV_SETTINGS_FILE}={path!r}: {name}: not a setting this service reads"
            )
        if isinstance(value, (dict, list)):
            raise SettingsError(f"{ENV_SETTINGS_FILE}={path!r}: {name}: expected a scalar")
        if env.get(name, "") == "":
            env[name] = _text(value)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value) if not isinstance(value, str) else value


# ------------------------------------------------------------------------------ docs
def settings_table(cls: type[Any]) -> str:
    """A Markdown table of `cls`'s settings: variable, flag, type, default, meaning."""
    rows = [
        "| Variable | Flag | Type | Default | Meaning |",
        "|---|---|---|---|---|",
    ]
    for item in fields(cls):
        default = "(required)" if item.required else _default_text(item.default)
        if item.spec.default_text:
            default = f"`{item.spec.default_text}`"
        flag = f"`{item.spec.flag}`" if item.spec.flag else ""
        doc = " ".join(item.spec.doc.split()).replace("|", "\\|")
        kind = item.type.replace("|", "\\|")
        rows.append(f"| `{item.spec.env}` | {flag} | {kind} | {default} | {doc} |")
    return "\n".join(rows)


def _default_text(value: object) -> str:
    if value is None or value == "" or value == () or value == {}:
        return "unset"
    if isinstance(value, (frozenset, set, tuple, list)):
        return ", ".join(sorted(str(v) for v in value))
    return f"`{json.dumps(value) if isinstance(value, bool) else value}`"
