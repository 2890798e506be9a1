"""The number grammar of every exact value (``rules._values.parse_exact``, issue 10 class 3).

Accepted: Python ints (not bool), plain decimal strings ``-?D+(.D+)?``, fractions ``-?D+/D+``
with a positive denominator, and floats whose ``repr`` is itself a plain decimal (a YAML
``0.5``).  Everything else is refused with a ValueError: exponents, underscores, surrounding
whitespace, a plus sign, NaN and the infinities, and anything past the bounds (82 characters,
40 digits a fraction side, 34 significant digits, a magnitude from 1E-40 to below 1E+40).  The
bounds are chosen so that what ``format_exact`` writes of an accepted value (the published
rules, the ledger's inputs) is itself accepted and reads back to the same value.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.rules._values import (
    DECIMAL_CONTEXT,
    format_exact,
    parse_exact,
)
from triz_ri_smart_ai_evaluator.signal.inputs import Measurement

MAX_DIGITS = 40  # a side of a fraction; the magnitude of an integer
MAX_CHARS = 82  # a string: a signed 40-digit numerator, "/", a 40-digit denominator
PRECISION = 34  # DECIMAL_CONTEXT.prec: an accepted value is exact in the arithmetic
PLAIN = re.compile(r"-?[0-9]+(\.[0-9]+)?")


@pytest.mark.parametrize(("value", "expected"), [
    (0, "0"),
    (7, "7"),
    (-3, "-3"),
    (10**39, "1" + "0" * 39),
    ("0", "0"),
    ("40", "40"),
    ("-1", "-1"),
    ("11.4", "11.4"),
    ("0.10", "0.10"),
    ("-0.5", "-0.5"),
    ("40/40", "1"),
    ("1/4", "0.25"),
    ("-3/4", "-0.75"),
    ("1/3", "0.3333333333333333333333333333333333"),
    (0.5, "0.5"),
    (0.1, "0.1"),
    (-2.25, "-2.25"),
    (1.0, "1.0"),
    (Decimal("0.25"), "0.25"),
])
def test_accepted_spellings(value: object, expected: str) -> None:
    assert parse_exact(value) == Decimal(expected)


@pytest.mark.parametrize("value", [
    # the audit's list (issue 10 class 3)
    "1e309", "1_000", " 1 ", " 1", "1 ", "Infinity", "+5", "+1",
    # exponents in strings and in floats
    "1e3", "1E3", "1.5e-3", "1e-07", 1e-07, 1e16, 1e300, 1.5e-5,
    # the non-finite values, in every spelling
    "NaN", "nan", "-Infinity", "inf", "-inf", "sNaN", float("nan"), float("inf"),
    float("-inf"), Decimal("NaN"), Decimal("Infinity"),
    # not quite decimals
    "", "-", ".5", "5.", "1.2.3", "0x10", "1,5", "\u0661", "\u0663/\u0664", "1/0", "1/-2",
    "-1/-2", "+1/2",
    "1 / 2", "1/2/3", "1.5/2", "\t1", "1\n",
    # too many digits
    "1" * (MAX_DIGITS + 1), "0." + "1" * (PRECISION + 1), "1" * (MAX_DIGITS + 1) + "/1",
    "1/" + "1" * (MAX_DIGITS + 1), 10**MAX_DIGITS, -(10**MAX_DIGITS), 10**39 + 1,
    pytest.param(10**5000, id="int-5001-digits"),
    "9" * 5000, "0." + "0" * MAX_CHARS + "1", "0." + "0" * 45 + "1", "1" + "0" * 40,
    "9" * 40 + "/1", Decimal("1E+40"), Decimal("1E-41"), Decimal("0." + "1" * 35),
    # not numbers at all
    True, False, None, [1], {"v": 1}, b"1", Fraction(1, 2),
])
def test_refused_spellings(value: object) -> None:
    with pytest.raises(ValueError, match=r"\S") as info:
        parse_exact(value)
    assert "\n" not in str(info.value)


def test_refusal_reaches_a_model_as_one_validation_error() -> None:
    with pytest.raises(ValueError, match="not a plain decimal"):
        Measurement.model_validate({"value": "1e309", "source": "harness"})


@pytest.mark.parametrize("text", [
    "1/3", "2/3", "1/300000", "1/1234567", "123456789/7", "-1/7", "0.1", "250",
    "1/" + "9" * MAX_DIGITS, "9" * MAX_DIGITS + "/" + "3" * MAX_DIGITS,
    "9" * 39 + "/1", "0." + "0" * 39 + "1",
])
def test_format_exact_of_an_accepted_value_reads_back(text: str) -> None:
    """What format_exact writes (the published rules, the ledger's inputs) reads back to the same
    value, even at the full 34 digits of the context and the smallest magnitude."""
    value = parse_exact(text)
    assert parse_exact(format_exact(value)) == value


# -- properties ------------------------------------------------------------------------------

digits = st.text(alphabet="0123456789", min_size=1, max_size=MAX_DIGITS)


@st.composite
def plain_decimals(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(digits)
    frac = draw(st.none() | digits)
    return f"{sign}{whole}" + ("" if frac is None else f".{frac}")


@settings(max_examples=300, deadline=None)
@given(text=plain_decimals())
def test_a_plain_decimal_is_exact_or_refused(text: str) -> None:
    try:
        value = parse_exact(text)
    except ValueError:
        # only past a bound: more significant digits than the context holds, or a magnitude
        # of 1E+40 or more (every shorter spelling of such digits is accepted, below)
        assert len(text.lstrip("-").replace(".", "").strip("0")) > PRECISION or (
            len(text.lstrip("-").split(".")[0].lstrip("0")) > MAX_DIGITS - 1)
        return
    assert value == Decimal(text)


@settings(max_examples=300, deadline=None)
@given(sign=st.sampled_from(["", "-"]), whole=st.text("0123456789", min_size=1, max_size=20),
       frac=st.none() | st.text("0123456789", min_size=1, max_size=14))
def test_a_short_plain_decimal_is_always_accepted_exactly(sign: str, whole: str,
                                                          frac: str | None) -> None:
    text = sign + whole + ("" if frac is None else f".{frac}")
    assert parse_exact(text) == Decimal(text)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(-(10 ** (MAX_DIGITS - 1)) + 1, 10 ** (MAX_DIGITS - 1) - 1),
       d=st.integers(1, 10**MAX_DIGITS - 1))
def test_a_fraction_is_its_quotient_in_the_context(n: int, d: int) -> None:
    expected = DECIMAL_CONTEXT.divide(Decimal(n), Decimal(d))
    assert parse_exact(f"{n}/{d}") == expected


@settings(max_examples=300, deadline=None)
@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_a_float_is_accepted_exactly_when_its_repr_is_plain(value: float) -> None:
    if PLAIN.fullmatch(repr(value)):
        assert parse_exact(value) == Decimal(repr(value))
    else:
        with pytest.raises(ValueError, match=r"\S"):
            parse_exact(value)


anything = (st.text(max_size=60) | st.text(alphabet="0123456789.-+/eE_ \t", max_size=60)
            | st.integers() | st.floats() | st.booleans() | st.none())


@settings(max_examples=500, deadline=None)
@given(value=anything)
def test_what_is_accepted_is_finite_bounded_and_round_trips(value: object) -> None:
    try:
        result = parse_exact(value)
    except ValueError:
        return
    assert result.is_finite()
    assert result == 0 or -MAX_DIGITS <= result.adjusted() < MAX_DIGITS
    assert DECIMAL_CONTEXT.plus(result) == result  # at most 34 significant digits
    assert len(format_exact(result)) <= MAX_CHARS
    assert parse_exact(format_exact(result)) == result


@settings(max_examples=300, deadline=None)
@given(text=plain_decimals(),
       spoil=st.sampled_from(["e{}", "E{}", "_", " ", "\t", "+", "\n", "\u00a0"]),
       at=st.integers(0, 100), exp=st.integers(-400, 400))
def test_exponent_underscore_whitespace_and_plus_are_refused(text: str, spoil: str, at: int,
                                                             exp: int) -> None:
    mark = spoil.format(exp) if "{}" in spoil else spoil
    at = at % (len(text) + 1)
    if mark in {"+"}:
        spoiled = "+" + text.removeprefix("-")
    elif mark.startswith(("e", "E")):
        spoiled = text + mark
    else:
        spoiled = text[:at] + mark + text[at:]
    with pytest.raises(ValueError, match=r"\S"):
        parse_exact(spoiled)
