"""What each side may see of a task class and an attempt.  Pure projections; no I/O.

The public part of a task class (spec 2.13, 4.1) is what the evaluated policy must know to do the
work: the function and result, the indicators' names, units and directions (with what moves them),
the benchmarks in force, the quality standard's requirements, the mandatory self-checks, the
calculation rule and the actions it may take.  It is built by *listing* public fields, never by
removing private ones, so a field added to the task-class model later stays hidden until someone
decides it is public.  Left out: the trusted sources (their components, authentication and
independence arguments), measurement methods and verification procedures with their examples
(they describe the tests), the threat model (it describes the protections), and of course every
control case, expected answer and the check schedule, which the task class does not hold at all
(4.1: transparency of the rule does not mean transparency of every test instance).

The policy's view of its own attempt holds the status, the class and rules version, the hash of
its artefact and, once awarded, the final signal; never control-data ids, measurements, evidence,
verifier internals, reasons, quarantine state or the schedule (4.1, 9.6, 9.7).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from ..ledger.events import OUTCOME_KINDS, Event, EventKind
from ..rules._values import format_exact
from ..rules.task_class import TaskClass
from ..rules.versions import PinnedRules

#: ``evidence.stored`` ``what`` of the artefact a policy handed in; its ``submitted_by`` is the
#: attempt's owner for scope ``own``.
ARTEFACT = "artefact"
SIGNED_REQUEST = "signed_request"


def public_task(tc: TaskClass, pinned: PinnedRules, *,
                permitted_actions: Iterable[str]) -> dict[str, Any]:
    """The public part of a task class with the benchmarks in force at the pinned time."""
    return {
        "class_id": tc.id,
        "title": tc.title,
        "rules_version": pinned.version,
        "functions": [
            {"id": f.id, "description": f.description, "result": f.result} for f in tc.functions
        ],
        "result": tc.result,
        "indicators": [
            {"id": i.id, "name": i.name, "unit": i.unit, "direction": i.direction.value,
             "controllability": i.controllability}
            for i in tc.indicators
        ],
        "benchmarks": {
            ind: {"version": bm.version, "value": _num(bm.value), "low": _num(bm.low),
                  "high": _num(bm.high), "effective_from": bm.effective_from.isoformat()}
            for ind, bm in sorted(pinned.benchmarks.items())
        },
        "evidence": [{"id": e.id, "description": e.description} for e in tc.evidence],
        "checklist": [
            {"id": c.id, "requirement": c.requirement, "severity": c.severity.value,
             "effect": c.effect.value}
            for c in tc.checklist
        ],
        "self_checks": [
            {"id": s.id, "check": s.check, "evidence": s.evidence} for s in tc.self_checks
        ],
        "combination": _combination(tc),
        "formula": {
            "model": tc.formula.model.value,
            "base_unit": _num(tc.formula.base_unit),
            "quality_minimum": _num(tc.formula.quality_minimum),
            "negative_value": _num(tc.formula.negative_value),
            "neutral": tc.formula.neutral.value,
            "mode": tc.formula.mode.value,
            "rework": tc.formula.rework,
        },
        "confirmation": {
            "kind": tc.confirmation.kind,
            "deadline": tc.confirmation.deadline,
            "escrow_share": _num(tc.confirmation.escrow_share),
        },
        "permitted_actions": sorted(permitted_actions),
    }


def _combination(tc: TaskClass) -> dict[str, Any]:
    c = tc.combination
    return {
        "multiplied": list(c.multiplied),
        "blocks": [
            {"id": b.id, "indicators": list(b.indicators), "threshold": _num(b.threshold)}
            for b in c.blocks
        ],
        "reported_only": list(c.reported_only),
        "thresholds": [{"indicator": t.indicator, "minimum": _num(t.minimum)}
                       for t in c.thresholds],
        "caps": [{"indicator": k.indicator, "maximum": _num(k.maximum)} for k in c.caps],
    }


def _num(value: object) -> str | None:
    return None if value is None else str(value)


def of_kind(events: Iterable[Event], kind: EventKind) -> list[dict[str, Any]]:
    """The data of an attempt's events of one kind, in ledger order."""
    return [e.data for e in events if e.kind == kind.value]


