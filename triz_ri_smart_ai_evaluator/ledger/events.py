"""Ledger events: what one record is, and its canonical bytes (spec 10.1-10.4, 1.17).

No I/O.  An event's body is RFC 8785 canonical JSON of::

    {"actor": ..., "at": ..., "attempt": ... | null, "data": {...}, "kind": ...,
     "prev": <hex>, "seq": <n>, "v": 1}

``prev`` is the Merkle leaf hash, SHA-256(0x00 || body), of the previous event, so one hash
serves both as the chain link and as the event's leaf in the RFC 6962 tree; the first event's
``prev`` is 64 zeros.  ``seq`` starts at 1 and equals leaf index + 1.

The envelope fields are restricted to plain ASCII (identifiers and a UTC timestamp), which lets
the ledger assemble the canonical body by concatenation around the payload's canonical bytes:
the body is byte-identical to canonicalising the whole dict (a property test checks this).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .._ids import PLAIN_ID
from ..canonical import canonical_json
from ..errors import InputError, IntegrityError
from .merkle import leaf_hash

if TYPE_CHECKING:
    from .payloads import Payload

FORMAT_VERSION = 1
GENESIS_PREV = "0" * 64


class EventKind(StrEnum):
    """Every kind of record the ledger holds (issue 3; spec 10.3, 10.4, 9.15-9.17)."""

    ATTEMPT_INITIATED = "attempt.initiated"
    ATTEMPT_COMPLETED = "attempt.completed"
    ATTEMPT_ERRORED = "attempt.errored"
    ATTEMPT_CANCELLED = "attempt.cancelled"
    ATTEMPT_VERIFICATION_FAILED = "attempt.verification_failed"
    ATTEMPT_ABANDONED = "attempt.abandoned"
    #: A queued harness run lost in a crash, queued again once on restart (issue 11).
    ATTEMPT_REQUEUED = "attempt.requeued"
    MEASUREMENT_RAW = "measurement.raw"
    EVIDENCE_STORED = "evidence.stored"
    #: Which evidence digests an award's inputs cite resolved to stored blobs (issue 10).
    EVIDENCE_RESOLVED = "evidence.resolved"
    VERIFIER_DECISION = "verifier.decision"
    INDICATORS_COMPUTED = "indicators.computed"
    AWARD_DECISION = "award.decision"
    COMMENT_ADDED = "comment.added"
    ESCROW_HELD = "escrow.held"
    ESCROW_RELEASED = "escrow.released"
    ESCROW_ADJUSTED = "escrow.adjusted"
    RULES_PUBLISHED = "rules.published"
    SOURCE_REGISTERED = "source.registered"
    SOURCE_AMENDED = "source.amended"
    CONFIRMATION_RECEIVED = "confirmation.received"
    QUARANTINE_CHANGED = "quarantine.changed"
    ECHO_DETECTED = "echo.detected"
    POLICY_OUTPUT = "policy.output"
    TRAINING_INCLUDED = "training.included"
    ACCESS_VIOLATION = "access.violation"
    #: A request the service refused before the access matrix (401, 400, 413, 422, 429,
    #: 503) on the trusted port, rate-limited with a count of the suppressed (issue 11).
    SERVICE_REFUSAL = "service.refusal"
    GATE_TRANSITION = "gate.transition"
    INJECTION_DETECTED = "injection.detected"
    #: The store refused a tail that did not match its signed head; recorded on the next good
    #: start, after the operator restored the database (issue 11).
    LEDGER_TAMPER_DETECTED = "ledger.tamper_detected"
    # -- loop protection (spec 9; issue 15) --------------------------------------------------
    #: The operating mode of a task class's signal for training (spec 4.7, 9.8, 9.11, 9.19).
    CLASS_MODE_CHANGED = "class.mode_changed"
    #: One attempt's score on the known (public) suite beside its fresh hidden control (4.7).
    CONTROL_OBSERVATION = "control.observation"
    #: One run of the divergence monitor over a class's window (spec 4.7, 9.8, 11.16).
    DIVERGENCE_CHECKED = "divergence.checked"
    #: A run's control cases revealed after its award, by fingerprint; they are retired from
    #: later draws (spec 9.6, 11.16).
    CONTROL_REVEALED = "control.revealed"
    #: A red-team campaign's signed report (spec 9.12-9.14, 11.23; pilot 11-12).
    AUDIT_REPORT = "audit.report"
    #: One step of the exploit quarantine and recovery procedure (spec 9.10, 9.11, 11.22).
    EXPLOIT_STEP = "exploit.step"
    #: A corrigibility drill and what the ledger showed about it (spec 9.19, 11.25).
    DRILL_COMPLETED = "drill.completed"


#: Outcome kinds: an attempt with one of these is finished (the reconciler leaves it alone).
OUTCOME_KINDS = frozenset(
    {
        EventKind.ATTEMPT_COMPLETED,
        EventKind.ATTEMPT_ERRORED,
        EventKind.ATTEMPT_CANCELLED,
        EventKind.ATTEMPT_VERIFICATION_FAILED,
        EventKind.ATTEMPT_ABANDONED,
    }
)

_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def utc_stamp(moment: datetime) -> str:
    """The one spelling of an instant in events: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if moment.tzinfo is None:
        raise InputError("event time must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event before the ledger gives it a place: its payload is canonicalised once, here."""

    kind: str
    actor: str
    at: str
    attempt: str | None
    data_bytes: bytes

    @classmethod
    def make(
        cls,
        kind: EventKind | str,
        data: Payload | dict[str, Any],
        *,
        actor: str,
        at: datetime | str,
        attempt: str | None = None,
    ) -> NewEvent:
        """Build an event holding ``data``: the kind's payload model (``ledger.payloads``), or a
        plain JSON object, which is checked against that model as strictly and then
        canonicalised as given.  Raises InputError for an unknown kind, a model of another kind
        or a field that does not fit (naming the kind and the field)."""
        kind_value = str(kind)
        if kind_value not in _KINDS:
            raise InputError(f"unknown event kind {kind_value!r}")
        stamp = at if isinstance(at, str) else utc_stamp(at)
        if not _INSTANT.fullmatch(stamp):
            raise InputError(f"event time {stamp!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ")
        for name, value in (("actor", actor), ("attempt", attempt)):
            if value is not None and not PLAIN_ID.fullmatch(value):
                raise InputError(f"event {name} {value!r} is not a plain identifier")
        from .payloads import Payload, check_payload, verify_data  # noqa: PLC0415 - imports us

        if isinstance(data, dict):
            verify_data(kind_value, data)
        elif isinstance(data, Payload):
            data = check_payload(kind_value, data).to_data()
        else:
            raise InputError("event data must be a JSON object")
        return cls(kind_value, actor, stamp, attempt, canonical_json(data))

    def body(self, *, seq: int, prev: str) -> bytes:
        """The canonical body at position ``seq`` after the event whose leaf hash is ``prev``."""
        attempt = b"null" if self.attempt is None else b'"' + self.attempt.encode() + b'"'
        return b"".join(
            (
                b'{"actor":"',
                self.actor.encode(),
                b'","at":"',
                self.at.encode(),
                b'","attempt":',
                attempt,
                b',"data":',
                self.data_bytes,
                b',"kind":"',
                self.kind.encode(),
                b'","prev":"',
                prev.encode(),
                b'","seq":',
                str(seq).encode(),
                b',"v":1}',
            )
        )


_KINDS = frozenset(k.value for k in EventKind)


@dataclass(frozen=True, slots=True)
class Event:
    """A sealed event as stored: its position, body and leaf hash."""

    seq: int
    body: bytes
    leaf: bytes
    #: The kind, once read: a str cannot be changed by a caller, and the body is immutable
    #: (readers ask for the kind of the same event many times; each ``fields`` re-parses and
    #: re-checks the body).
    _kind: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def fields(self) -> dict[str, Any]:
        """The parsed body, a fresh dict on every call.  Raises IntegrityError if the stored
        bytes are not a canonical event body."""
        return parse_body(self.body, seq=self.seq)

    @property
    def kind(self) -> str:
        kind = self._kind
        if kind is None:
            kind = str(self.fields["kind"])
            object.__setattr__(self, "_kind", kind)
        return kind

    @property
    def data(self) -> dict[str, Any]:
        data = self.fields["data"]
        assert isinstance(data, dict)
        return data

    @property
    def at(self) -> str:
        """The event's time stamp (``YYYY-MM-DDTHH:MM:SS.ffffffZ``)."""
        return str(self.fields["at"])


def seal(event: NewEvent, *, seq: int, prev: str) -> Event:
    """Give a new event its place in the log."""
    body = event.body(seq=seq, prev=prev)
    return Event(seq, body, leaf_hash(body))


def parse_body(body: bytes, *, seq: int) -> dict[str, Any]:
    """Parse and check the envelope of a stored body.  Raises IntegrityError naming the event."""
    try:
        fields = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise IntegrityError(f"event {seq}: stored body is not JSON ({e})") from e
    expected = {"actor", "at", "attempt", "data", "kind", "prev", "seq", "v"}
    if not isinstance(fields, dict) or set(fields) != expected:
        raise IntegrityError(f"event {seq}: stored body does not have the event fields")
    if fields["seq"] != seq or fields["v"] != FORMAT_VERSION:
        raise IntegrityError(f"event {seq}: body says seq {fields['seq']!r}")
    if canonical_json(fields) != body:
        raise IntegrityError(f"event {seq}: stored body is not in canonical form")
    return fields


def prev_in_body(body: bytes) -> str | None:
    """The ``prev`` field of a canonical body, read without parsing the JSON.

    In canonical order the top-level ``prev`` follows ``data``, ``kind`` and precedes ``seq``
    and ``v`` (both integers), so its last occurrence is the top-level one: a key ``prev``
    nested inside ``data`` always comes earlier in the bytes.
    """
    at = body.rfind(b',"prev":"')
    if at < 0:
        return None
    start = at + 9
    value = body[start : start + 64]
    if body[start + 64 : start + 72] != b'","seq":':
        return None
    return value.decode("ascii", "replace")
