"""Trusted sources, performance indicators and benchmarks (spec 1.3-1.6, 2.4-2.7, 3.x, 4.x).

No I/O.  Invalid declarations cannot be constructed: an indicator without a measurement method,
a benchmark change "from the achieved level", a source the policy could write to - each is
refused with the specification section that forbids it.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema, field_validator, model_validator

from ._values import ONE, ZERO, Exact, Frozen, Identifier, Text, UtcInstant
from .vocabulary import IMPRESSION_TERMS, PROXY_TERMS, find_term


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
    """The evaluated policy's access to a source (spec 9.2, 9.3, 10.1 "access permissions").

    One vocabulary for the sources a task class declares and the records of the provenance
    register.  A task class may declare only :data:`DECLARABLE_POLICY_ACCESS`: a source the
    policy can change is not a source of verified actual values (spec 9.3) and cannot be
    declared.  The register records what a registered source really allows (``read``,
    ``write``), so that a confirmation from a source the policy could rewrite is refused (9.3
    second bullet).
    """

    NONE = "none"
    READ_PUBLIC_PART = "read_public_part"
    SUBMIT_ARTEFACT_ONLY = "submit_artefact_only"
    READ = "read"
    WRITE = "write"  # the policy could rewrite the record: never independent (9.3 second bullet)


#: What a task class may declare for its sources (spec 9.3: nothing the policy can write to).
DECLARABLE_POLICY_ACCESS: tuple[PolicyAccess, ...] = (
    PolicyAccess.NONE, PolicyAccess.READ_PUBLIC_PART, PolicyAccess.SUBMIT_ARTEFACT_ONLY,
)
#: What a provenance register record may say (9.3 last bullet, 10.1).
REGISTERED_POLICY_ACCESS: tuple[PolicyAccess, ...] = (
    PolicyAccess.NONE, PolicyAccess.READ, PolicyAccess.WRITE,
)


def _declarable(value: PolicyAccess) -> PolicyAccess:
    if value not in DECLARABLE_POLICY_ACCESS:
        allowed = ", ".join(repr(m.value) for m in DECLARABLE_POLICY_ACCESS)
        raise ValueError(f"policy access {value.value!r} cannot be declared for a trusted "
                         f"source (spec 9.3); use one of {allowed}")
    return value


#: The policy's access as a task class declares it; its JSON Schema lists only what may be declared.
DeclaredPolicyAccess = Annotated[
    PolicyAccess,
    AfterValidator(_declarable),
    WithJsonSchema({
        "title": "PolicyAccess",
        "description": "The evaluated policy's access to a source (spec 10.1, 9.2); nothing "
                       "that lets the policy write (spec 9.3).",
        "enum": [m.value for m in DECLARABLE_POLICY_ACCESS],
        "type": "string",
    }),
]


class TrustedSource(Frozen):
    """A component that creates or confirms a verified actual value (spec 9.3)."""

    id: Identifier
    component: Text
    kind: SourceKind
    policy_access: DeclaredPolicyAccess
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


class DomainKind(StrEnum):
    """What values an indicator's raw measurement can take (issue 10, spec 5.3, 4.6)."""

    PROPORTION = "proportion"  # a share: [0, 1]
    COUNT = "count"  # a whole number >= 0, unbounded above
    NON_NEGATIVE = "non_negative"  # a quantity >= 0 (time, size), unbounded above
    RANGE = "range"  # a bounded interval [low, high] stated by the class


class Domain(Frozen):
    """The declared domain of an indicator's raw value.

    A value outside it is refused, never clamped: a proportion of 100 would hide a 98 % loss
    elsewhere in a product, and two negative proportions would multiply into a bonus.
    """

    kind: DomainKind
    low: Exact | None = None
    high: Exact | None = None

    @model_validator(mode="after")
    def _bounds_match_kind(self) -> Domain:
        if self.kind is DomainKind.RANGE:
            if self.low is None or self.high is None or self.low >= self.high:
                raise ValueError("a range domain needs low < high")
        elif self.low is not None or self.high is not None:
            raise ValueError(f"a {self.kind.value} domain has fixed bounds; give no low/high")
        return self

    @property
    def lowest(self) -> Decimal:
        if self.kind is DomainKind.RANGE:
            assert self.low is not None
            return self.low
        return ZERO

    @property
    def highest(self) -> Decimal | None:
        """The upper bound, or None when the domain is unbounded above."""
        if self.kind is DomainKind.PROPORTION:
            return ONE
        if self.kind is DomainKind.RANGE:
            return self.high
        return None

    @property
    def integral(self) -> bool:
        return self.kind is DomainKind.COUNT

    def describe(self) -> str:
        if self.kind is DomainKind.PROPORTION:
            return "proportion [0, 1]"
        if self.kind is DomainKind.COUNT:
            return "count (a whole number >= 0)"
        if self.kind is DomainKind.NON_NEGATIVE:
            return "non-negative quantity (>= 0)"
        return f"range [{self.low}, {self.high}]"

    def contains(self, value: Decimal) -> bool:
        if value < self.lowest:
            return False
        highest = self.highest
        if highest is not None and value > highest:
            return False
        return not self.integral or value == value.to_integral_value()


class Indicator(Frozen):
    """A performance indicator (spec 1.3, 3.x): what is measured, by whom, how the AI moves it."""

    id: Identifier
    name: Text
    unit: Text
    direction: Direction
    domain: Domain = Field(description="the values the raw measurement can take (issue 10)")
    decrease_rule: DecreaseRule | None = None
    interval_rule: IntervalRule | None = None
    source: Identifier = Field(description="id of the trusted source producing the raw value")
    measurement_method: Text = Field(description="how the raw value is measured (3.8, 11.12)")
    controllability: Text = Field(description="which action of the AI moves it (2.4, 11.2)")

    @field_validator("measurement_method")
    @classmethod
    def _method_is_a_measurement(cls, value: str) -> str:
        term = find_term(value, IMPRESSION_TERMS)
        if term is not None:
            # spec 3.8 / 7.6 / 11.12: an impression is not a measurement method.
            raise ValueError(
                f"spec 3.8/11.12: the method reads as {term.name} ({value!r}), not a "
                "measurement; an unmeasurable characteristic gets no variable reward"
            )
        return value

    @model_validator(mode="after")
    def _not_a_proxy(self) -> Indicator:
        for field in ("id", "name", "unit", "measurement_method"):
            term = find_term(str(getattr(self, field)), PROXY_TERMS)
            if term is not None:
                # spec 3.3, 11.9: a proxy may not be substituted for the result.
                raise ValueError(
                    f"spec 3.3: indicator {self.id!r} measures a proxy ({term.name}, in its "
                    f"{field}); reward the result itself"
                )
        return self

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
