"""The provenance register: the I/O edge that writes decisions to the ledger (spec 9.15, 11.21).

Every method reads the ledger up to its end first (:meth:`ProvenanceRegister.refresh`), decides
with the pure core, appends its events in one atomic batch and then folds what the ledger now
holds.  Nothing is kept that the ledger does not say: a register opened on the same file later,
or in another process, reaches the same state.

Limit: deciding and appending are two steps.  Two registers writing the same ledger at the same
instant could each accept one of two copies before seeing the other; run one register writer
per ledger (the store offers no conditional append to close that gap).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from .._clock import now_utc
from ..errors import InputError, IntegrityError
from ..ledger.events import EventKind, NewEvent, parse_body, utc_stamp
from ..ledger.payloads import (
    ConfirmationReceived,
    EchoDetected,
    Payload,
    QuarantineChanged,
    SourceAmended,
    SourceRegistered,
)
from ..ledger.payloads import PolicyOutput as PolicyOutputted
from ..ledger.store import LedgerStore
from .check import check_confirmation
from .confirmation import Confirmation
from .decision import RELEASABLE, ProvenanceRules, Reason, Status, is_echo_collision
from .fingerprint import Fingerprint, content_text, fingerprint
from .models import SourceRecord, parse_enum, verify_identifier, verify_text
from .records import ConfirmationEntry, PolicyOutput, SourceRevision
from .state import RegisterState


class ProvenanceRegister:
    """Sources, policy outputs and confirmations, recorded in a :class:`LedgerStore`.

    ``actor`` is this component's identifier in the ledger.  Constructing the register reads
    the whole ledger; raises IntegrityError if the provenance events in it do not hold.
    """

    def __init__(self, store: LedgerStore, *, actor: str, rules: ProvenanceRules | None = None,
                 clock: Callable[[], datetime] = now_utc) -> None:
        self.actor = verify_identifier(actor, "actor")
        self.rules = rules if rules is not None else ProvenanceRules()
        self._store = store
        self._clock = clock
        self._state = RegisterState(self.rules)
        self.refresh()

    # -- reading ----------------------------------------------------------------------------
    def refresh(self) -> RegisterState:
        """Fold the events appended since the last look, by this or any other writer."""
        for seq, body in self._store.scan(self._state.size + 1):
            self._state.apply(seq, parse_body(body, seq=seq), self._refingerprint)
        return self._state

    @property
    def state(self) -> RegisterState:
        return self.refresh()

    def counts_as_independent(self, attempt: str) -> tuple[ConfirmationEntry, ...]:
        """The confirmations of ``attempt`` that count: accepted or released, one per source.
        Everything quarantined is left out (8.14, 8.15, 11.21)."""
        return self.refresh().counted(verify_identifier(attempt, "attempt"))

    def echo_collisions(self, attempt: str) -> tuple[ConfirmationEntry, ...]:
        """Authenticated confirmations of ``attempt`` from admissible sources that are held
        back only because their content matches a policy output or another source (8.14,
        8.15).  They never count as confirmation; the policy writing a report's wording first
        must not make that report vanish either, so they are offered as evidence that may
        only lower the policy's signal (9.16; docs/adr/0006)."""
        return self.refresh().echo_collisions(verify_identifier(attempt, "attempt"))

    def source_history(self, source_id: str) -> tuple[SourceRevision, ...]:
        """Every revision of a source, oldest first (9.15 append-only change history)."""
        return self.refresh().source_history(source_id)

    def _refingerprint(self, kind: str, digest: str) -> Fingerprint:
        # Fingerprints made with other MinHash parameters are recomputed from the evidence,
        # never trusted across a change of method (see fingerprint.METHOD).
        data = self._store.get_evidence(digest)
        if kind == EventKind.POLICY_OUTPUT:
            return fingerprint(data.decode("utf-8"))
        return fingerprint(content_text(json.loads(data)))

    # -- writing ----------------------------------------------------------------------------
    def _event(self, kind: EventKind, data: Payload, attempt: str | None,
               at: datetime) -> NewEvent:
        return NewEvent.make(kind, data, actor=self.actor, at=at, attempt=attempt)

    def _append(self, events: list[NewEvent]) -> None:
        self._store.append(events)
        self.refresh()

    def register_source(self, source: SourceRecord) -> SourceRecord:
        """Record a new source (revision 1).  Raises InputError if it is already registered."""
        if not isinstance(source, SourceRecord) or source.revision != 1:
            raise InputError("a new source is registered as a SourceRecord at revision 1")
        if self.refresh().current_source(source.id) is not None:
            raise InputError(f"source {source.id!r} is already registered; amend it instead")
        at = self._clock()
        registered = SourceRegistered(source=source.to_data())
        events = [self._event(EventKind.SOURCE_REGISTERED, registered, source.attempt, at)]
        if source.quarantined:
            events.append(self._source_quarantine(source, at))
        self._append(events)
        return source

    def amend_source(self, updated: SourceRecord, *, change: str) -> SourceRecord:
        """Append a new revision of a source; the old ones stay in the ledger (9.15).

        ``updated`` is the current revision with fields changed (``dataclasses.replace``) and
        its revision number unchanged: amending a stale revision raises InputError, as does
        changing the id, creation time or origin, or removing the synthetic label (9.16: labels
        are not laundered; register a new source instead), or changing nothing.
        """
        verify_text(change, "reason for the change")
        current = self.refresh().current_source(updated.id)
        if current is None:
            raise InputError(f"source {updated.id!r} is not registered")
        if updated.revision != current.revision:
            raise InputError(f"source {updated.id!r} is at revision {current.revision}, "
                             f"not {updated.revision}: amend the current revision")
        for name in ("created_at", "origin"):
            if getattr(updated, name) != getattr(current, name):
                raise InputError(f"the {name} of a source cannot be amended")
        if current.synthetic and not updated.synthetic:
            raise InputError("the synthetic label of a source cannot be removed (spec 9.16)")
        if updated == current:
            raise InputError("the amendment changes nothing")
        new = replace(updated, revision=current.revision + 1)
        at = self._clock()
        events = [self._event(EventKind.SOURCE_AMENDED,
                              SourceAmended(source=new.to_data(), change=change), new.attempt,
                              at)]
        if (new.quarantined, new.quarantine_reason) != (current.quarantined,
                                                        current.quarantine_reason):
            events.append(self._source_quarantine(new, at))
        self._append(events)
        return new

    def _source_quarantine(self, source: SourceRecord, at: datetime) -> NewEvent:
        data = QuarantineChanged(subject="source", source=source.id, revision=source.revision,
                                 status="quarantined" if source.quarantined else "clear",
                                 reason=source.quarantine_reason)
        return self._event(EventKind.QUARANTINE_CHANGED, data, source.attempt, at)

    def record_policy_output(self, attempt: str, text: str) -> PolicyOutput:
        """Fingerprint an output of the evaluated policy (8.14).  The text goes to the evidence
        store; the event carries only its digest and fingerprints.  An already accepted
        confirmation that the output matches is quarantined as an echo; being authenticated,
        it stays an echo collision (``echo.detected`` says so), which the policy cannot erase
        by repeating it.  Raises InputError for a malformed attempt or non-text."""
        verify_identifier(attempt, "attempt")
        fp = fingerprint(text)
        state = self.refresh()
        digest = self._store.put_evidence(text.encode("utf-8"))
        at = self._clock()
        events = [self._event(EventKind.POLICY_OUTPUT,
                              PolicyOutputted(output=digest, fingerprint=fp.to_data()),
                              attempt, at)]
        cause = {"policy_output": digest, "attempt": attempt}
        for entry in state.confirmations_echoing(fp):
            if entry.status is Status.ACCEPTED:
                events.append(self._confirmation_quarantine(entry, [Reason.ECHO], cause, at))
                echo = EchoDetected(
                    receipt=entry.receipt, confirmation=entry.id,
                    matches=({"attempt": attempt, "output": digest},),
                    echo_collision=is_echo_collision(
                        (Reason.ECHO,), authenticated=entry.decision.authenticated))
                events.append(self._event(EventKind.ECHO_DETECTED, echo, entry.attempt, at))
        self._append(events)
        output = self._state.output(attempt, digest)
        assert output is not None
        return output

    def submit_confirmation(self, confirmation: Confirmation) -> ConfirmationEntry:
        """Verify, decide and record a confirmation; return it as the ledger now holds it.

        A quarantined confirmation is recorded all the same (with ``quarantine.changed`` and,
        for an echo, ``echo.detected``): quarantine holds data back, it does not hide it (1.22).
        An authenticated one held only as an echo or copy is marked ``echo_collision`` in its
        decision and in ``echo.detected`` (see :meth:`echo_collisions`).
        Raises InputError if ``confirmation`` is not a Confirmation.
        """
        if not isinstance(confirmation, Confirmation):
            raise InputError("submit a Confirmation")
        fp = fingerprint(confirmation.text)
        state = self.refresh()
        received = self._clock()
        decision = check_confirmation(state, confirmation, received, fp)
        if self._store.put_evidence(confirmation.content_bytes) != confirmation.content_sha256:
            raise IntegrityError("the evidence store returned a different content digest")
        receipt = secrets.token_hex(16)
        head: dict[str, JsonValue] = {"id": confirmation.id, "source": confirmation.source,
                "attempt": confirmation.attempt, "issued_at": utc_stamp(confirmation.issued_at),
                "content_sha256": confirmation.content_sha256,
                "signature": confirmation.signature}
        data = ConfirmationReceived(receipt=receipt, confirmation=head,
                                    fingerprint=fp.to_data(),
                                    free_text=isinstance(confirmation.content, str),
                                    decision=decision.to_data(), rules=self.rules.to_data())
        attempt = confirmation.attempt
        events = [self._event(EventKind.CONFIRMATION_RECEIVED, data, attempt, received)]
        if not decision.accepted:
            notice = QuarantineChanged(
                subject="confirmation", receipt=receipt, confirmation=confirmation.id,
                status=Status.QUARANTINED.value, reasons=tuple(r.value for r in decision.reasons),
                echo_collision=decision.echo_collision, cause=None, reconciliation=None)
            events.append(self._event(EventKind.QUARANTINE_CHANGED, notice, attempt, received))
        if decision.echo_of:
            echo = EchoDetected(receipt=receipt, confirmation=confirmation.id,
                                matches=tuple(m.to_data() for m in decision.echo_of),
                                echo_collision=decision.echo_collision)
            events.append(self._event(EventKind.ECHO_DETECTED, echo, attempt, received))
        for other in decision.correlated_with:
            entry = state.entry(other)
            if entry is not None and entry.status is Status.ACCEPTED:
                # 8.15: copies discredit each other; the earlier one is held too.
                events.append(self._confirmation_quarantine(
                    entry, [Reason.CORRELATED], {"receipt": receipt}, received))
        self._append(events)
        result = self._state.entry(receipt)
        assert result is not None
        return result

    def _confirmation_quarantine(self, entry: ConfirmationEntry, reasons: list[Reason],
                                 cause: dict[str, Any], at: datetime) -> NewEvent:
        # Only accepted entries are quarantined later, so ``reasons`` are all they will have.
        collision = is_echo_collision(tuple(reasons), authenticated=entry.decision.authenticated)
        data = QuarantineChanged(
            subject="confirmation", receipt=entry.receipt, confirmation=entry.id,
            status=Status.QUARANTINED.value, reasons=tuple(r.value for r in reasons),
            echo_collision=collision, cause=cause, reconciliation=None)
        return self._event(EventKind.QUARANTINE_CHANGED, data, entry.attempt, at)

    def reconcile(self, receipt: str, *, outcome: Status | str, note: str,
                  evidence: bytes | None = None, by: str | None = None) -> ConfirmationEntry:
        """Record the reconciliation of a quarantined confirmation (9.15, 8.15).

        ``released`` needs ``evidence`` of the verification (stored, its digest recorded) and
        only lifts reasons in :data:`RELEASABLE`, ``source_quarantined`` only once the source
        is clear; ``rejected`` keeps it out for good.  Raises InputError otherwise, or for an
        unknown receipt or a confirmation that is not in quarantine.
        """
        verify_text(note, "reconciliation note")
        status = parse_enum(Status, outcome, "outcome", InputError)
        actor = self.actor if by is None else verify_identifier(by, "reconciling party")
        state = self.refresh()
        entry = state.entry(receipt)
        if entry is None or entry.status is not Status.QUARANTINED:
            raise InputError(f"no confirmation in quarantine under receipt {receipt!r}")
        if status not in (Status.RELEASED, Status.REJECTED):
            raise InputError("a reconciliation either releases or rejects")
        if status is Status.RELEASED:
            fixed = [r.value for r in entry.reasons if r not in RELEASABLE]
            if fixed:
                raise InputError(f"cannot be released by reconciliation: {', '.join(fixed)}")
            if evidence is None:
                raise InputError("a release needs the evidence of the verification (8.15)")
            source = state.current_source(entry.source)
            if Reason.SOURCE_QUARANTINED in entry.reasons and (source is None or
                                                                source.quarantined):
                raise InputError(f"source {entry.source!r} is still in quarantine")
        digest = None if evidence is None else self._store.put_evidence(evidence)
        data = QuarantineChanged(
            subject="confirmation", receipt=receipt, confirmation=entry.id, status=status.value,
            reasons=tuple(r.value for r in entry.reasons), cause=None,
            reconciliation={"note": note, "evidence": digest})
        event = NewEvent.make(EventKind.QUARANTINE_CHANGED, data, actor=actor,
                              at=self._clock(), attempt=entry.attempt)
        self._append([event])
        result = self._state.entry(receipt)
        assert result is not None
        return result
