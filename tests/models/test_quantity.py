"""Quantity parsing, ported from upstream apimachinery resource/quantity_test.go (facts)."""

from fractions import Fraction

import pytest

from shared.models import (
    QuantityError,
    format_resource,
    int_value,
    milli_value,
    parse_quantity,
    resource_list,
)

Ki, Mi, Gi, Ti, Pi, Ei = (1024**n for n in range(1, 7))
MAX_INT64 = 2**63 - 1


def dec(mantissa: int, exponent: int) -> Fraction:
    return Fraction(mantissa) * Fraction(10) ** exponent


VALID = [
    ("0", 0),
    ("0n", 0),
    ("0u", 0),
    ("0m", 0),
    ("0Ki", 0),
    ("0k", 0),
    ("0Mi", 0),
    ("0M", 0),
    ("0Gi", 0),
    ("0G", 0),
    ("0Ti", 0),
    ("0T", 0),
    ("1", 1),
    ("1Ki", Ki),
    ("8Ki", 8 * Ki),
    ("7Mi", 7 * Mi),
    ("6Gi", 6 * Gi),
    ("5Ti", 5 * Ti),
    ("4Pi", 4 * Pi),
    ("3Ei", 3 * Ei),
    ("10Ti", 10 * Ti),
    ("100Ti", 100 * Ti),
    ("5n", dec(5, -9)),
    ("4u", dec(4, -6)),
    ("3m", dec(3, -3)),
    ("9", 9),
    ("8k", dec(8, 3)),
    ("50k", dec(5, 4)),
    ("7M", dec(7, 6)),
    ("6G", dec(6, 9)),
    ("5T", dec(5, 12)),
    ("40T", dec(4, 13)),
    ("300T", dec(3, 14)),
    ("2P", dec(2, 15)),
    ("1E", dec(1, 18)),
    ("1E-3", dec(1, -3)),
    ("1e3", dec(1, 3)),
    ("1E6", dec(1, 6)),
    ("1e9", dec(1, 9)),
    ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)),
    ("1E18", dec(1, 18)),
    ("1e14", dec(1, 14)),
    ("1e13", dec(1, 13)),
    ("100.035k", dec(100035, 0)),
    ("0.001", dec(1, -3)),
    ("0.0005k", dec(5, -1)),
    ("0.005", dec(5, -3)),
    ("0.05", dec(5, -2)),
    ("0.5", dec(5, -1)),
    ("0.00050k", dec(5, -1)),
    ("0.00500", dec(5, -3)),
    ("0.05000", dec(5, -2)),
    ("0.50000", dec(5, -1)),
    ("0.5e0", dec(5, -1)),
    ("0.5e-1", dec(5, -2)),
    ("0.5e-2", dec(5, -3)),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)),
    ("1.3E+6", dec(13, 5)),
    ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)),
    ("1.7E18", dec(17, 17)),
    ("9.01", dec(901, -2)),
    ("8.1k", dec(81, 2)),
    ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)),
    ("5.444T", dec(5444, 9)),
    ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)),
    ("2.5P", dec(25, 14)),
    ("1.01E", dec(101, 16)),
    # Things that saturate or round up to a whole nano unit.
    ("3.001n", dec(4, -9)),
    ("1.1E-9", dec(2, -9)),
    ("0.0000000001", dec(1, -9)),
    ("0.0000000005", dec(1, -9)),
    ("0.00000000050", dec(1, -9)),
    ("0.5e-9", dec(1, -9)),
    ("0.9n", dec(1, -9)),
    ("0.00000012345", dec(124, -9)),
    ("0.00000012354", dec(124, -9)),
    ("9Ei", MAX_INT64),
    ("9223372036854775807Ki", MAX_INT64),
    ("12E", dec(12, 18)),
    # Fractional binary quantities.
    ("100.035Ki", dec(10243584, -2)),
    ("0.5Mi", Fraction(Mi, 2)),
    ("0.05Gi", dec(536870912, -1)),
    ("0.025Ti", dec(274877906944, -1)),
    # "Things written by trolls".
    ("0.000000000001Ki", dec(2, -9)),
    (".001", dec(1, -3)),
    (".0001k", dec(100, -3)),
    ("1.", 1),
    ("1.G", dec(1, 9)),
    # The brief's own examples.
    ("1.5Gi", 3 * Gi // 2),
    ("100m", Fraction(1, 10)),
    ("2Ki", 2048),
    ("-1", -1),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=t) for t, e in VALID])
