"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource), exact arithmetic.

Grammar (upstream parseQuantityString):
    <quantity>  ::= <sign><digits>[.<digits>]<suffix>      (".5" and "1." are accepted)
    <suffix>    ::= Ki | Mi | Gi | Ti | Pi | Ei             (binary SI)
                  | n | u | m | "" | k | M | G | T | P | E  (decimal SI)
                  | e<signed int> | E<signed int>           (decimal exponent)
Like upstream, a parsed value is rounded up (away from zero) to a whole nano unit, and
binary-SI values are capped at 2^63-1.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_NANOS_PER_UNIT = 10**9
_NANOS_PER_MILLI = 10**6
_MAX_INT64 = 2**63 - 1
_MAX_DIGITS = 64
"""Digits a quantity may have: more cannot be an amount berth carries (and Python refuses to
convert 4,300 digits or more)."""
MAX_EXACT_AMOUNT = 2**53 - 1
"""The largest resource amount (after scaling: millicores, bytes, counts) berth accepts: every
part of the pipeline carries it exactly (numpy int64 columns, msgpack, and the reserve
script's Lua numbers, which are doubles). Larger amounts are rejected at the door."""


def bounded_amount(value: int) -> int:
    """`value` clamped to 0..MAX_EXACT_AMOUNT: what a view counts for an amount already
    stored out of range (from before validation existed, or written around it), so one such
    object can never overflow a column or stop a view."""
    return 0 if value < 0 else min(value, MAX_EXACT_AMOUNT)


# interpret() accepts [-MaxInt32, MaxInt32] (MinInt32 is rejected: its negation overflows).
_INT32_MIN, _INT32_MAX = -(2**31 - 1), 2**31 - 1
# Larger positive exponents would make Python build astronomically large integers; such
# values cannot be a resource amount (upstream's int64 accessors overflow on them anyway).
_MAX_EXPONENT = 4096


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""

    def __init__(self, text: object, reason: str = "invalid quantity") -> None:
        super().__init__(f"{reason} {text!r}")
        self.text = text
        self.reason = reason


QuantityInput = str | int | float | Fraction


def _split(text: str) -> tuple[bool, str, str, str]:
    """Return (negative, integer digits, fraction digits, suffix) or raise QuantityError."""
    end = len(text)
    pos = 0
    negative = False
    if pos < end and text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end or not (whole or frac):
        # At least one digit (".", "e1", "-" are not quantities, as upstream ParseQuantity).
        raise QuantityError(text)
    return negative, whole, frac, text[suffix_start:]


def _scale(suffix: str, text: str) -> tuple[int, int, bool]:
    """Return (base, exponent, is_binary) for a suffix."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], False
    if suffix in _BINARY:
        return 2, _BINARY[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            if _INT32_MIN <= exponent <= _INT32_MAX:
                return 10, exponent, False
    raise QuantityError(text, "invalid quantity suffix in")


def _text_of(value: QuantityInput) -> str:
    if isinstance(value, bool):
        raise QuantityError(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(value)
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise QuantityError(value)


@lru_cache(maxsize=4096)
def _nanos(text: str) -> int:
    """The quantity in whole nano units, rounded up away from zero (cached: manifests repeat
    the same few quantity strings thousands of times)."""
    if not text:
        raise QuantityError(text)
    negative, whole, frac, suffix = _split(text)
    base, exponent, binary = _scale(suffix, text)
    if len(whole) + len(frac) > _MAX_DIGITS:
        raise QuantityError(text, "quantity out of range")
    mantissa = int(whole + frac) if (whole or frac) else 0
    if mantissa == 0:
        return 0
    if exponent > _MAX_EXPONENT:
        raise QuantityError(text, "quantity out of range")
    if base == 10 and len(whole) + exponent < -9:
        # Below one nano unit (and far too small to compute 10**exponent): rounds up to 1n.
        return -1 if negative else 1
    # value = mantissa / 10**len(frac) * base**exponent, in nano units: num / den.
    num = mantissa * _NANOS_PER_UNIT
    den = 10 ** len(frac)
    if exponent >= 0:
        num *= base**exponent
    else:
        den *= base**-exponent
    nanos: int = -(-num // den)  # round up so a tiny request is never rounded to nothing
    if binary and nanos > _MAX_INT64 * _NANOS_PER_UNIT:
        nanos = _MAX_INT64 * _NANOS_PER_UNIT
    return -nanos if negative else nanos


def parse_quantity(value: QuantityInput) -> Fraction:
    """Parse a quantity into an exact Fraction (YAML ints and floats are accepted too)."""
    if isinstance(value, Fraction):
        return value
    if type(value) is int:
        return Fraction(value)
    return Fraction(_nanos(_text_of(value)), _NANOS_PER_UNIT)


def milli_value(q: Fraction) -> int:
    """ceil(q * 1000), like Quantity.MilliValue()."""
    return math.ceil(q * 1000)


def int_value(q: Fraction) -> int:
    """ceil(q), like Quantity.Value()."""
    return math.ceil(q)


def resource_value(name: str, value: QuantityInput) -> int:
    """The integer a resource list stores: millicores for cpu, base units otherwise.

    Same result as milli_value/int_value of parse_quantity, computed in integers.
    """
    if type(value) is int:
        return value * 1000 if name == "cpu" else value
    if isinstance(value, Fraction):
        return milli_value(value) if name == "cpu" else int_value(value)
    nanos: int = _nanos(_text_of(value))
    divisor = _NANOS_PER_MILLI if name == "cpu" else _NANOS_PER_UNIT
    return -(-nanos // divisor)


def resource_list(values: dict[str, QuantityInput]) -> dict[str, int]:
    """Convert {"cpu": "500m", "memory": "1Gi"} into the integer resource-list convention."""
    return {name: resource_value(name, v) for name, v in values.items()}


def _format_int(value: int) -> str:
    """Canonical text for an integer amount: binary suffix when exact, else decimal SI."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    for suffix, exponent in reversed(_BINARY.items()):
        if magnitude % (1 << exponent) == 0:
            return f"{sign}{magnitude >> exponent}{suffix}"
    for suffix, exponent in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if magnitude % 10**exponent == 0:
            return f"{sign}{magnitude // 10**exponent}{suffix}"
    return f"{sign}{magnitude}"


def format_resource(name: str, value: int) -> str:
    """Render a resource-list integer back as a quantity string ("1500m", "1Gi", "110")."""
    if name == "cpu":
        if value % 1000 == 0:
            return str(value // 1000)
        return f"{value}m"
    return _format_int(value)
