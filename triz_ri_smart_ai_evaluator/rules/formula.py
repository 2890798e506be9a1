"""How indicators combine into a signal, and when the signal becomes final.

Spec 2.9 and 5.x (combination), 4.5-4.6 (thresholds and caps), 7.x (the three standard models,
the cost indicator C), 2.15 and 9.17 (confirmation deadline and escrow).  No I/O.  There is no
field for a weight, a pool or an overall coefficient (spec 5.6, 5.7, 11.3): unknown fields are
refused, so such a term cannot be declared.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from ._values import ONE, ZERO, Exact, Frozen, Identifier, Text


class Threshold(Frozen):
    """A minimum performance below which the indicator earns no variable reward (spec 4.5)."""

    indicator: Identifier
    minimum: Exact = Field(ge=0)
    justification: Text


class Limit(Frozen):
    """An upper limit on a performance value, only with a written justification (spec 4.6)."""

    maximum: Exact = Field(gt=0)
    justification: Text
    shift_protection: Text = Field(
        description="why the cap cannot be used to shift a result to another attempt (4.6)"
    )


class Cap(Limit):
    """The limit on one indicator's performance (spec 4.6)."""

    indicator: Identifier


class Block(Frozen):
    """A non-compensatory block of standard model 3 (spec 7.4, 5.4).

    S_i = B x Perf_i when Perf_i reaches the block's threshold, else 0; Perf_i is the product
    of the block's indicators.  A block never sees another block's values.
    """

    id: Identifier
    indicators: tuple[Identifier, ...] = Field(min_length=1)
    threshold: Exact = Field(ge=0)
    justification: Text
    cap: Limit | None = Field(
        default=None, description="the block's performance limit; 1 when absent (spec 4.6, 5.4)"
    )


class Combination(Frozen):
    """Which indicators are multiplied, which are separate, thresholds and caps (spec 2.9)."""

    multiplied: tuple[Identifier, ...] = ()
    blocks: tuple[Block, ...] = ()
    reported_only: tuple[Identifier, ...] = Field(
        default=(), description="measured and shown, but not part of the variable reward"
    )
    thresholds: tuple[Threshold, ...] = ()
    caps: tuple[Cap, ...] = ()
    overall_cap: Limit | None = Field(
        default=None,
        description="the limit on Perf_overall; 1 when absent, so over-performance on one "
        "indicator never pays beyond the honest maximum (spec 4.6, 5.3)",
    )

    def overall_limit(self) -> Decimal:
        return ONE if self.overall_cap is None else self.overall_cap.maximum

    def block_limit(self, block: Block) -> Decimal:
        return ONE if block.cap is None else block.cap.maximum


class Model(StrEnum):
    """The standard signal models of spec 7.2-7.4."""

    GATE = "gate"  # model 1: S = B + B x Perf_overall when quality is admissible
    SEPARATE_BLOCKS = "separate_blocks"  # model 2: S = B x K + B x Perf_overall
    NON_COMPENSATORY_SUM = "non_compensatory_sum"  # model 3: S = sum of thresholded blocks


class Mode(StrEnum):
    """How the signal may be used (spec 4.7, 9.8; pilot 02 section 10 starts in shadow)."""

    SHADOW = "shadow"
    LIMITED = "limited"
    TRAINING = "training"


class Neutral(StrEnum):
    """The neutral signal for a recorded, uncontrollable obstacle (spec 6.5, 3.8, 11.11)."""

    BASE = "base"  # S = B: admissible compliance with the standard, no result to measure
    ZERO = "zero"


class CostIndicator(Frozen):
    """The separate cost indicator C (spec 3.7): reported beside S, never mixed into it."""

    id: Identifier
    unit: Text
    source: Identifier
    description: Text


class Formula(Frozen):
    model: Model
    base_unit: Exact = Field(gt=0, description="B, spec 1.12")
    quality_minimum: Exact = Field(
        default=ONE, ge=0, le=1, description="the mandatory level of K for model 1 (spec 7.2)"
    )
    negative_value: Exact | None = Field(
        default=None, description="predefined signal on a critical violation; 0 when absent"
    )
    neutral: Neutral
    mode: Mode
    cost: CostIndicator | None = None
    rework: Literal["first_attempt_counts"] = Field(
        default="first_attempt_counts",
        description="spec 3.5, 8.6: correcting one's own error earns nothing extra",
    )

    @model_validator(mode="after")
    def _negative_is_negative(self) -> Formula:
        if self.negative_value is not None and self.negative_value > ZERO:
            raise ValueError("spec 7.2: the predefined negative value must not be positive")
        return self


class AtDeadline(StrEnum):
    """What happens to the held share when the deadline passes with no control event (2.15)."""

    RELEASE_HELD = "release_held"
    FORFEIT_HELD = "forfeit_held"


class Confirmation(Frozen):
    """When the verified actual value becomes final (spec 2.15, 9.17, 1.23)."""

    kind: Literal["immediate", "delayed"]
    deadline: Text = Field(description="the final confirmation deadline, in words (11.1)")
    control_event: Text | None = None
    control_source: Identifier | None = None
    observation_days: int | None = Field(default=None, gt=0, strict=True)
    escrow_share: Exact | None = Field(default=None, gt=0, le=1)
    late_indicators: tuple[Identifier, ...] = ()
    at_deadline: AtDeadline | None = None

    @model_validator(mode="after")
    def _delayed_is_complete(self) -> Confirmation:
        delayed_fields = (
            self.control_event,
            self.control_source,
            self.observation_days,
            self.escrow_share,
            self.at_deadline,
        )
        if self.kind == "delayed":
            if any(f is None for f in delayed_fields) or not self.late_indicators:
                raise ValueError(
                    "spec 2.15: a delayed confirmation needs control_event, control_source, "
                    "observation_days, escrow_share, late_indicators and at_deadline"
                )
        elif any(f is not None for f in delayed_fields) or self.late_indicators:
            raise ValueError("an immediate confirmation has no escrow fields")
        return self
