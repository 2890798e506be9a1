"""Value types shared by the catalogue models: identifiers, exact decimals and UTC instants.

No I/O.  Every number in a rule is an exact :class:`~decimal.Decimal` computed in one fixed
context (:data:`DECIMAL_CONTEXT`), so the same rules give the same bits on every machine
(DESIGN: exact arithmetic).  YAML floats are taken through their shortest ``repr`` so that
``0.1`` means the decimal 0.1, not the binary float nearest to it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)

#: The one arithmetic context of the project.  34 significant digits (IEEE 754 decimal128),
#: banker's rounding, and traps on anything that would otherwise produce a silent NaN or Inf.
DECIMAL_CONTEXT = Context(
    prec=34,
    rounding=ROUND_HALF_EVEN,
    traps=[InvalidOperation, DivisionByZero, Overflow],
)

ZERO = Decimal(0)
ONE = Decimal(1)


#: The number grammar of every exact value (issue 10): a plain decimal, or a fraction n/d.  No
#: exponent, underscore, surrounding whitespace, plus sign, NaN or infinity; ASCII digits only.
_PLAIN_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_FRACTION = re.compile(r"(-?[0-9]{1,40})/([0-9]{1,40})")
#: Bounds on an exact value.  A string is looked at only up to 82 characters; an accepted value
#: has at most DECIMAL_CONTEXT.prec significant digits (exact in the arithmetic, never rounded
#: on reading) and a magnitude from 1E-40 to below 1E+40.  Together they make what
#: format_exact writes of an accepted value (at most 76 characters) read back to the same value.
_MAX_TEXT = 82  # "-" + 40 digits + "/" + 40 digits
_MAX_ADJUSTED = 40
_INT_BOUND = 10**_MAX_ADJUSTED


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _bounded(result: Decimal, shown: str) -> Decimal:
    if not result.is_finite():
        raise ValueError(f"{shown} is not a finite number")
    if result and not -_MAX_ADJUSTED <= result.adjusted() < _MAX_ADJUSTED:
        raise ValueError(f"{shown} is outside the range 1E-40 to 1E+40")
    if DECIMAL_CONTEXT.plus(result) != result:
        raise ValueError(f"{shown} has more than {DECIMAL_CONTEXT.prec} significant digits")
    return result


def parse_exact(value: Any) -> Decimal:
    """Turn an int, a plain decimal string, a ``"n/d"`` fraction or a float into an exact
    Decimal.

    Accepted: an int (not a bool; ``True`` is not a number here); a string ``-?D+(.D+)?`` or
    ``-?D/D`` with a denominator above 0 and at most 40 digits a side; a float whose ``repr`` is
    such a plain decimal (a YAML ``0.5``; not ``1e-07``, NaN or an infinity).  Raises ValueError
    for anything else, and for a value past the bounds above.
    """
    # Strings first: the common case of every input document (this is on its hot path).
    if isinstance(value, str):
        if len(value) > _MAX_TEXT:
            raise ValueError(f"a number of {len(value):,} characters is longer than the "
                             f"limit of {_MAX_TEXT}")
        if _PLAIN_DECIMAL.fullmatch(value):
            return _bounded(Decimal(value), _shown(value))
        fraction = _FRACTION.fullmatch(value)
        if fraction is None:
            raise ValueError(f"{_shown(value)} is not a plain decimal (like 0.25) or a "
                             "fraction n/d")
        numerator, denominator = (Decimal(part) for part in fraction.groups())
        if not denominator:
            raise ValueError(f"{_shown(value)} is not a fraction n/d with d > 0")
        return _bounded(DECIMAL_CONTEXT.divide(numerator, denominator), _shown(value))
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, int):
        if not -_INT_BOUND < value < _INT_BOUND:
            raise ValueError(f"an integer of more than {_MAX_ADJUSTED} digits is out of range")
        return _bounded(Decimal(value), "the integer")
    if isinstance(value, float):
        text = repr(value)
        if not _PLAIN_DECIMAL.fullmatch(text):
            raise ValueError(f"{text} is not a plain decimal (no exponent, NaN or infinity)")
        return _bounded(Decimal(text), text)
    if isinstance(value, Decimal):
        return _bounded(value, _shown(str(value)))
    raise ValueError(f"expected a number, got {type(value).__name__}")


def format_exact(value: Decimal) -> str:
    """Plain decimal text without exponent or trailing zeros: one spelling per value."""
    if value == 0:
        return "0"
    return format(value.normalize(DECIMAL_CONTEXT), "f")


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


Exact = Annotated[
    Decimal,
    BeforeValidator(parse_exact),
    PlainSerializer(format_exact, return_type=str),
    WithJsonSchema({"type": ["string", "number"], "description": "exact decimal or n/d"}),
]
"""An exact number: serialised as a plain decimal string."""

Identifier = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
"""A lower-case snake_case identifier used to cross-reference parts of a task class."""

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]
"""Non-empty human text."""

UtcInstant = Annotated[AwareDatetime, AfterValidator(_utc)]
"""A timezone-aware instant, normalised to UTC; naive datetimes are refused."""


class Frozen(BaseModel):
    """Base of every boundary model: immutable and strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