def test_parse_valid(text, expected):
    assert parse_quantity(text) == Fraction(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [pytest.param(t, e, id=t) for t, e in VALID],
)
def test_parse_signed_variants(text, expected):
    # Upstream re-parses every case with an explicit "-" and "+" prefix.
    if text.startswith("-"):
        return
    assert parse_quantity("-" + text) == -Fraction(expected)
    assert parse_quantity("+" + text) == Fraction(expected)


@pytest.mark.parametrize(
    "text",
    [
        "",
        # Documented deviation: upstream reads a quantity without a single digit as 0 ("."
        # and "-." are in its table of things written by trolls); berth refuses them, and
        # "e1", as the typos they are.
        ".",
        "-.",
        "e1",
        "+",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        "1e4294967297",
        "1E-2147483648",
        " 1",
        "1 ",
        "1.1.1",
        "1Qi",
        "1 Gi",
        "1e",
        "1K",
        "Non-Numeric",
        "1Mi3",
    ],
)
def test_parse_invalid(text):
    with pytest.raises(QuantityError) as excinfo:
        parse_quantity(text)
    assert repr(text) in str(excinfo.value)
    assert excinfo.value.text == text


def test_exponent_within_int32_is_accepted():
    # Upstream accepts exponents in [-MaxInt32, MaxInt32]; a tiny value rounds up to 1n.
    assert parse_quantity("1E-2147483647") == dec(1, -9)


def test_absurd_positive_exponent_is_rejected():
    # Documented deviation: upstream accepts it but its int64 accessors overflow.
    with pytest.raises(QuantityError):
        parse_quantity("1e2147483647")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(2, 2, id="int"),
        pytest.param(0.5, Fraction(1, 2), id="float"),
        pytest.param(1e-05, dec(1, -5), id="float-exponent"),
        pytest.param(Fraction(3, 2), Fraction(3, 2), id="fraction"),
    ],
)
def test_parse_yaml_numbers(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [True, float("inf"), float("nan"), None, [1]])
def test_parse_rejects_non_quantities(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        pytest.param("1", 1000, 1, id="1"),
        pytest.param("100m", 100, 1, id="100m-rounds-up"),
        pytest.param("1.5", 1500, 2, id="1.5"),
        pytest.param("0.1m", 1, 1, id="sub-milli-rounds-up"),
        pytest.param("1Gi", 1073741824000, 1073741824, id="1Gi"),
        pytest.param("1.5Gi", 1610612736000, 1610612736, id="1.5Gi"),
        pytest.param("-1.5", -1500, -1, id="negative-ceil"),
        pytest.param("0", 0, 0, id="zero"),
    ],
)
def test_milli_and_int_value(text, milli, value):
    q = parse_quantity(text)
    assert milli_value(q) == milli
    assert int_value(q) == value


def test_resource_list_uses_millicores_for_cpu_only():
    assert resource_list(
        {"cpu": "1500m", "memory": "1Gi", "pods": 110, "example.com/x": "0.5"}
    ) == {
        "cpu": 1500,
        "memory": Gi,
        "pods": 110,
        "example.com/x": 1,
    }


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        pytest.param("cpu", 1500, "1500m", id="cpu-milli"),
        pytest.param("cpu", 2000, "2", id="cpu-whole"),
        pytest.param("cpu", 0, "0", id="cpu-zero"),
        pytest.param("memory", Gi, "1Gi", id="1Gi"),
        pytest.param("memory", 300 * Mi, "300Mi", id="300Mi"),
        pytest.param("memory", 1001 * Gi, "1001Gi", id="1001Gi"),
        pytest.param("memory", Ti, "1Ti", id="1Ti"),
        pytest.param("memory", 10**9, "1G", id="1G"),
        pytest.param("memory", 3000, "3k", id="3k"),
        pytest.param("memory", 1025, "1025", id="1025"),
        pytest.param("pods", 110, "110", id="pods"),
        pytest.param("memory", 0, "0", id="zero"),
    ],
)
def test_format_resource(name, value, text):
    assert format_resource(name, value) == text
    assert resource_list({name: text}) == {name: value}
