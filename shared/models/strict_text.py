"""Reading untrusted manifest text with limits, as `kubectl --validate=strict` and the API
server do: duplicate keys refused (YAML and JSON: the last one silently winning would let
`"cpu": "64", "cpu": "1m"` say two things), YAML aliases bounded by the size they expand to
(a 43 KB "billion laughs" otherwise runs for minutes and gigabytes), and strings that cannot
be stored (a lone UTF-16 surrogate from a JSON `\\ud800` escape) refused with the field's path
instead of failing deep in the encoder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

_Base: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_EXPANDED_NODES = 1_000_000
"""The most YAML nodes a text may expand to through its aliases (Kubernetes objects have a
few hundred; a manifest of thousands of pods a few million without any alias)."""
MAX_ALIAS_RATIO = 10
"""Aliases may at most multiply a text's own nodes this many times."""


class StrictTextError(ValueError):
    """The text cannot be read safely; the message says where and why."""


class StrictLoader(_Base):  # type: ignore[misc]
    """PyYAML's safe loader (the C one when built) that refuses a mapping with a key twice."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # the base constructor reports an unhashable key
            if key in seen:
                line = key_node.start_mark.line + 1
                raise StrictTextError(
                    f"line {line}: duplicate key {key!r} (first on line {seen[key]})"
                )
            seen[key] = key_node.start_mark.line + 1
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: a key twice in one object is an error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise StrictTextError(f"duplicate key {key!r}")
        out[key] = value
    return out


def check_aliases(text: str) -> None:
    """Refuse a YAML text whose aliases expand it past MAX_EXPANDED_NODES nodes, or past
    MAX_ALIAS_RATIO times its own. One pass over the parser's events (no objects built);
    skipped for texts without anchors."""
    if "&" not in text or "*" not in text:
        return
    anchored: dict[str, int] = {}
    stack: list[list[Any]] = [[None, 0]]  # [anchor, expanded nodes] per open collection
    own = 0
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.AliasEvent):
            stack[-1][1] += anchored.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            own += 1
            stack[-1][1] += 1
            if event.anchor:
                anchored[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            own += 1
            stack.append([event.anchor, 1])
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            stack[-1][1] += size
            if anchor:
                anchored[anchor] = size
        else:
            continue
        total = stack[0][1] + sum(frame[1] for frame in stack[1:])
        if total > MAX_EXPANDED_NODES or total > MAX_ALIAS_RATIO * max(own, 1000):
            raise StrictTextError(
                f"YAML aliases expand the text to more than {total} nodes (its own: {own}); "
                f"at most {MAX_ALIAS_RATIO}x its own or {MAX_EXPANDED_NODES} are read"
            )


_SURROGATE_ESCAPE = re.compile(r"\\[uU]0*[dD][89a-fA-F][0-9a-fA-F]{2}")


def check_unicode(text: str, doc: Any) -> None:
    """Refuse a document holding a string that is not valid Unicode (a lone surrogate from a
    JSON or YAML escape); the message names the field. Only texts with such an escape are
    walked."""
    if not _SURROGATE_ESCAPE.search(text):
        return
    for path, value in _strings(doc, ""):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise StrictTextError(
                f"{path or 'the document'}: invalid Unicode (a lone surrogate, \\ud800-\\udfff)"
            ) from None


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                yield where, key
            yield from _strings(item, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")
