"""The signal and its transparent breakdown (spec 3.2, 6.7, 7.1, 10.1).

No I/O.  Small immutable values (named tuples: a signal is built for every attempt, and tuple
construction keeps the calculator fast enough for training loops).  ``to_dict`` gives the stable
JSON form documented in docs/signal.md, with every number as an exact decimal string.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from ..rules._values import format_exact


class Outcome(StrEnum):
    """The distinct outcomes of spec 6.7, kept apart so none can pass for another."""

    OBTAINED = "obtained"
    PARTIAL = "partial"
    NOT_OBTAINED = "not_obtained"
    QUALITY_VIOLATION = "quality_violation"
    CLAIMED_NOT_VERIFIED = "claimed_not_verified"
    NOT_VERIFIED = "not_verified"
    OBJECTIVELY_IMPOSSIBLE = "objectively_impossible"


class Status(StrEnum):
    """Whether an input counts as verified (spec 9.3): fail closed on anything but VERIFIED."""

    VERIFIED = "verified"
    MISSING = "missing"
    WRONG_SOURCE = "wrong_source"
    NO_EVIDENCE = "no_evidence"


def _num(value: Decimal | None) -> str | None:
    return None if value is None else format_exact(value)


class IndicatorLine(NamedTuple):
    id: str
    name: str
    unit: str
    direction: str
    role: str
    benchmark: str
    benchmark_version: int
    source: str
    status: Status
    verified_value: Decimal | None
    evidence: tuple[str, ...]
    performance: Decimal | None
    cap: Decimal | None
    minimum: Decimal | None
    below_minimum: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "unit": self.unit,
            "direction": self.direction,
            "role": self.role,
            "benchmark": self.benchmark,
            "benchmark_version": self.benchmark_version,
            "source": self.source,
            "status": self.status.value,
            "verified_value": _num(self.verified_value),
            "evidence": list(self.evidence),
            "performance": _num(self.performance),
            "cap": _num(self.cap),
            "minimum": _num(self.minimum),
            "below_minimum": self.below_minimum,
        }


class CheckLine(NamedTuple):
    """A checklist item or mandatory self-check and its verified state."""

    id: str
    kind: str  # "critical", "gate", "quality" or "self_check"
    status: Status
    state: str  # "passed", "failed", "degree", "performed", "omitted" or "unverified"
    score: Decimal | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status.value,
            "state": self.state,
            "score": _num(self.score),
        }


class BlockLine(NamedTuple):
    id: str
    performance: Decimal | None
    threshold: Decimal
    value: Decimal

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "performance": _num(self.performance),
            "threshold": _num(self.threshold),
            "value": _num(self.value),
        }


class Signal(NamedTuple):
    """A training signal with everything spec 3.2 requires to be visible to owner and auditor."""

    task_class: str
    rules_version: str
    functions: tuple[str, ...]
    model: str
    mode: str
    formula: str
    base_unit: Decimal
    indicators: tuple[IndicatorLine, ...]
    checks: tuple[CheckLine, ...]
    blocks: tuple[BlockLine, ...]
    quality_k: Decimal | None
    perf_overall: Decimal | None
    outcome: Outcome
    reasons: tuple[str, ...]
    critical_violation: bool
    claims: tuple[str, ...]
    obstacles: tuple[str, ...]
    cost_id: str | None
    cost: Decimal | None
    value: Decimal
    delayed: bool
    held: Decimal
    payable_now: Decimal
    #: "unchecked" when computed without a store (``signal compute``); "resolved" when every
    #: evidence digest was resolved against the trusted record before computing (issue 10).
    evidence_check: str = "unchecked"

    @property
    def final(self) -> Decimal | None:
        """The final signal, or None while part of it waits in escrow (spec 1.23)."""
        return None if self.delayed else self.value

    @property
    def verified(self) -> bool:
        return self.outcome not in (Outcome.NOT_VERIFIED, Outcome.CLAIMED_NOT_VERIFIED)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (docs/signal.md, "Signal JSON")."""
        return {
            "task_class": self.task_class,
            "rules_version": self.rules_version,
            "functions": list(self.functions),
            "model": self.model,
            "mode": self.mode,
            "training_use": self.mode != "shadow" and self.verified,
            "formula": self.formula,
            "base_unit": _num(self.base_unit),
            "outcome": self.outcome.value,
            "reasons": list(self.reasons),
            "critical_violation": self.critical_violation,
            "verified": self.verified,
            "evidence": self.evidence_check,
            "indicators": [line.to_dict() for line in self.indicators],
            "checks": [line.to_dict() for line in self.checks],
            "blocks": [line.to_dict() for line in self.blocks],
            "quality_k": _num(self.quality_k),
            "perf_overall": _num(self.perf_overall),
            "claims": {"recorded": list(self.claims), "counted_as_evidence": False},
            "obstacles": list(self.obstacles),
            "cost": {
                "id": self.cost_id,
                "value": _num(self.cost),
                "comparable": self.cost is not None,
            },
            "signal": {
                "value": _num(self.value),
                "preliminary": _num(self.value) if self.delayed else None,
                "held": _num(self.held),
                "payable_now": _num(self.payable_now),
                "final": _num(self.final),
            },
        }
