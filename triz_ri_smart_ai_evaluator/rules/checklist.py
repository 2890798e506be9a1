"""Quality checklist items and mandatory self-checks (spec 1.8-1.9, 2.8, 2.14, 6.x).

No I/O.  Every item names its verification method and data source (spec 6.2), so a vague item
("the response is good", spec 6.3) cannot be expressed; the known vague phrasings are also refused
by name so the author learns why.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from ._values import Frozen, Identifier, Text


class VerificationKind(StrEnum):
    """How an item's state is established.  Each is a mechanical or protocol-bound check."""

    AUTOMATED_TEST = "automated_test"
    RECEIVER_RECORD = "receiver_record"
    HTTP_PROBE = "http_probe"
    HASH_COMPARISON = "hash_comparison"
    STATIC_ANALYSIS = "static_analysis"
    SOURCE_COMPARISON = "source_comparison"
    SCHEMA_VALIDATION = "schema_validation"
    SANDBOX_RECORD = "sandbox_record"
    LEDGER_RECORD = "ledger_record"
    #: spec 8.9: human evaluation only as a predefined checklist with examples and counterexamples.
    HUMAN_CHECKLIST = "human_checklist"


class Severity(StrEnum):
    CRITICAL = "critical"
    MAJOR = "major"
    MINOR = "minor"


class Effect(StrEnum):
    """The rule for an item's effect on the signal (spec 6.2, 5.4, 7.2)."""

    #: A critical requirement (spec 5.5): failing it sets S to the predefined negative value or 0.
    CRITICAL = "critical"
    #: A completed/not completed gate (spec 5.4): failing it sets S to 0.
    GATE = "gate"
    #: Counts towards the quality coefficient K (spec 7.1-7.3).
    QUALITY = "quality"


class Verification(Frozen):
    kind: VerificationKind
    procedure: Text
    examples: tuple[Text, ...] = ()
    counterexamples: tuple[Text, ...] = ()

    @model_validator(mode="after")
    def _human_needs_examples(self) -> Verification:
        if self.kind is VerificationKind.HUMAN_CHECKLIST and not (
            self.examples and self.counterexamples
        ):
            raise ValueError(
                "spec 8.9: a human checklist item needs examples and counterexamples"
            )
        return self


#: The vague requirements spec 6.3 lists, as patterns.
_VAGUE = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bresponse is good\b",
        r"\b(is|be|was) good\b",
        r"\bshowed initiative\b",
        r"\binitiative\b",
        r"\bprofessional\b",
        r"\bloyal(ty)?\b",
        r"\b(was |is )?liked\b",
        r"\bcompany'?s interests?\b",
        r"\bhigh[- ]quality\b",
        r"\bteam spirit\b",
        r"\bcorporate values?\b",
    )
)


def vague_phrase(text: str) -> str | None:
    """Return the vague phrase of spec 6.3 that ``text`` uses, or None."""
    for pattern in _VAGUE:
        found = pattern.search(text)
        if found:
            return found.group(0)
    return None


class ChecklistItem(Frozen):
    """One verifiable requirement of the quality standard (spec 6.2)."""

    id: Identifier
    requirement: Text
    verification: Verification
    data_source: Identifier
    severity: Severity
    effect: Effect

    @field_validator("requirement")
    @classmethod
    def _not_vague(cls, value: str) -> str:
        phrase = vague_phrase(value)
        if phrase is not None:
            raise ValueError(
                f"spec 6.3: vague requirement ({phrase!r}); define it through a verifiable "
                "characteristic"
            )
        return value

    @model_validator(mode="after")
    def _critical_is_not_compensable(self) -> ChecklistItem:
        # spec 5.5: critical requirements are never offset by anything else.
        if (self.severity is Severity.CRITICAL) != (self.effect is Effect.CRITICAL):
            raise ValueError(
                "spec 5.5: an item of severity critical has effect critical, and only such an item"
            )
        return self


class SelfCheck(Frozen):
    """A mandatory self-check (spec 2.14, 6.9): omitting it makes the solution inadmissible."""

    id: Identifier
    check: Text
    evidence: Text = Field(description="the artefact that shows the check was performed")
    data_source: Identifier

    @field_validator("check")
    @classmethod
    def _not_vague(cls, value: str) -> str:
        phrase = vague_phrase(value)
        if phrase is not None:
            raise ValueError(f"spec 6.3: vague self-check ({phrase!r})")
        return value
