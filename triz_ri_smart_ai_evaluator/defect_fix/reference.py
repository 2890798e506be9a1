"""The trusted side of defect DFX-1: the correct price of an order, and the control set.

Pure: no I/O, no clock.  The reference prices an order as the price list in the starting
repository's ``ISSUE.md`` says (at least 10, 50, 100 units: 5, 10, 15 %, half a cent rounded
up); it is the harness's own code and never the candidate's.

The control set is drawn from the run's secret seed (spec 2.13, 9.7; pilot 6): orders whose
total quantity sits exactly on a tier boundary (the defect's family, the hidden reproduction)
and ordinary orders off the boundaries.  The issue's one example is never drawn, so a candidate
that special-cases it gains nothing.  An order an earlier run revealed is never drawn again
(spec 9.6 "rotated", :mod:`..evaluation.controls`).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..evaluation.controls import fingerprint, skip_retired

TIERS = ((100, 15), (50, 10), (10, 5))
BOUNDARIES = (10, 50, 100)
#: The example ``ISSUE.md`` shows the candidate.
ISSUE_EXAMPLE: dict[str, Any] = {"items": [{"sku": "MUG-01", "unit_price_cents": 1999,
                                             "quantity": 10}]}
SKUS = ("TEE-11", "CAP-07", "PEN-30", "BAG-05", "NOTE-09", "LAMP-03", "SOCK-04", "CUP-12")


def expected_quote(order: Mapping[str, Any]) -> dict[str, int]:
    """The correct answer to ``POST /quote`` for a well-formed ``order``."""
    items = order["items"]
    subtotal = sum(int(i["unit_price_cents"]) * int(i["quantity"]) for i in items)
    quantity = sum(int(i["quantity"]) for i in items)
    percent = next((p for minimum, p in TIERS if quantity >= minimum), 0)
    discount = (subtotal * percent + 50) // 100
    return {"subtotal_cents": subtotal, "discount_percent": percent,
            "discount_cents": discount, "total_cents": subtotal - discount}


def _split(rng: random.Random, total: int) -> list[int]:
    """``total`` units over one to four lines, each at least one unit."""
    lines = rng.randint(1, min(4, total))
    cuts = sorted(rng.sample(range(1, total), lines - 1)) if lines > 1 else []
    bounds = [0, *cuts, total]
    return [b - a for a, b in itertools.pairwise(bounds)]


def _order(rng: random.Random, total: int) -> dict[str, Any]:
    skus = rng.sample(SKUS, 4)
    return {"items": [{"sku": skus[n], "unit_price_cents": rng.randint(1, 50_000),
                       "quantity": q} for n, q in enumerate(_split(rng, total))]}


def _ordinary_total(rng: random.Random) -> int:
    while True:
        total = rng.randint(1, 180)
        if total not in BOUNDARIES:
            return total


def reproduction_count(size: int) -> int:
    """How many of ``size`` orders are the defect's family: a fifth, at least six."""
    return max(6, size // 5)


@dataclass(frozen=True, slots=True)
class Drawn:
    """One run's orders, the fingerprint of each (reproduction first, then ordinary, in order)
    and how many retired orders the draw skipped."""

    cases: dict[str, list[dict[str, Any]]]
    fingerprints: tuple[str, ...]
    skipped: int


def case_of(order: Mapping[str, Any]) -> dict[str, Any]:
    """What a control case is for its fingerprint (spec 9.6, 10.1): the order sent, without
    the run's own ``r000``/``o000`` label (the expected answer follows from the order)."""
    return {"order": order}


def draw_cases(seed: bytes, size: int, retired: frozenset[str] = frozenset()) -> Drawn:
    """``size`` orders as ``{"reproduction": [...], "ordinary": [...]}``, each case
    ``{"id", "order", "expected"}``; a pure function of the seed, the size and ``retired``.
    An order whose fingerprint an earlier run revealed (``retired``) is skipped and the next
    one drawn from the same stream for the same slot (same tier boundary)."""
    rng = random.Random(hashlib.sha256(b"dfx controls\x00" + seed).digest())  # noqa: S311
    prints: list[str] = []
    skipped = 0

    def fresh(boundary: int | None) -> dict[str, Any]:
        """An order of ``boundary`` units (None: an ordinary total) no earlier run revealed."""
        nonlocal skipped
        while True:
            order = _order(rng, _ordinary_total(rng) if boundary is None else boundary)
            case = fingerprint(case_of(order))
            if case not in retired:
                prints.append(case)
                return order
            skipped = skip_retired(skipped, "defect_fix_delayed_confirmation")

    repro = []
    for n in range(reproduction_count(size)):
        order = fresh(BOUNDARIES[n % len(BOUNDARIES)])
        repro.append({"id": f"r{n:03d}", "order": order, "expected": expected_quote(order)})
    ordinary = []
    for n in range(size - len(repro)):
        order = fresh(None)
        ordinary.append({"id": f"o{n:03d}", "order": order, "expected": expected_quote(order)})
    assert all(c["order"] != ISSUE_EXAMPLE for c in repro)  # SKUs never include MUG-01
    return Drawn({"reproduction": repro, "ordinary": ordinary}, tuple(prints), skipped)


def traffic_order(cases: Mapping[str, Sequence[Mapping[str, Any]]], seed: bytes
                  ) -> list[Mapping[str, Any]]:
    """Every case once, shuffled by the seed: the reproduction family and the ordinary orders
    are interleaved, so no position in the run tells one from the other (spec 9.7)."""
    everything = [*cases["reproduction"], *cases["ordinary"]]
    random.Random(hashlib.sha256(b"dfx traffic\x00" + seed).digest()).shuffle(everything)  # noqa: S311
    return everything
