"""The store's Lua scripts and Python spell the same short record fields (shared/store/fields.py).

Every field a script reads off a record (`facts.u`, `charge.r`, `runs("f")`) or writes into
a charge record's table must be defined there, for the record it belongs to; and every field
defined there must be used by a script. Renaming a field on one side only fails here (no Redis
needed: the Lua is read as text).
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from shared.store.fields import Charge, ChargeRecord, NodeChecks, NodeFacts, PodFacts, names
from shared.store.scripts import SCRIPT_NAMES
from tests.lua_source import strip_comments

LUA = resources.files("shared.store") / "lua"
SOURCES = {
    name: strip_comments((LUA / f"{name}.lua").read_text()) for name in ("prelude", *SCRIPT_NAMES)
}
ALL = "\n".join(SOURCES.values())

CHARGE_FIELDS = set(names(Charge).values()) | set(names(ChargeRecord).values()) - {
    ChargeRecord.RESERVED,
    ChargeRecord.BOUND,
}
# Which record a script's variable holds (the scripts name them consistently).
RECORDS: dict[tuple[str, str], set[str]] = {
    ("reserve", "facts"): set(names(NodeFacts).values()),
    ("apply", "facts"): set(names(NodeFacts).values()) | set(names(PodFacts).values()),
    **{(script, var): CHARGE_FIELDS for script in SOURCES for var in ("charge", "rec", "record")},
}
FACTS_C = re.compile(r"\bfacts\.c\.(\w+)")
ACCESS = re.compile(r"\b(facts|charge|rec|record)\.(\w+)")
CHARGE_TABLE = re.compile(r"local (?:charge|record) = \{([^}]*)\}", re.S)


def _reads() -> list[tuple[str, str, str]]:
    return [
        (script, var, field)
        for script, text in SOURCES.items()
        for var, field in ACCESS.findall(FACTS_C.sub("", text))
    ]


@pytest.mark.parametrize(("script", "var", "field"), _reads())
def test_every_field_a_script_reads_is_defined(script: str, var: str, field: str) -> None:
    allowed = RECORDS.get((script, var))
    assert allowed is not None, f"{script}.lua reads {var}.{field}: which record is {var}?"
    assert field in allowed, f"{script}.lua reads {var}.{field}, not in shared/store/fields.py"


def test_the_charge_inside_pod_facts_is_a_charge() -> None:
    used = {field for text in SOURCES.values() for field in FACTS_C.findall(text)}
    assert used == set(names(Charge).values())


def test_every_charge_record_a_script_builds_has_defined_fields() -> None:
    built = [
        key
        for text in SOURCES.values()
        for body in CHARGE_TABLE.findall(text)
        for key in re.findall(r"(\w+)\s*=", body)
    ]
    assert built, "no charge record built: the pattern no longer matches the scripts"
    assert set(built) <= CHARGE_FIELDS


def test_node_checks_are_the_letters_reserve_runs() -> None:
    letters = set(re.findall(r'runs\("(\w)"\)', SOURCES["reserve"]))
    defined = {v for k, v in names(NodeChecks).items() if k != "ALL"}
    assert letters == defined
    assert sorted(NodeChecks.ALL) == sorted(defined)


@pytest.mark.parametrize(
    ("fields", "scripts"),
    [
        pytest.param(NodeFacts, ("reserve", "apply"), id="node-facts"),
        pytest.param(PodFacts, ("apply",), id="pod-facts"),
    ],
)
def test_every_defined_fact_is_read(fields: type, scripts: tuple[str, ...]) -> None:
    read = {field for s, var, field in _reads() if s in scripts and var == "facts"}
    assert set(names(fields).values()) <= read


def test_every_defined_charge_field_is_used() -> None:
    used = {field for _, var, field in _reads() if var in ("charge", "rec", "record")}
    for body in CHARGE_TABLE.findall(ALL):
        used |= set(re.findall(r"(\w+)\s*=", body))
    assert used >= CHARGE_FIELDS
    states = set(re.findall(r'charge\.s [~=]= "(\w)"', ALL)) | set(re.findall(r's = "(\w)"', ALL))
    assert states == {ChargeRecord.RESERVED, ChargeRecord.BOUND}
