"""Order pricing in integer cents: subtotal, bulk discount, total.

The bulk discount depends on the total quantity of the order (all lines together):
at least 10 units earn 5 %, at least 50 units 10 %, at least 100 units 15 %.
A discount of half a cent or more is rounded up to the next cent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: (minimum total quantity, discount percent), highest tier first.
DISCOUNT_TIERS = ((100, 15), (50, 10), (10, 5))
MAX_LINES = 50
MAX_QUANTITY = 10_000
MAX_UNIT_PRICE_CENTS = 10_000_000


class PricingError(ValueError):
    """An order the service cannot price."""


@dataclass(frozen=True)
class Line:
    sku: str
    unit_price_cents: int
    quantity: int


@dataclass(frozen=True)
class Quote:
    subtotal_cents: int
    discount_percent: int
    discount_cents: int
    total_cents: int

    def to_dict(self) -> dict[str, int]:
        return {
            "subtotal_cents": self.subtotal_cents,
            "discount_percent": self.discount_percent,
            "discount_cents": self.discount_cents,
            "total_cents": self.total_cents,
        }


def discount_percent(total_quantity: int) -> int:
    """The bulk discount, in percent, for an order of ``total_quantity`` units."""
    for minimum, percent in DISCOUNT_TIERS:
        if total_quantity > minimum:
            return percent
    return 0


def quote(lines: Sequence[Line]) -> Quote:
    """Price an order.  Raises PricingError for an empty order."""
    if not lines:
        raise PricingError("an order needs at least one line")
    subtotal = sum(line.unit_price_cents * line.quantity for line in lines)
    percent = discount_percent(sum(line.quantity for line in lines))
    discount = (subtotal * percent + 50) // 100
    return Quote(subtotal, percent, discount, subtotal - discount)


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise PricingError(f"{name} must be a whole number from {low} to {high}")
    return value


def parse_lines(payload: Any) -> list[Line]:
    """The lines of a request body ``{"items": [{"sku", "unit_price_cents", "quantity"}]}``.
    Raises PricingError for anything else."""
    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        raise PricingError("the body must be a JSON object with a list of items")
    items = payload["items"]
    if not 1 <= len(items) <= MAX_LINES:
        raise PricingError(f"an order has 1 to {MAX_LINES} items")
    lines = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("sku"), str) or not item["sku"]:
            raise PricingError("every item needs a sku")
        lines.append(Line(
            item["sku"],
            _whole(item.get("unit_price_cents"), "unit_price_cents", 0, MAX_UNIT_PRICE_CENTS),
            _whole(item.get("quantity"), "quantity", 1, MAX_QUANTITY),
        ))
    return lines
