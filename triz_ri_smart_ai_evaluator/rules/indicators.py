"""Trusted sources, performance indicators and benchmarks (spec 1.3-1.6, 2.4-2.7, 3.x, 4.x).

No I/O.  Invalid declarations cannot be constructed: an indicator without a measurement method,
a benchmark change "from the achieved level", a source the policy could write to - each is
refused with the specification section that forbids it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ._values import ZERO, Exact, Frozen, Identifier, Text, UtcInstant


class SourceKind(StrEnum):
    """What kind of trusted component produces a raw value (spec 1.16, 9.3)."""

    HARNESS = "harness"
    RECEIVER = "receiver"
    VERIFIER_CODE = "verifier_code"
    VERIFIER_MODEL = "verifier_model"
    HUMAN_CHECKLIST = "human_checklist"
    EXTERNAL_SYSTEM = "external_system"
    LEDGER = "ledger"


class PolicyAccess(StrEnum):
    """The evaluated policy's access to a source (spec 10.1, 9.2).

    There is deliberately no member that lets the policy write or delete: a source the policy can
    change is not a source of verified actual values (spec 9.3) and cannot be declared.
    """

    NONE = "none"
    READ_PUBLIC_PART = "read_public_part"
    SUBMIT_ARTEFACT_ONLY = "submit_artefact_only"


class TrustedSource(Frozen):
    """A component that creates or confirms a verified actual value (spec 9.3)."""

    id: Identifier
    component: Text
    kind: SourceKind
    policy_access: PolicyAccess
    authentication: Text = Field(description="how the record's authenticity is established (2.16)")
    independence: Text = Field(description="why the policy cannot change or conceal its records")


class Direction(StrEnum):
    """Which way an indicator should move (spec 1.6)."""

    INCREASE = "increase"
    DECREASE = "decrease"
    INTERVAL = "interval"


class DecreaseRule(Frozen):
    """The predefined inverse rule for an indicator that should decrease (spec 1.6).

    Perf = E / F for F > 0; for F = 0 the class states the value in advance (``perf_at_zero``),
    because the ratio is undefined there and the rule may not be invented after the result.
    """

    kind: Literal["inverse_ratio"] = "inverse_ratio"
    perf_at_zero: Exact = Field(gt=0)


class IntervalRule(Frozen):
    """The predefined band rule for an indicator that should stay in a band (spec 1.6).

    Inside [low, high] of the benchmark Perf = 1; outside it falls linearly to 0 over the stated
    tolerance on each side.
    """

    kind: Literal["band"] = "band"
    tolerance_below: Exact = Field(gt=0)
    tolerance_above: Exact = Field(gt=0)


#: Words that, used as a measurement method, say that no measurement exists (spec 3.8, 11.12).
_IMPRESSION_WORDS = ("impression", "subjective", "gut feel", "overall feeling", "vibe", "opinion")


class Indicator(Frozen):
    """A performance indicator (spec 1.3, 3.x): what is measured, by whom, how the AI moves it."""

    id: Identifier
    name: Text
    unit: Text
    direction: Direction
    decrease_rule: DecreaseRule | None = None
    interval_rule: IntervalRule | None = None
    source: Identifier = Field(description="id of the trusted source producing the raw value")
    measurement_method: Text = Field(description="how the raw value is measured (3.8, 11.12)")
    controllability: Text = Field(description="which action of the AI moves it (2.4, 11.2)")

    @field_validator("measurement_method")
    @classmethod
    def _method_is_a_measurement(cls, value: str) -> str:
        lowered = value.lower()
        for word in _IMPRESSION_WORDS:
            if word in lowered:
                # spec 3.8 / 7.6 / 11.12: an impression is not a measurement method.
                raise ValueError(
                    f"spec 3.8/11.12: {word!r} is not a measurement method; an unmeasurable "
                    "characteristic gets no variable reward"
                )
        return value

    @model_validator(mode="after")
    def _rule_matches_direction(self) -> Indicator:
        wants_decrease = self.direction is Direction.DECREASE
        wants_interval = self.direction is Direction.INTERVAL
        if wants_decrease != (self.decrease_rule is not None):
            raise ValueError(
                "spec 1.6: an indicator that should decrease needs a predefined decrease_rule, "
                "and only such an indicator may have one"
            )
        if wants_interval != (self.interval_rule is not None):
            raise ValueError(
                "spec 1.6: an interval indicator needs a predefined interval_rule, "
                "and only such an indicator may have one"
            )
        return self


class BenchmarkGround(StrEnum):
    """Why a benchmark version exists.  After the first, only the grounds of spec 4.4."""

    INITIAL = "initial"
    FUNCTION_CHANGED = "function_changed"
    TOOL_CHANGED = "tool_changed"
    MANDATORY_STANDARD_CHANGED = "mandatory_standard_changed"
    PERMITTED_RESOURCE_CHANGED = "permitted_resource_changed"
    INPUT_CLASS_CHANGED = "input_class_changed"
    STATISTICS_SHOW_ERROR = "statistics_show_error"


#: Grounds people reach for that spec 4.2 and 2.7 forbid; named so the error can say why.
FORBIDDEN_GROUNDS = frozenset(
    {
        "achieved_level",
        "from_the_achieved_level",
        "attempt_result",
        "previous_attempt",
        "previous_success",
        "previous_failure",
        "last_result",
        "performance_of_attempt",
    }
)


class BenchmarkVersion(Frozen):
    """One version of a benchmark: the value, when it takes effect and on what ground (spec 2.6)."""

    version: int = Field(ge=1, strict=True)
    value: Exact | None = None
    low: Exact | None = None
    high: Exact | None = None
    effective_from: UtcInstant
    ground: BenchmarkGround
    justification: Text
    statistics_ref: Text | None = Field(
        default=None, description="evidence of the accumulated statistics (ground 4.4, last item)"
    )

    @field_validator("ground", mode="before")
    @classmethod
    def _ground_is_predefined(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower().replace(" ", "_") in FORBIDDEN_GROUNDS:
            # spec 4.2, 2.7, 8.5: raising or lowering the benchmark because of what an attempt
            # achieved makes concealing capabilities the rational strategy.
            raise ValueError(
                "spec 4.2: a benchmark may not be changed from the achieved level "
                f"(ground {value!r}); use one of the predefined grounds of 4.4"
            )
        return value

    @model_validator(mode="after")
    def _coherent(self) -> BenchmarkVersion:
        if (
            self.ground is BenchmarkGround.STATISTICS_SHOW_ERROR
            and self.statistics_ref is None
        ):
            raise ValueError(
                "spec 4.4: the ground statistics_show_error needs statistics_ref naming the data"
            )
        if self.value is None and (self.low is None or self.high is None):
            raise ValueError("a benchmark version needs value, or low and high for a band")
        if self.value is not None and (self.low is not None or self.high is not None):
            raise ValueError("a benchmark version has either value or low/high, not both")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError("benchmark band has low above high")
        return self


class Benchmark(Frozen):
    """The benchmark of one indicator as a sequence of versions (spec 2.6, 4.4, 10.5)."""

    indicator: Identifier
    versions: tuple[BenchmarkVersion, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _versions_in_order(self) -> Benchmark:
        first = self.versions[0]
        if first.ground is not BenchmarkGround.INITIAL or first.version != 1:
            raise ValueError("the first benchmark version must be version 1 with ground 'initial'")
        for before, after in zip(self.versions, self.versions[1:], strict=False):
            if after.version != before.version + 1:
                raise ValueError(
                    f"benchmark versions must be consecutive: {before.version} then {after.version}"
                )
            if after.effective_from <= before.effective_from:
                raise ValueError(
                    f"spec 10.5: benchmark version {after.version} must take effect after "
                    f"version {before.version}"
                )
            if after.ground is BenchmarkGround.INITIAL:
                raise ValueError(
                    f"spec 4.4: benchmark version {after.version} needs a ground of change, "
                    "not 'initial'"
                )
        for v in self.versions:
            if v.value is not None and v.value <= ZERO:
                raise ValueError(
                    f"benchmark version {v.version}: a ratio benchmark must be positive"
                )
        return self
