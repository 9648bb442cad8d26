"""Label selectors written as kubectl takes them (`-l`): the text form of a LabelSelector.

    app=web,tier!=db          equality and inequality (== is =)
    env in (prod, staging)    set membership; notin for the complement
    gpu, !spot                the key exists / does not exist

`parse_selector` returns a LabelSelector (matchExpressions), or raises SelectorSyntaxError
naming the offending part, as `kubectl get -l` refuses a malformed selector.
"""

from __future__ import annotations

import re

from shared.models.selectors import LabelSelector, LabelSelectorRequirement


class SelectorSyntaxError(ValueError):
    """A selector text that does not parse."""


_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _requirements(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def parse_selector(text: str) -> LabelSelector:
    expressions: list[LabelSelectorRequirement] = []
    if not text.strip():
        return LabelSelector()
    for part in _requirements(text):
        if m := _SET.match(part):
            values = [v.strip() for v in m.group(4).split(",")]
            if not all(values) or not all(re.fullmatch(_VALUE, v) for v in values):
                raise SelectorSyntaxError(f"invalid values in {part.strip()!r}")
            operator = "In" if m.group(3) == "in" else "NotIn"
            expressions.append(
                LabelSelectorRequirement(key=m.group(1), operator=operator, values=values)
            )
        elif m := _EQUALITY.match(part):
            operator = "NotIn" if m.group(3) == "!=" else "In"
            expressions.append(
                LabelSelectorRequirement(key=m.group(1), operator=operator, values=[m.group(4)])
            )
        elif m := _EXISTS.match(part):
            operator = "DoesNotExist" if m.group(1) else "Exists"
            expressions.append(LabelSelectorRequirement(key=m.group(2), operator=operator))
        else:
            raise SelectorSyntaxError(f"unable to parse requirement {part.strip()!r}")
    return LabelSelector(match_expressions=expressions)
