"""The queue's Lua scripts and Python spell the same Redis keys, KEYS slots and state fields.

Python passes a tenant's keys as KEYS (services/queue/keys.py: the base, then TENANT_KEYS); the
prelude binds them to K_<NAME> by index and builds the per-level, per-bucket and per-pop keys
from the base. Reordering TENANT_KEYS or the prelude's slots, renaming a key on one side only,
a key missing from the documented layout, or a script building keys itself fails here (no
Redis needed: the Lua is read as text).
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from services.queue import keys as queue_keys
from services.queue.keys import TENANT_KEYS, QueueKeys, body_field
from services.queue.scripts import SCRIPT_NAMES
from services.queue.state import FIELDS
from tests.lua_source import builders, concat, key_slots, layout, placeholder_prefix, strip_comments

LUA = resources.files("services.queue") / "lua"
PRELUDE = (LUA / "prelude.lua").read_text()
BODIES = {name: (LUA / f"{name}.lua").read_text() for name in SCRIPT_NAMES}
KEYS = QueueKeys("berth:q:t1:")
TENANT = "team-a"
BASE = KEYS.base(TENANT)

# The prelude's key builders -> (the literal after the base, the QueueKeys builder or None
# when only the scripts build that key).
KEY_BUILDERS = {
    "active_key": ("a:", KEYS.active),
    "bucket_key": ("u:", KEYS.bucket),
    "lease_list": ("lq:", None),
}
# The prelude's state field indexes (1-based) -> services/queue/state.py FIELDS names.
STATE_FIELDS = {
    "UID": "uid",
    "RV": "resource_version",
    "PRIO": "priority",
    "TS": "timestamp",
    "ITS": "initial_attempt_timestamp",
    "PLG": "plugins",
    "NOM": "nominated_node_name",
    "SNN": "status_nominated_node_name",
    "RED": "redispatches",
    "CFL": "conflicts",
    "DIRTY": "dirty",
    "FP": "fingerprint",
    "SCHED": "scheduler_name",
    "BKT": "bucket",
}


def _all_lua() -> str:
    return strip_comments(PRELUDE + "\n".join(BODIES.values()))


def test_every_script_file_is_registered() -> None:
    files = {entry.name.removesuffix(".lua") for entry in LUA.iterdir() if entry.is_file()}
    assert files - {"prelude"} == set(SCRIPT_NAMES)


def test_key_slots_follow_tenant_keys() -> None:
    slots = key_slots(PRELUDE)
    assert slots.pop("BASE") == 1
    by_index = {index: name for name, index in slots.items()}
    assert len(by_index) == len(slots), "two names for one slot"
    assert sorted(by_index) == list(range(2, len(TENANT_KEYS) + 2))
    for index, lua_name in by_index.items():
        assert lua_name == "K_" + TENANT_KEYS[index - 2].upper(), index
    keys = KEYS.tenant(TENANT)
    assert keys == [BASE] + [KEYS.key(TENANT, name) for name in TENANT_KEYS]


def test_every_key_slot_is_used() -> None:
    text = _all_lua()
    for name in key_slots(PRELUDE):
        # Once where it is bound, at least once where it is used.
        assert len(re.findall(rf"\b{name}\b", text)) >= 2, name


def test_key_builders_are_the_python_ones() -> None:
    found = {n: b for n, b in builders(PRELUDE).items() if b[1].startswith("BASE ..")}
    assert set(found) == set(KEY_BUILDERS), "a key only one side knows: map it in KEY_BUILDERS"
    for name, ((arg,), expression) in found.items():
        literal, python = KEY_BUILDERS[name]
        built = concat(expression, {"BASE": BASE, arg: "7"})
        assert built == f"{BASE}{literal}7", name
        if python is not None:
            assert python(TENANT, "7") == built, name
    assert len(re.findall(r"\bBASE \.\.", strip_comments(PRELUDE))) == len(KEY_BUILDERS)


def test_pod_body_field_is_the_python_one() -> None:
    (key, rv), expression = builders(PRELUDE)["body_field"]
    assert concat(expression, {key: "ns/p", rv: "12"}) == body_field("ns/p", 12)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_only_the_prelude_builds_keys(name: str) -> None:
    body = strip_comments(BODIES[name])
    assert "KEYS[" not in body
    assert not re.search(r"\bBASE\b", body)


def test_the_documented_layout_is_the_one_in_use() -> None:
    assert queue_keys.__doc__ is not None
    documented = layout(queue_keys.__doc__)
    in_base = sorted(placeholder_prefix(name) for name in documented["base"])
    assert in_base == sorted([*TENANT_KEYS, *(literal for literal, _ in KEY_BUILDERS.values())])
    outside = [KEYS.tenants, KEYS.informer_lease, KEYS.informer_cursor]
    assert sorted(documented["prefix"]) == sorted(k.removeprefix(KEYS.prefix) for k in outside)


def test_a_tenant_named_informer_shares_no_key_with_the_informer() -> None:
    tenant_keys = KEYS.tenant("informer")
    for key in (KEYS.informer_lease, KEYS.informer_cursor):
        assert key not in tenant_keys
        suffix = key.removeprefix(KEYS.base("informer"))
        assert not suffix.startswith(tuple(literal for literal, _ in KEY_BUILDERS.values()))


def test_counters_are_documented() -> None:
    text = _all_lua()
    used = set(re.findall(r"counter\('(\w+)'", text))
    used |= set(re.findall(r"K_CTR,\s*'(\w+)'", text))
    assert used == {"scycle", "mrc", "revoked"}
    assert queue_keys.__doc__ is not None
    [line] = [ln for ln in queue_keys.__doc__.splitlines() if "<base>ctr " in ln]
    assert all(name in line for name in used)


def test_state_fields_follow_state_py() -> None:
    found = re.search(r"^local (UID,[\w\s,]+?)\s*=\s*([\d\s,]+?)\s*$", PRELUDE, re.MULTILINE)
    assert found is not None
    names = [name.strip() for name in found[1].split(",")]
    indexes = [int(index) for index in found[2].split(",")]
    assert set(names) == set(STATE_FIELDS), "a state field only one side knows"
    by_index = dict(zip(indexes, names, strict=True))
    assert [STATE_FIELDS[by_index[i + 1]] for i in range(len(FIELDS))] == list(FIELDS)
