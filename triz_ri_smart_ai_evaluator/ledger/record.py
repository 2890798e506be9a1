"""The spec 10.1 record of one attempt, assembled from its events, and the structured list of
its violations that the award records.

No I/O: the caller passes the attempt's events (``LedgerStore.attempt_events``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InputError
from ..rules._values import DECIMAL_CONTEXT as CTX
from ..rules._values import ONE, ZERO, format_exact
from ..rules.formula import Model
from ..rules.versions import PinnedRules
from ..signal.result import Signal, Status
from .events import OUTCOME_KINDS, Event, EventKind
from .payloads import (
    Payload,
    RawClaim,
    RawCost,
    RawIndicator,
    RawLateIndicator,
    RawSelfCheck,
    payload_of,
)


def violations(signal: Signal, pinned: PinnedRules) -> list[dict[str, Any]]:
    """Every violation of the attempt (spec 10.1), from the signal's check lines, not only the
    one that decided the outcome: each verified critical item not passed, each verified gate
    not passed, each mandatory self-check omitted (or unverified) and, for the gate model, K
    below the mandatory level (spec 5.4, 5.5, 6.9, 7.2).  Sorted by kind, then id."""
    found: list[dict[str, Any]] = []
    quality = []
    for c in signal.checks:
        verified = c.status is Status.VERIFIED
        if c.kind == "self_check" and c.state != "performed":
            found.append({"kind": "self_check_omitted", "id": c.id})
        elif c.kind == "critical" and verified and c.state != "passed":
            found.append({"kind": "critical_violation", "id": c.id})
        elif c.kind == "gate" and verified and c.state != "passed":
            found.append({"kind": "gate_failed", "id": c.id})
        elif c.kind == "quality" and verified and c.score is not None:
            quality.append(c.score)
    formula = pinned.task_class.formula
    if formula.model is Model.GATE:
        # K as the calculator defines it (spec 6.6): the mean of the verified quality scores.
        k = signal.quality_k
        if k is None:
            k = CTX.divide(sum(quality, ZERO), CTX.create_decimal(len(quality))) if quality else ONE
        if k < formula.quality_minimum:
            found.append({"kind": "quality_below_minimum", "id": "K", "k": format_exact(k),
                          "minimum": format_exact(formula.quality_minimum)})
    return sorted(found, key=lambda v: (v["kind"], v["id"]))


_RECORD_FIELDS = (
    "task_class",
    "attempt_id",
    "task_version",
    "functions",
    "indicators",
    "benchmarks",
    "control_ids",
    "sources",
    "policy_access",
    "checklist",
    "self_checks",
    "formula",
    "verifier_version",
    "rules_version",
)


def attempt_record(events: Iterable[Event]) -> dict[str, Any]:
    """Every field of spec 10.1 for one attempt, assembled from its events.  Raises
    InputError for an attempt with no events, IntegrityError naming the event when a raw
    measurement does not fit its model."""
    record: dict[str, Any] = {
        "measurements": [],
        "evidence": [],
        "verifier_decisions": [],
        "comments": [],
        "violations": [],
        "evidence_resolution": None,
        "rework": None,
        "mandatory_checks_done": [],
        "costs": {},
        "claims": [],
        "preliminary_values": {},
        "final_values": {},
        "performance": {},
        "signal": {"preliminary": None, "held": None, "final": None},
        "escrow": [],
        "included_in_training": False,
        "quarantine": "clear",
        "status": None,
        "events": [],
    }
    for event in events:
        f = event.fields
        kind, data = f["kind"], f["data"]
        record["events"].append({"seq": event.seq, "kind": kind, "at": f["at"]})
        if kind == EventKind.ATTEMPT_INITIATED.value:
            for key in _RECORD_FIELDS:
                record[key] = data.get(key)
            record["instance"] = data.get("instance") or f["attempt"]
            record["status"] = "initiated"
        elif kind == EventKind.MEASUREMENT_RAW.value:
            _measurement(record, payload_of(event))
        elif kind == EventKind.EVIDENCE_STORED.value:
            record["evidence"].append(data)
        elif kind == EventKind.EVIDENCE_RESOLVED.value:
            record["evidence_resolution"] = data
        elif kind == EventKind.VERIFIER_DECISION.value:
            record["verifier_decisions"].append(data)
        elif kind == EventKind.INDICATORS_COMPUTED.value:
            record["performance"] = data["performance"]
            # spec 10.1: a self-check counts as done once verified, evidence resolved
            # (the computed state), not because the raw input says it was performed.
            record["mandatory_checks_done"] = sorted(
                i for i, state in data.get("checks", {}).items() if state == "performed")
        elif kind == EventKind.AWARD_DECISION.value:
            record["signal"] = {k: data.get(k) for k in ("preliminary", "held", "final")}
            record["signal"]["value"] = data.get("value")
            record["outcome"] = data.get("outcome")
            record["violations"] = (data["violations"] if "violations" in data
                                    else _legacy_violations(data.get("reasons", [])))
            record["rework"] = data.get("rework")
        elif kind in (
            EventKind.ESCROW_HELD.value,
            EventKind.ESCROW_RELEASED.value,
            EventKind.ESCROW_ADJUSTED.value,
        ):
            record["escrow"].append({"kind": kind, **data})
            if kind != EventKind.ESCROW_HELD.value:
                record["signal"]["final"] = data.get("final")
        elif kind == EventKind.COMMENT_ADDED.value:
            record["comments"].append(data)
        elif kind == EventKind.QUARANTINE_CHANGED.value:
            record["quarantine"] = data.get("status", "quarantined")
        elif kind == EventKind.TRAINING_INCLUDED.value:
            record["included_in_training"] = bool(data.get("included", True))
        if kind in OUTCOME_KINDS:
            record["status"] = kind.removeprefix("attempt.")
    if record["status"] is None:
        raise InputError("no such attempt in the ledger")
    return record


_LEGACY_REASONS = (
    ("critical violation: ", "critical_violation"),
    ("gate failed: ", "gate_failed"),
    ("mandatory self-check omitted: ", "self_check_omitted"),
)


def _legacy_violations(reasons: Iterable[str]) -> list[dict[str, Any]]:
    """Violations of an award written before they were recorded as data: what its reasons
    name (only the ones that decided its outcome)."""
    found = [{"kind": kind, "id": r.removeprefix(prefix)}
             for r in reasons for prefix, kind in _LEGACY_REASONS if r.startswith(prefix)]
    return sorted(found, key=lambda v: (v["kind"], v["id"]))


def _measurement(record: dict[str, Any], raw: Payload) -> None:
    record["measurements"].append(raw.to_data())
    if isinstance(raw, RawIndicator):
        record["preliminary_values"][raw.id] = raw.value
        record["final_values"][raw.id] = raw.value
    elif isinstance(raw, RawLateIndicator):
        record["final_values"][raw.id] = raw.value
    elif isinstance(raw, RawSelfCheck) and raw.performed and raw.evidence:
        record["mandatory_checks_done"].append(raw.id)
    elif isinstance(raw, RawCost):
        record["costs"][raw.id] = raw.value
    elif isinstance(raw, RawClaim):
        record["claims"].append(raw.text)
