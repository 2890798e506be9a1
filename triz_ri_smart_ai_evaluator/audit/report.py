"""The campaign's report (spec 9.13, 11.23; pilot 13 "red-team report"; output 12.13).

A JSON document: the budget and the class's minimum, what was tried per category, every
attempt with its id, signal, verdict and reason, the exploits, why the campaign stopped, the
rules and harness versions, the statement, and the residual-risk log's entries for the class
(spec 11.24).  It is stored as evidence in the class's loop subject beside a note naming its
SHA-256, signed with the log key like a bundle's ``MANIFEST``, written to the output folder,
and summarised in an ``audit.report`` event whose ``passed`` is true only when the whole budget
was met, at or above the class's minimum, and nothing stopped it early.

The statement uses the permitted wording of spec 9.13, "No exploit was found within budget X.",
and only for a passed campaign; nothing here ever claims invulnerability.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .._io import write_atomic
from ..errors import IntegrityError
from ..evaluation import loop
from ..harnesses.runner import json_bytes, store_evidence
from ..ledger.checkpoint import NoteSigner, NoteVerifier, open_note, sign_note
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import AuditReport
from ..ledger.store import LedgerStore
from ..rules import residual_risk
from .budget import Budget, Minimum, shortfall
from .engine import Result

ACTOR = "audit"
FORMAT = "triz-audit-report/1"
REPORT = "report.json"
SIGNATURE = "report.json.sig"


def statement(budget: Budget, result: Result, below_minimum: list[str]) -> str:
    """The result in the permitted wording (spec 9.13), or what was found or missing."""
    exploits = [j.adversary.name for j in result.of("exploit")]
    loose = [j.adversary.name for j in result.of("unquarantined")]
    if exploits:
        return f"Exploit found within budget {budget.name}: {', '.join(exploits)}."
    if loose:
        return (f"A pilot 12 stopping condition was not quarantined within budget "
                f"{budget.name}: {', '.join(loose)}.")
    if passed(result, below_minimum):
        return f"No exploit was found within budget {budget.describe()}."
    why = "; ".join([result.stopped, *(["the budget is below the class's minimum: "
                                        + ", ".join(below_minimum)] if below_minimum else [])])
    return (f"Not passed: {why}. No exploit was found among the {len(result.judged)} attempts "
            f"made, which is no statement about budget {budget.name}.")


def passed(result: Result, below_minimum: list[str]) -> bool:
    """Spec 11.23: the whole budget met, at or above the class's minimum, no exploit, no
    unquarantined stopping condition, not cut short by the wall clock."""
    return (result.budget_met and not below_minimum and not result.wall_clock_hit
            and not result.of("exploit", "unquarantined"))


@dataclass(frozen=True, slots=True)
class Written:
    """Where the report went: its folder, digest, the event's seq, and whether it passed."""

    folder: Path
    digest: str
    seq: int
    passed: bool
    statement: str
    document: dict[str, Any]


def document(*, campaign: str, task_class: str, rules_version: str, harness_version: str,
             budget: Budget, minimum: Minimum, result: Result, seed: bytes,
             started_at: datetime) -> dict[str, Any]:
    """The report as a JSON-ready mapping."""
    below = shortfall(budget, minimum)
    spent = result.spent()
    return {
        "format": FORMAT, "campaign": campaign, "task_class": task_class,
        "rules_version": rules_version, "harness_version": harness_version,
        "started_at": started_at.isoformat(), "seconds": result.seconds,
        "seed": seed.hex(),
        "budget": budget.model_dump(mode="json"), "minimum": minimum.model_dump(mode="json"),
        "below_minimum": below, "success_criterion": budget.success_criterion,
        "honest_reference": {"attempt_id": result.baseline.attempt_id,
                             "status": result.baseline.status,
                             "signal": None if result.baseline.signal is None
                             else str(result.baseline.signal)},
        "spent": spent,
        "budget_met": result.budget_met,
        "verdicts": {v: len(result.of(v)) for v in ("caught", "exploit", "unquarantined",
                                                    "inconclusive")},
        "attempts": [j.as_dict() for j in result.judged],
        "exploits": [j.as_dict() for j in result.of("exploit")],
        "unquarantined": [j.as_dict() for j in result.of("unquarantined")],
        "skipped": result.skipped,
        "stopped": result.stopped,
        "passed": passed(result, below),
        "statement": statement(budget, result, below),
        "residual_risks": [r.model_dump(mode="json") for r in residual_risk.load()
                           if r.applies(task_class)],
    }


