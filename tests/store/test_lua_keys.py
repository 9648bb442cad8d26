"""The store's Lua scripts and Python spell the same Redis keys and usage fields.

The scripts derive every key from KEYS[1] (<base>rv) in the prelude; Python names them in
shared/store/keys.py (StoreKeys, and the layout in its docstring). Renaming a key on one side
only, adding a key to one side only, or building a key outside the prelude fails here (no
Redis needed: the Lua is read as text).
"""

from __future__ import annotations

import inspect
import re
from importlib import resources

import pytest

from services.scheduler.heartbeat import heartbeat_key
from shared.models import HostPort
from shared.store import NodeUsage, PodCharge, StoreKeys
from shared.store import keys as keys_module
from shared.store.scripts import SCRIPT_NAMES
from tests.builders import make_pod
from tests.lua_source import (
    builders,
    concat,
    constants,
    key_slots,
    layout,
    placeholder_prefix,
    strip_comments,
)

LUA = resources.files("shared.store") / "lua"
PRELUDE = (LUA / "prelude.lua").read_text()
BODIES = {name: (LUA / f"{name}.lua").read_text() for name in SCRIPT_NAMES}
KEYS = StoreKeys("berth:t1:", "c1")

# Prelude name -> the StoreKeys member naming the same key.
CONSTANTS = {
    "STREAM": "stream",
    "CHARGES": "charges",
    "PODNODE": "pod_node",
    "RESV": "reservations",
    "ATT": "attempts",
    "NOMOF": "nominated_of",
    "GANGBOUND": "gang_bound",
    "USAGE_NODES": "usage_nodes",
    "NODE_FACTS": "node_facts",
}
BUILDERS = {
    "meta_key": "meta",
    "obj_key": "objects",
    "usage_key": "usage",
    "nom_key": "nominated",
    "gang_key": "gang",
    "gang_members_key": "gang_members",
    "anti_affinity_key": "anti_affinity",
}
PYTHON_ONLY = {"workers"}
"""Keys no script touches (the scheduler workers' heartbeats)."""
SAMPLE = {"meta": "Pod", "objects": "Pod"}
"""A builder's argument (the kind-keyed ones check the kind); others get "ns/g"."""


def _members() -> dict[str, object]:
    """StoreKeys' key names: properties and one-argument builders (not `base`)."""
    return {
        name: value
        for name, value in vars(StoreKeys).items()
        if not name.startswith("_")
        and name != "base"
        and (isinstance(value, property) or inspect.isfunction(value))
    }


def _key_of(member: str) -> str:
    value = getattr(KEYS, member)
    return str(value(SAMPLE.get(member, "ns/g")) if callable(value) else value)


def test_every_script_file_is_registered() -> None:
    files = {entry.name.removesuffix(".lua") for entry in LUA.iterdir() if entry.is_file()}
    assert files - {"prelude"} == set(SCRIPT_NAMES)


def test_keys_1_is_rv_and_the_base_is_its_prefix() -> None:
    assert key_slots(PRELUDE) == {"RV_KEY": 1}
    assert re.findall(r"\bKEYS\[\d+\]", strip_comments(PRELUDE)) == ["KEYS[1]"]
    cut = re.fullmatch(r"string\.sub\(RV_KEY, 1, -(\d+)\)", constants(PRELUDE)["BASE"])
    assert cut is not None
    # string.sub(s, 1, -n) drops the last n - 1 characters: they must be exactly "rv".
    assert KEYS.rv == KEYS.base + "rv"
    assert KEYS.rv[: -(int(cut[1]) - 1)] == KEYS.base


def test_prelude_constants_are_the_store_keys() -> None:
    found = {n: e for n, e in constants(PRELUDE).items() if e.startswith("BASE ..")}
    assert set(found) == set(CONSTANTS), "a key only one side knows: map it in CONSTANTS"
    for name, expression in found.items():
        assert concat(expression, {"BASE": KEYS.base}) == getattr(KEYS, CONSTANTS[name]), name


