"""Records the register's state is made of (spec 9.15, 8.15).  Frozen; no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .decision import COUNTED, Decision, Reason, Status, is_echo_collision
from .fingerprint import Fingerprint
from .models import SourceRecord


@dataclass(frozen=True, slots=True)
class SourceRevision:
    """One entry of a source's append-only change history (9.15 "the history of changes")."""

    record: SourceRecord
    seq: int
    at: str
    actor: str
    change: str  # "registered", or the amendment's stated reason


@dataclass(frozen=True, slots=True)
class PolicyOutput:
    """A fingerprinted output of the evaluated policy (8.14); the text itself is evidence."""

    attempt: str
    output: str  # evidence digest (SHA-256 of the UTF-8 text)
    fingerprint: Fingerprint
    seq: int

    @property
    def key(self) -> str:
        return f"{self.attempt} {self.output}"  # a space never occurs in either part


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """The result of reconciling a quarantined confirmation (9.15, 8.15)."""

    outcome: Status  # RELEASED or REJECTED
    note: str
    evidence: str | None  # digest of the verification record in the evidence store
    actor: str
    at: str
    seq: int


@dataclass(frozen=True, slots=True)
class ConfirmationEntry:
    """One received confirmation: what arrived, what was decided, where it stands now."""

    receipt: str  # unique per reception; the same statement may arrive more than once
    id: str
    source: str
    attempt: str
    issued_at: datetime
    received_at: str
    content_sha256: str
    signature: str | None
    free_text: bool
    fingerprint: Fingerprint
    decision: Decision
    seq: int
    status: Status
    reasons: tuple[Reason, ...]
    reconciliation: Reconciliation | None = None

    @property
    def counted(self) -> bool:
        return self.status in COUNTED

    @property
    def echo_collision(self) -> bool:
        """Quarantined now only because its content matches a policy output or another
        source's statement (whether at reception or later), authenticated at reception, and
        not rejected by a reconciliation: adverse evidence, never confirmation (ADR 0006)."""
        return self.status is Status.QUARANTINED and is_echo_collision(
            self.reasons, authenticated=self.decision.authenticated)

    def to_data(self) -> dict[str, Any]:
        rec = self.reconciliation
        return {
            "id": self.id, "source": self.source, "attempt": self.attempt, "seq": self.seq,
            "issued_at": self.issued_at.isoformat(), "received_at": self.received_at,
            "content_sha256": self.content_sha256, "signature": self.signature,
            "free_text": self.free_text, "fingerprint": self.fingerprint.to_data(),
            "decision": self.decision.to_data(), "status": self.status.value,
            "reasons": [r.value for r in self.reasons], "echo_collision": self.echo_collision,
            "reconciliation": None if rec is None else {
                "outcome": rec.outcome.value, "note": rec.note, "evidence": rec.evidence,
                "actor": rec.actor, "at": rec.at, "seq": rec.seq},
        }
