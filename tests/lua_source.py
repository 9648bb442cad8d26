"""Reading the Redis Lua scripts as text, to check the names they spell against Python's.

Just enough of Lua for the preludes: `local A, B = KEYS[1], KEYS[2]` slots, `local NAME = expr`
constants, one-line `local function f(arg) return expr end` key builders, and string
concatenations (`"a:" .. x .. ':'`) evaluated with the variables given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_COMMENT = re.compile(r"--[^\n]*")
_STRING = re.compile(r"""^(?:"([^"]*)"|'([^']*)')$""")


def strip_comments(source: str) -> str:
    """The source without `--` comments (no script puts "--" inside a string)."""
    return _COMMENT.sub("", source)


def key_slots(source: str) -> dict[str, int]:
    """Names bound to KEYS[n] by `local A, B = KEYS[1], KEYS[2]` statements."""
    slots: dict[str, int] = {}
    pattern = r"^local\s+([\w\s,]+?)\s*=\s*(KEYS\[\d+\](?:\s*,\s*KEYS\[\d+\])*)\s*$"
    for names, values in re.findall(pattern, strip_comments(source), re.MULTILINE):
        indexes = [int(i) for i in re.findall(r"KEYS\[(\d+)\]", values)]
        left = [name.strip() for name in names.split(",")]
        assert len(left) == len(indexes), (names, values)
        slots.update(zip(left, indexes, strict=True))
    return slots


def constants(source: str) -> dict[str, str]:
    """`local NAME = <expression>` at the top level, one per line (not functions)."""
    found = re.findall(r"^local\s+([A-Z_]+)\s*=\s*(.+?)\s*$", strip_comments(source), re.M)
    return dict(found)


def builders(source: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """One-line `local function f(a, b) return <expression> end`: f -> ((a, b), expression)."""
    pattern = r"^local function (\w+)\(([\w\s,]*)\)\s+return\s+(.+?)\s+end\s*$"
    return {
        name: (tuple(arg.strip() for arg in args.split(",") if arg.strip()), expression)
        for name, args, expression in re.findall(pattern, strip_comments(source), re.MULTILINE)
    }


def concat(expression: str, variables: Mapping[str, str]) -> str:
    """Evaluate `"lit" .. var .. 'lit'` with `variables` (KeyError: an unknown term)."""
    out = []
    for term in expression.split(".."):
        term = term.strip()
        literal = _STRING.match(term)
        if literal:
            out.append(literal.group(1) if literal.group(1) is not None else literal.group(2))
        else:
            out.append(variables[term])
    return "".join(out)


def layout(docstring: str) -> dict[str, list[str]]:
    """A module docstring's key layout: the names after `<base>` or `<prefix>` at the start of
    an indented line, by that leading placeholder."""
    found: dict[str, list[str]] = {"base": [], "prefix": []}
    for where, name in re.findall(r"^\s+<(base|prefix)>(\S+)", docstring, re.MULTILINE):
        found[where].append(name)
    return found


def placeholder_prefix(name: str) -> str:
    """ "a:<prio>" -> "a:", "rv" -> "rv": the literal part a key builder spells."""
    return name.split("<", 1)[0]
