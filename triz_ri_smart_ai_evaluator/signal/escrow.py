"""Escrow arithmetic: settling a held share when the late verified value arrives (spec 1.23, 2.15).

No I/O.  The late value is computed with the *same* pinned rules as the preliminary signal: the
indicator, benchmark, threshold and formula in force when the attempt was performed (spec 9.17,
10.6, 11.20).  A newer rules version of the class has no say here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from ..errors import InputError
from ..rules._values import DECIMAL_CONTEXT as CTX
from ..rules._values import format_exact
from ..rules.formula import AtDeadline
from .calculator import SignalCalculator
from .inputs import AttemptInputs, Measurement
from .result import Signal


class SettlementKind(StrEnum):
    RELEASED = "released"  # the final value equals the preliminary one: the held share is paid
    ADJUSTED = "adjusted"  # the late value differs: the settlement pays (or claws back) the gap
    FORFEITED = "forfeited"  # the deadline passed and the class's rule forfeits the held share


@dataclass(frozen=True, slots=True)
class Settlement:
    kind: SettlementKind
    preliminary: Decimal
    held: Decimal
    paid_before: Decimal
    final: Decimal
    payable_at_settlement: Decimal
    reason: str
    final_signal: Signal | None

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "preliminary": format_exact(self.preliminary),
            "held": format_exact(self.held),
            "paid_before": format_exact(self.paid_before),
            "final": format_exact(self.final),
            "payable_at_settlement": format_exact(self.payable_at_settlement),
            "reason": self.reason,
        }


def settle_escrow(
    calculator: SignalCalculator,
    preliminary_inputs: AttemptInputs,
    *,
    late: Mapping[str, Measurement] | None,
) -> Settlement:
    """Settle the escrow of one attempt.

    ``late`` holds the late verified values of the class's ``late_indicators`` (the control event
    happened or the observation produced a value); ``None`` means the deadline passed with no
    control event, and the class's ``at_deadline`` rule applies.  Raises InputError for a class
    without escrow or for late values that do not match the class's late indicators.
    """
    conf = calculator.pinned.task_class.confirmation
    if conf.kind != "delayed" or conf.at_deadline is None:
        raise InputError(f"{calculator.pinned.task_class.id}: the class has no escrow")
    preliminary = calculator.compute(preliminary_inputs)
    if late is None:
        if conf.at_deadline is AtDeadline.RELEASE_HELD:
            return Settlement(
                SettlementKind.RELEASED,
                preliminary.value,
                preliminary.held,
                preliminary.payable_now,
                preliminary.value,
                preliminary.held,
                "deadline passed with no control event: held share released",
                preliminary,
            )
        return Settlement(
            SettlementKind.FORFEITED,
            preliminary.value,
            preliminary.held,
            preliminary.payable_now,
            preliminary.payable_now,
            CTX.subtract(preliminary.payable_now, preliminary.payable_now),
            "deadline passed with no control event: held share forfeited",
            preliminary,
        )
    expected = set(conf.late_indicators)
    if set(late) != expected:
        raise InputError(
            f"late values must be exactly {sorted(expected)}, got {sorted(late)}"
        )
    measurements = dict(preliminary_inputs.measurements)
    measurements.update(late)
    final_inputs = preliminary_inputs.model_copy(update={"measurements": measurements})
    final = calculator.compute(final_inputs)
    kind = SettlementKind.RELEASED if final.value == preliminary.value else SettlementKind.ADJUSTED
    return Settlement(
        kind,
        preliminary.value,
        preliminary.held,
        preliminary.payable_now,
        final.value,
        CTX.subtract(final.value, preliminary.payable_now),
        "late verified value applied under the attempt's original rules",
        final,
    )