def test_prelude_key_builders_are_the_store_keys() -> None:
    found = {n: b for n, b in builders(PRELUDE).items() if b[1].startswith("BASE ..")}
    assert set(found) == set(BUILDERS), "a key only one side knows: map it in BUILDERS"
    for name, ((arg,), expression) in found.items():
        member = BUILDERS[name]
        sample = SAMPLE.get(member, "ns/g")
        assert concat(expression, {"BASE": KEYS.base, arg: sample}) == _key_of(member), name


def test_every_store_key_is_spelled_by_the_prelude_or_python_only() -> None:
    lua_side = set(CONSTANTS.values()) | set(BUILDERS.values()) | {"rv"}
    assert set(_members()) == lua_side | PYTHON_ONLY
    assert not lua_side & PYTHON_ONLY


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_only_the_prelude_builds_keys(name: str) -> None:
    body = strip_comments(BODIES[name])
    assert "KEYS[" not in body
    assert not re.search(r"\bBASE\b", body)
    assert not re.search(r"\bRV_KEY\b\s*\.\.", body)


def test_the_prelude_builds_no_other_key() -> None:
    keyed = len(CONSTANTS) + len(BUILDERS)
    assert len(re.findall(r"\bBASE \.\.", strip_comments(PRELUDE))) == keyed


def test_the_documented_layout_is_the_one_in_use() -> None:
    assert keys_module.__doc__ is not None
    documented = layout(keys_module.__doc__)
    assert documented["prefix"] == []
    in_use = []
    for member in _members():
        suffix = _key_of(member).removeprefix(KEYS.base)
        in_use.append(suffix.removesuffix(SAMPLE.get(member, "ns/g")))
    assert sorted(placeholder_prefix(name) for name in documented["base"]) == sorted(in_use)


def test_the_workers_key_is_the_heartbeat_key() -> None:
    # services/scheduler spells it itself; a rename on either side fails here.
    assert heartbeat_key(KEYS.prefix, KEYS.cluster) == KEYS.workers


def _usage_field_expressions() -> dict[str, str]:
    """`local field = <expression>` in add_usage, by the literal it starts with."""
    found = re.findall(r"local field = (\"[^\"]*\" \.\. .+?)\n", strip_comments(PRELUDE))
    return {concat(expr.split("..")[0], {}): expr for expr in found}


def test_usage_fields_are_the_ones_python_reads() -> None:
    pod = make_pod("p").req(cpu="1").host_port(5353, "UDP", "fe80::1").obj()
    charge = PodCharge.of(pod).wire()
    [wire_port] = charge["p"]  # as the scripts receive it: {proto, port, ip}, 1-based
    port = HostPort("UDP", 5353, "fe80::1")
    fields = _usage_field_expressions()
    assert set(fields) == {"r:", "hp:"}
    variables = {
        "port[1]": wire_port[0],
        "int(port[2])": str(wire_port[1]),
        "port[3]": wire_port[2],
        "resource": "cpu",
    }
    port_field = concat(fields["hp:"], variables)
    cpu_field = concat(fields["r:"], variables)
    assert port_field == port.field()
    assert '"HINCRBY", key, "pods", sign' in PRELUDE
    usage = NodeUsage.from_hash({"pods": b"1", cpu_field: b"1000", port_field: b"1"})
    assert usage == NodeUsage(1, {"cpu": charge["r"]["cpu"]}, {port: 1})


def test_reserve_parses_the_port_field_python_writes() -> None:
    reserve = strip_comments(BODIES["reserve"])
    found = re.search(r'string\.match\(field, "(\^hp:[^"]*)"\)', reserve)
    assert found is not None
    # The Lua pattern's classes as Python's (only %d is used).
    pattern = found[1].replace("%d", r"\d")
    port = HostPort("TCP", 8080, "fe80::1")
    parsed = re.match(pattern, port.field())
    assert parsed is not None
    assert parsed.groups() == (port.protocol, str(port.port), port.host_ip)
