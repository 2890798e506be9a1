"""Value types shared by the catalogue models: identifiers, exact decimals and UTC instants.

No I/O.  Every number in a rule is an exact :class:`~decimal.Decimal` computed in one fixed
context (:data:`DECIMAL_CONTEXT`), so the same rules give the same bits on every machine
(DESIGN: exact arithmetic).  YAML floats are taken through their shortest ``repr`` so that
``0.1`` means the decimal 0.1, not the binary float nearest to it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal, DivisionByZero, InvalidOperation, Overflow
from fractions import Fraction
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


def parse_exact(value: Any) -> Decimal:
    """Turn an int, a decimal string, a ``"n/d"`` fraction or a float into an exact Decimal.

    Raises ValueError for anything else (bool included: ``True`` is not a number here).
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, float):
        result = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if "/" in text:
            try:
                frac = Fraction(text)
            except (ValueError, ZeroDivisionError) as e:
                raise ValueError(f"{value!r} is not a fraction n/d with d > 0") from e
            result = DECIMAL_CONTEXT.divide(Decimal(frac.numerator), Decimal(frac.denominator))
        else:
            try:
                result = Decimal(text)
            except InvalidOperation as e:
                raise ValueError(f"{value!r} is not a decimal number") from e
    else:
        raise ValueError(f"expected a number, got {type(value).__name__}")
    if not result.is_finite():
        raise ValueError(f"{value!r} is not a finite number")
    return result


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