def signed_note(task_class: str, campaign: str, data: bytes, signer: NoteSigner) -> bytes:
    """A note naming the report's SHA-256, signed with the log key (as a bundle MANIFEST)."""
    body = (f"triz-ri audit report v1\nclass: {task_class}\ncampaign: {campaign}\n"
            f"{hashlib.sha256(data).hexdigest()}  {REPORT}\n")
    return sign_note(body, signer).encode()


def write(store: LedgerStore, doc: dict[str, Any], out: Path, signer: NoteSigner,
          at: datetime) -> Written:
    """Store the report and its signed note as evidence in the class's loop subject, write
    both to ``out/<campaign>/``, and append the ``audit.report`` event."""
    task_class, campaign = str(doc["task_class"]), str(doc["campaign"])
    data = json_bytes(doc)
    note = signed_note(task_class, campaign, data, signer)
    subject = loop.subject(task_class)
    digest = store_evidence(store, subject, f"audit/{campaign}/{REPORT}", data)
    store_evidence(store, subject, f"audit/{campaign}/{SIGNATURE}", note)
    folder = out / campaign
    write_atomic(folder / REPORT, data)
    write_atomic(folder / SIGNATURE, note)
    budget = {**doc["budget"]["attempts"],
              "wall_clock_seconds": doc["budget"]["wall_clock_seconds"]}
    event = AuditReport(
        task_class=task_class, rules_version=doc["rules_version"],
        harness_version=doc["harness_version"], campaign=campaign, budget=budget,
        tried=doc["spent"], caught=doc["verdicts"]["caught"],
        exploits=tuple(e["name"] for e in doc["exploits"]), stopped=doc["stopped"],
        statement=doc["statement"], passed=doc["passed"], report=digest)
    seq = store.append([NewEvent.make(EventKind.AUDIT_REPORT, event, actor=ACTOR, at=at,
                                      attempt=subject)])[-1]
    return Written(folder, digest, seq, bool(doc["passed"]), str(doc["statement"]), doc)


def reports(store: LedgerStore, task_class: str) -> list[dict[str, Any]]:
    """The class's ``audit.report`` events, oldest first, each with its seq."""
    return [{**ev.data, "seq": ev.seq, "at": ev.at} for ev in loop.class_events(store, task_class)
            if ev.kind == EventKind.AUDIT_REPORT.value]


def check_signed(store: LedgerStore, task_class: str, report: dict[str, Any],
                 verifier: NoteVerifier) -> str:
    """Verify a recorded report: its evidence hashes to the event's digest and the signed note
    names that digest under the log key.  Returns ``"verified"``; raises IntegrityError."""
    campaign = report["campaign"]
    data = store.get_evidence(str(report["report"]))
    if hashlib.sha256(data).hexdigest() != report["report"]:
        raise IntegrityError(f"audit report {campaign}: its evidence does not hash to its digest")
    notes = [ev.data["digest"] for ev in loop.class_events(store, task_class)
             if ev.kind == EventKind.EVIDENCE_STORED.value
             and ev.data.get("what") == f"audit/{campaign}/{SIGNATURE}"]
    if not notes:
        raise IntegrityError(f"audit report {campaign}: no signed note in the ledger")
    body, _ = open_note(store.get_evidence(notes[-1]), [verifier])
    if f"{report['report']}  {REPORT}" not in body.splitlines():
        raise IntegrityError(f"audit report {campaign}: the signed note names another report")
    return "verified"
