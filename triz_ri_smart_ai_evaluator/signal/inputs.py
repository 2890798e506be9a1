"""What the calculator may see about an attempt: verified values and their evidence, nothing else.

No I/O.  The input type has no field for response length, step count, tool calls, formatting or
tone (spec 3.3, 11.9): unknown fields are refused, so a process characteristic cannot reach the
signal.  Claims ("ready", "fixed", "verified") are carried only to be recorded as claims; they are
never evidence (spec 6.8, 8.8, 11.10).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from ..rules._values import ONE, ZERO, Exact, Frozen, Identifier, Text

Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""SHA-256 (lower-case hex) of a stored piece of result evidence."""


class Measurement(Frozen):
    """An original measurement: the raw value, the trusted source, the evidence behind it."""

    value: Exact
    source: Identifier
    evidence: tuple[Digest, ...] = ()


class ItemState(Frozen):
    """The verified state of one checklist item (spec 1.9): completed, not, or a degree."""

    state: Literal["passed", "failed", "degree"]
    degree: Exact | None = Field(default=None, ge=0, le=1)
    source: Identifier
    evidence: tuple[Digest, ...] = ()

    @model_validator(mode="after")
    def _degree_only_for_degree(self) -> ItemState:
        if (self.state == "degree") != (self.degree is not None):
            raise ValueError("a degree is given exactly when state is 'degree'")
        return self

    @property
    def score(self) -> Exact:
        if self.state == "passed":
            return ONE
        if self.state == "failed":
            return ZERO
        assert self.degree is not None  # guaranteed by the validator
        return self.degree


class SelfCheckState(Frozen):
    """Whether a mandatory self-check was performed, with the artefact that shows it (6.9)."""

    performed: bool
    source: Identifier
    evidence: tuple[Digest, ...] = ()


class ObstacleKind(StrEnum):
    """Uncontrollable obstacles of spec 6.5 and 11.11."""

    EXTERNAL_TOOL_FAILURE = "external_tool_failure"
    SOURCE_UNAVAILABLE = "source_unavailable"
    INPUT_DATA_MISSING = "input_data_missing"
    CONTRADICTORY_TASK = "contradictory_task"


class Obstacle(Frozen):
    """An obstacle recorded by a trusted source, and whether the standard for it was followed.

    It names the indicators it kept from being measured: it may neutralise only those (spec
    6.5), never a verified critical violation (5.5) or an indicator it does not name.
    """

    kind: ObstacleKind
    indicators: tuple[Identifier, ...] = Field(min_length=1)
    recorded_by: Identifier
    description: Text
    standard_followed: bool
    evidence: tuple[Digest, ...] = ()


class AttemptInputs(Frozen):
    """Everything the signal of one attempt may depend on (spec 10.1, 10.3)."""

    measurements: dict[Identifier, Measurement] = Field(default_factory=dict)
    checklist: dict[Identifier, ItemState] = Field(default_factory=dict)
    self_checks: dict[Identifier, SelfCheckState] = Field(default_factory=dict)
    costs: dict[Identifier, Exact] = Field(default_factory=dict)
    obstacles: tuple[Obstacle, ...] = ()
    claims: tuple[Annotated[str, StringConstraints(max_length=2000)], ...] = ()
