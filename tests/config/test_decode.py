"""The config decoder is a dialect of the models' compiled decoder: one decoder per class (built
once), the config's own wording for each leaf, paths under the caller's root, and a field type it
has no rule for refused as a bug when a value for it comes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from shared.config import decode as dec
from shared.config.errors import InvalidConfigError
from shared.config.loader import _Document
from shared.config.types import Extender, LeaderElection
from shared.models.decoding import object_decoder
from shared.models.schema import fields_of


@dataclass(slots=True, kw_only=True)
class _Inner:
    count: int = field(default=0, metadata=dec.INT32_FORMAT)
    wait: float | None = field(default=None, metadata=dec.DURATION_FORMAT)


@dataclass(slots=True, kw_only=True)
class _Outer:
    name: str = ""
    on: bool = False
    ratio: float = 0.0
    big: int = 0
    inner: _Inner | None = None
    items: list[_Inner] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    anything: Any = None
    table: dict[str, int] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("raw", "root", "error"),
    [
        ([], "", "(document): expected an object, got list"),
        ({"name": 1}, "", "name: expected a string, got number"),
        ({"on": "yes"}, "", "on: expected a boolean, got string"),
        ({"ratio": True}, "", "ratio: expected a number, got boolean"),
        ({"big": 2**63}, "", f"big: {2**63} does not fit in int64"),
        ({"inner": {"count": 2**31}}, "a.b", f"a.b.inner.count: {2**31} does not fit in int32"),
        (
            {"inner": {"wait": 5}},
            "",
            'inner.wait: expected a duration string such as "30s", got number',
        ),
        ({"inner": {"wait": "5 seconds"}}, "", 'inner.wait: invalid duration "5 seconds"'),
        ({"items": {}}, "x[0]", "x[0].items: expected a list, got object"),
        ({"items": [{}, 3]}, "", "items[1]: expected an object, got number"),
        ({"tags": ["a", None]}, "", "tags[1]: expected a string, got null"),
        ({"nope": 1}, "p", "p.nope: unknown field"),
        ({"inner": "x"}, "", "inner: expected an object, got string"),
    ],
)
def test_errors_name_the_path_in_the_config_wording(raw: object, root: str, error: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        dec.decode(_Outer, raw, root)
    assert caught.value.errors == (error,)


def test_values_decode_and_absent_or_null_keep_defaults() -> None:
    got = dec.decode(
        _Outer,
        {
            "name": "n",
            "ratio": 2,
            "inner": {"count": 3, "wait": "1m30s"},
            "items": [{"wait": None}],
            "anything": {"k": [1]},
            "big": None,
        },
        "",
    )
    assert got == _Outer(
        name="n",
        ratio=2.0,
        inner=_Inner(count=3, wait=90.0),
        items=[_Inner()],
        anything={"k": [1]},
    )
    assert type(got.ratio) is float


def test_a_field_type_without_a_rule_is_a_bug_met_when_a_value_comes() -> None:
    assert dec.decode(_Outer, {}, "").table == {}  # compiled, not refused
    with pytest.raises(TypeError, match=r"unsupported field type .* at r\.table"):
        dec.decode(_Outer, {"table": {"a": 1}}, "r")


def test_one_compiled_decoder_per_class() -> None:
    dec.decode(_Document, {}, "")
    assert object_decoder(_Document, dec.CONFIG) is object_decoder(_Document, dec.CONFIG)


@pytest.mark.parametrize("cls", [_Document, Extender, LeaderElection, _Outer])
def test_json_name_is_the_decoders_key(cls: type[Any]) -> None:
    specs = fields_of(cast(Any, cls))
    assert [dec.json_name(f) for f in dataclasses.fields(cls)] == [s.json for s in specs]


def _config_dataclasses() -> list[type[Any]]:
    import shared.config.args_decoding
    import shared.config.loader
    import shared.config.plugin_args
    import shared.config.types

    modules = (
        shared.config.args_decoding,
        shared.config.loader,
        shared.config.plugin_args,
        shared.config.types,
    )
    return [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == module.__name__
    ]


def test_config_fields_declare_only_what_the_decoder_reads() -> None:
    """A field's metadata says "json" and "format" (int32, duration) only: a key the decoder
    does not read (the old {"int32": True}) would silently drop its check."""
    classes = _config_dataclasses()
    assert len(classes) > 20
    stray = {
        f"{cls.__name__}.{f.name}: {sorted(set(f.metadata) - {'json', 'format'})}"
        for cls in classes
        for f in dataclasses.fields(cls)
        if set(f.metadata) - {"json", "format"}
        or f.metadata.get("format", "int32") not in ("int32", "duration")
    }
    assert stray == set()
