"""The register's state as a fold over ledger events (spec 9.15, 10.4, 1.17).  No I/O.

The ledger is the only truth: :class:`RegisterState` is rebuilt by applying events in order, and
the register applies the events it has just appended through the same :meth:`apply`, so the
state in memory is always a projection of the log, never a separate mutable record.  Malformed
or contradictory events raise IntegrityError: the log does not hold.  Quarantine changes of
other subjects (a verifier version, a checkpoint: spec 1.22) belong to other modules and are
skipped; every other provenance kind is this module's alone, so a foreign schema there is loud.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import IntegrityError
from ..ledger.events import EventKind
from .decision import Decision, EchoMatch, ProvenanceRules, Reason, Status
from .fingerprint import METHOD, Fingerprint, NearDuplicateIndex
from .models import SourceRecord, parse_enum, verify_instant, verify_text
from .records import (
    ConfirmationEntry,
    PolicyOutput,
    Reconciliation,
    SourceRevision,
)

#: Recomputes a fingerprint from stored evidence when the ledger holds one made with other
#: MinHash parameters: (event kind, evidence digest) -> fingerprint with the current METHOD.
Refingerprint = Callable[[str, str], Fingerprint]

_IMMUTABLE = ("id", "created_at", "origin")


class RegisterState:
    """Sources, policy outputs and confirmations as the ledger records them."""

    def __init__(self, rules: ProvenanceRules) -> None:
        self.rules = rules
        self.size = 0  # the last ledger position applied
        self._sources: dict[str, list[SourceRevision]] = {}
        self._attempts: dict[str, datetime] = {}
        self._outputs: dict[str, PolicyOutput] = {}
        self._output_index = NearDuplicateIndex(rules.min_matches, rules.min_tokens)
        self._entries: dict[str, ConfirmationEntry] = {}
        self._by_attempt: dict[str, list[str]] = {}
        self._entry_index = NearDuplicateIndex(rules.min_matches, rules.min_tokens)
        self._echoes: list[dict[str, Any]] = []

    # -- queries ----------------------------------------------------------------------------
    def current_source(self, source_id: str) -> SourceRecord | None:
        history = self._sources.get(source_id)
        return history[-1].record if history else None

    def source_history(self, source_id: str) -> tuple[SourceRevision, ...]:
        return tuple(self._sources.get(source_id, ()))

    def source_ids(self) -> tuple[str, ...]:
        return tuple(self._sources)

    def attempt_seen(self, attempt: str) -> datetime | None:
        """When the ledger first recorded the attempt (an ``attempt.*`` or policy output)."""
        return self._attempts.get(attempt)

    def outputs(self) -> tuple[PolicyOutput, ...]:
        return tuple(self._outputs.values())

    def output(self, attempt: str, digest: str) -> PolicyOutput | None:
        return self._outputs.get(f"{attempt} {digest}")

    def entry(self, receipt: str) -> ConfirmationEntry | None:
        return self._entries.get(receipt)

    def entries(self, attempt: str | None = None) -> tuple[ConfirmationEntry, ...]:
        if attempt is None:
            return tuple(self._entries.values())
        return tuple(self._entries[r] for r in self._by_attempt.get(attempt, ()))

    def echoes_of(self, fp: Fingerprint) -> tuple[EchoMatch, ...]:
        """Policy outputs that ``fp`` repeats, exactly or as a near duplicate (8.14)."""
        return tuple(
            EchoMatch(self._outputs[key].attempt, self._outputs[key].output, how, equal)
            for key, how, equal in self._output_index.find(fp)
        )

    def confirmations_echoing(self, fp: Fingerprint) -> tuple[ConfirmationEntry, ...]:
        """Authenticated confirmations whose content ``fp`` (a policy output) matches."""
        return tuple(self._entries[key] for key, _, _ in self._entry_index.find(fp))

    def authenticated_repeat(self, confirmation_id: str) -> bool:
        """True if this exact signed statement was already received and authenticated."""
        return any(e.id == confirmation_id and e.decision.authenticated
                   for e in self._entries.values())

    def counted(self, attempt: str) -> tuple[ConfirmationEntry, ...]:
        """Counted confirmations of ``attempt``: the first per source (a source counts once).

        While a source is in quarantine, everything it confirmed is held back with it, also
        what was accepted before (1.22: data associated with the problem is excluded until the
        source is cleared; the entries keep their status and count again afterwards).
        """
        seen: set[str] = set()
        out = []
        for entry in self.entries(attempt):
            source = self.current_source(entry.source)
            if source is None or source.quarantined:
                continue
            if entry.counted and entry.source not in seen:
                seen.add(entry.source)
                out.append(entry)
        return tuple(out)

    def echo_collisions(self, attempt: str) -> tuple[ConfirmationEntry, ...]:
        """Echo collisions of ``attempt`` (ADR 0006): held back from :meth:`counted`, usable
        only where they lower the policy's signal.  Like counted entries, nothing a source in
        quarantine said is offered (1.22)."""
        out = []
        for entry in self.entries(attempt):
            source = self.current_source(entry.source)
            if source is not None and not source.quarantined and entry.echo_collision:
                out.append(entry)
        return tuple(out)

    # -- the fold ---------------------------------------------------------------------------
    def apply(self, seq: int, fields: dict[str, Any], refingerprint: Refingerprint | None = None,
              ) -> None:
        """Apply one parsed ledger event.  Raises IntegrityError if it contradicts the state."""
        if seq != self.size + 1:
            raise IntegrityError(f"event {seq}: expected event {self.size + 1} next")
        kind, data, attempt = fields["kind"], fields["data"], fields["attempt"]
        try:
            if kind in (EventKind.SOURCE_REGISTERED, EventKind.SOURCE_AMENDED):
                self._apply_source(seq, fields)
            elif kind == EventKind.POLICY_OUTPUT:
                fp = self._fingerprint(kind, data["fingerprint"], data["output"], refingerprint)
                output = PolicyOutput(attempt, data["output"], fp, seq)
                self._outputs.setdefault(output.key, output)
                self._output_index.add(output.key, fp)
            elif kind == EventKind.CONFIRMATION_RECEIVED:
                self._apply_confirmation(seq, fields, refingerprint)
            elif kind == EventKind.QUARANTINE_CHANGED and data.get("subject") == "confirmation":
                self._apply_quarantine(seq, fields)
            elif kind == EventKind.QUARANTINE_CHANGED and data.get("subject") == "source":
                # A notice only: the source's revision is the truth; they must agree.
                history = self._sources[data["source"]]
                record = history[max(0, data["revision"] - 1)].record
                if record.revision != data["revision"] or record.quarantined != (
                    data["status"] == "quarantined"
                ):
                    raise IntegrityError("source quarantine event disagrees with its revision")
            elif kind == EventKind.ECHO_DETECTED:
                self._echoes.append({"seq": seq, **data})
        except (KeyError, TypeError, IndexError, AttributeError) as e:
            raise IntegrityError(f"event {seq} ({kind}): malformed provenance data: {e!r}") from e
        if attempt is not None and (kind.startswith("attempt.") or kind == EventKind.POLICY_OUTPUT):
            self._attempts.setdefault(attempt, verify_instant(fields["at"], "time", IntegrityError))
        self.size = seq

    def _fingerprint(self, kind: str, data: object, digest: str,
                     refingerprint: Refingerprint | None) -> Fingerprint:
        fp = Fingerprint.from_data(data, IntegrityError)
        if fp.method == METHOD:
            return fp
        if refingerprint is None:
            raise IntegrityError(f"fingerprint made by {fp.method!r}, not {METHOD!r}")
        return refingerprint(kind, digest)

    def _apply_source(self, seq: int, fields: dict[str, Any]) -> None:
        record = SourceRecord.from_data(fields["data"]["source"], IntegrityError)
        history = self._sources.get(record.id)
        if fields["kind"] == EventKind.SOURCE_REGISTERED:
            if history or record.revision != 1:
                raise IntegrityError(f"source {record.id!r} registered twice")
            change = "registered"
        else:
            if not history or record.revision != history[-1].record.revision + 1:
                raise IntegrityError(f"source {record.id!r}: amendment out of order")
            for name in _IMMUTABLE:
                if getattr(record, name) != getattr(history[-1].record, name):
                    raise IntegrityError(f"source {record.id!r}: {name} cannot be amended")
            if history[-1].record.synthetic and not record.synthetic:
                raise IntegrityError(f"source {record.id!r}: the synthetic label was removed")
            change = verify_text(fields["data"]["change"], "change", IntegrityError)
        revision = SourceRevision(record, seq, fields["at"], fields["actor"], change)
        self._sources.setdefault(record.id, []).append(revision)

    def _apply_confirmation(self, seq: int, fields: dict[str, Any],
                            refingerprint: Refingerprint | None) -> None:
        data = fields["data"]
        head = data["confirmation"]
        if head["attempt"] != fields["attempt"] or data["receipt"] in self._entries:
            raise IntegrityError(f"event {seq}: confirmation attempt or receipt is inconsistent")
        decision = Decision.from_data(data["decision"], IntegrityError)
        entry = ConfirmationEntry(
            receipt=data["receipt"], id=head["id"], source=head["source"],
            attempt=head["attempt"],
            issued_at=verify_instant(head["issued_at"], "issue time", IntegrityError),
            received_at=fields["at"], content_sha256=head["content_sha256"],
            signature=head["signature"], free_text=bool(data["free_text"]),
            fingerprint=self._fingerprint(fields["kind"], data["fingerprint"],
                                          head["content_sha256"], refingerprint),
            decision=decision, seq=seq, status=decision.status, reasons=decision.reasons,
        )
        self._entries[entry.receipt] = entry
        self._by_attempt.setdefault(entry.attempt, []).append(entry.receipt)
        if decision.authenticated:
            self._entry_index.add(entry.receipt, entry.fingerprint)

    def _apply_quarantine(self, seq: int, fields: dict[str, Any]) -> None:
        data = fields["data"]
        entry = self._entries[data["receipt"]]
        status = parse_enum(Status, data["status"], "status", IntegrityError)
        reasons = tuple(parse_enum(Reason, r, "reason", IntegrityError) for r in data["reasons"])
        if status is Status.QUARANTINED:
            # Newly quarantined after acceptance (a later copy or policy output), or the
            # notice of the initial decision itself; a reconciled entry is not reopened.
            if entry.status not in (Status.ACCEPTED, Status.QUARANTINED):
                raise IntegrityError(f"event {seq}: a reconciled confirmation was re-quarantined")
            merged = tuple(r for r in Reason if r in set(entry.reasons) | set(reasons))
            self._entries[entry.receipt] = replace(entry, status=status, reasons=merged)
            return
        if entry.status is not Status.QUARANTINED or status not in (Status.RELEASED,
                                                                     Status.REJECTED):
            raise IntegrityError(f"event {seq}: only a quarantined confirmation is reconciled")
        rec = data["reconciliation"]
        reconciliation = Reconciliation(status, rec["note"], rec["evidence"], fields["actor"],
                                        fields["at"], seq)
        self._entries[entry.receipt] = replace(entry, status=status,
                                               reconciliation=reconciliation)

    # -- comparison -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything the state holds as plain data: equal snapshots mean equal states."""
        return {
            "size": self.size,
            "rules": self.rules.to_data(),
            "sources": {
                sid: [{"record": r.record.to_data(), "seq": r.seq, "at": r.at, "actor": r.actor,
                       "change": r.change} for r in history]
                for sid, history in self._sources.items()
            },
            "attempts": {a: t.isoformat() for a, t in self._attempts.items()},
            "outputs": {k: [o.seq, o.fingerprint.to_data()] for k, o in self._outputs.items()},
            "confirmations": {r: e.to_data() for r, e in self._entries.items()},
            "echoes": list(self._echoes),
        }