def owner_of(events: Iterable[Event]) -> str | None:
    """Who handed in the attempt's artefact: the first ``evidence.stored`` artefact's submitter.
    None when the attempt did not come through the policy port (fail closed for scope own)."""
    for data in of_kind(events, EventKind.EVIDENCE_STORED):
        if data.get("what") == ARTEFACT:
            submitter = data.get("submitted_by")
            return submitter if isinstance(submitter, str) else None
    return None


def status_of(events: Iterable[Event]) -> str | None:
    """``initiated``, an outcome (``completed``, ``errored``, ...), or None if not initiated."""
    status = None
    for e in events:
        if e.kind == EventKind.ATTEMPT_INITIATED.value:
            status = "initiated"
        elif e.kind in OUTCOME_KINDS:
            status = e.kind.removeprefix("attempt.")
    return status


def final_award(events: Iterable[Event]) -> dict[str, Any]:
    """The attempt's final signal as training may use it (spec 9.17, 9.11).

    ``final`` is the settled value after escrow when the class delays confirmation, else the
    award's final part; it is None while held, when the award is not verified, or while the
    attempt is in quarantine.
    """
    listed = list(events)
    awards = of_kind(listed, EventKind.AWARD_DECISION)
    award = awards[-1] if awards else None
    final = None if award is None else award.get("final")
    for e in listed:
        if e.kind in (EventKind.ESCROW_RELEASED.value, EventKind.ESCROW_ADJUSTED.value):
            final = e.data.get("final")
    quarantine = quarantine_of(listed)
    verified = bool(award and award.get("verified"))
    usable = final is not None and verified and quarantine == "clear"
    return {
        "final": final if usable else None,
        "credited": _credited(listed, award, final) if usable else None,
        "verified": verified,
        "rules_version": None if award is None else award.get("rules_version"),
        "training_use": None if award is None else award.get("training_use"),
    }


def _credited(events: list[Event], award: Mapping[str, Any] | None, final: Any) -> str | None:
    """What the attempt adds to its task instance's signal (spec 3.5, 8.6, 11.6): the award's
    rework credit, moved by the escrow settlement when this attempt is the one that consumed
    the instance, so an instance's credits always add up to its final signal."""
    rework = None if award is None else award.get("rework")
    if not isinstance(rework, Mapping) or rework.get("credited") is None:
        return None
    credited = Decimal(str(rework["credited"]))
    initiated = next(iter(of_kind(events, EventKind.ATTEMPT_INITIATED)), {})
    if rework.get("consumed_by") == initiated.get("attempt_id") and award is not None:
        credited += Decimal(str(final)) - Decimal(str(award.get("value")))
    return format_exact(credited)


def quarantine_of(events: Iterable[Event]) -> str:
    """The attempt's quarantine status: the last ``quarantine.changed`` for it, else clear."""
    status = "clear"
    for e in events:
        if e.kind == EventKind.QUARANTINE_CHANGED.value and e.data.get("subject") in (
            None, "attempt"
        ):
            status = str(e.data.get("status", "quarantined"))
    return status


def policy_status(attempt_id: str, events: Iterable[Event]) -> dict[str, Any]:
    """The sanitised status of an attempt for the policy that submitted it (see module doc)."""
    listed = list(events)
    initiated: Mapping[str, Any] = next(iter(of_kind(listed, EventKind.ATTEMPT_INITIATED)), {})
    award = final_award(listed)
    return {
        "attempt_id": attempt_id,
        "task_class": initiated.get("task_class"),
        "rules_version": initiated.get("rules_version"),
        "artefact_sha256": initiated.get("artefact_sha256"),
        "started_at": initiated.get("started_at"),
        "status": status_of(listed),
        "final_signal": award["final"],
    }


def started_at(events: Iterable[Event]) -> datetime | None:
    for data in of_kind(events, EventKind.ATTEMPT_INITIATED):
        return datetime.fromisoformat(str(data["started_at"]))
    return None
