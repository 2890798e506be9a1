"""The policy port: the only door the evaluated policy has (spec 9.2, 2.11, 4.1, 8.8, 10.4).

It offers exactly three things: read the public part of a task class, submit an artefact with
claims and diagnostic notes, and read the sanitised status of its own attempts.  Everything it
does goes through :meth:`AccessGuard.verify_allowed` first.  Inputs and outputs are JSON values
(bytes travel as base64 through :meth:`PolicyPort.request`), so an HTTP layer maps them 1:1.

Submitting writes ``attempt.initiated`` with the artefact's SHA-256 first (spec 10.4: the
policy cannot choose which attempts are logged) and, in the same atomic write with the blobs
(``append_with_evidence``), the artefact as ``evidence.stored`` (``what: artefact``,
``submitted_by``: the owner for scope ``own``) and each claim and diagnostic note as a
``policy.output`` event (text in the evidence store, the event holding its digest and
fingerprint, in the provenance register's schema): claims are recorded as
claims and never become evidence (spec 8.8, 6.8), and the register can recognise a later
"confirmation" that only echoes them (8.14).  The attempt id is drawn here, so the policy cannot
pick one that steers the check schedule (8.12).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .._clock import now_utc
from .._ids import is_plain_id
from ..canonical import sha256_hex
from ..errors import InputError
from ..evaluation import instances, tail
from ..evaluation.attempts import initiation_events
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import EvidenceStored, PolicyOutput
from ..provenance.fingerprint import fingerprint
from .backing import Catalogue
from .enforce import AccessGuard, Principal, parse_action, parse_resource
from .loop_control import pin_new_attempt
from .matrix import Action, Resource, Role
from .requests import AttemptRef, ClassRef, SubmissionAppend, parse_request
from .views import ARTEFACT, owner_of, policy_status, public_task


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one submission may carry (the HTTP layer bounds the request as well)."""

    artefact_bytes: int = 16 << 20
    notes: int = 200  # claims plus diagnostic notes
    note_chars: int = 20_000


DEFAULT_LIMITS = Limits()
_SUBMISSION_FIELDS = frozenset({"class_id", "artefact_b64", "claims", "diagnostics"})


def optional_text(payload: Mapping[str, Any], key: str) -> str | None:
    """A string field for naming the target of a refusal; anything else is None."""
    value = payload.get(key)
    return value if isinstance(value, str) else None


def decode_b64(text: object, what: str, limit: int) -> bytes:
    """Standard padded base64 of at most ``limit`` bytes.  Raises InputError otherwise."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be base64 text")
    if len(text) > (limit + 2) // 3 * 4:
        raise InputError(f"{what} is over {limit} bytes")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        raise InputError(f"{what} is not valid base64") from None


def encode_b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_notes(value: object, what: str, limits: Limits) -> list[str]:
    """A list of non-empty texts within the limits.  Raises InputError otherwise."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputError(f"{what} must be a list of texts")
    notes = list(value)
    for n, note in enumerate(notes):
        if not isinstance(note, str) or not note.strip():
            raise InputError(f"{what}[{n}] must be non-empty text")
        if len(note) > limits.note_chars:
            raise InputError(f"{what}[{n}] is over {limits.note_chars} characters")
        try:
            note.encode("utf-8")
        except UnicodeEncodeError:
            # Checked before the attempt is opened: a note that cannot be stored must not
            # leave an attempt behind without its record.
            raise InputError(f"{what}[{n}] is not valid Unicode text (a lone surrogate)") \
                from None
    return notes


class PolicyPort:
    """What one evaluated-policy principal may do.  Raises InputError if the principal is not
    of role ``evaluated_policy`` (trusted components use :class:`~.trusted.TrustedPort`)."""

    def __init__(self, guard: AccessGuard, principal: Principal, *, catalogue: Catalogue,
                 clock: Callable[[], datetime] = now_utc,
                 attempt_timeout: timedelta = timedelta(hours=1),
                 limits: Limits = DEFAULT_LIMITS) -> None:
        if principal.role is not Role.EVALUATED_POLICY:
            raise InputError(f"a policy port is for role evaluated_policy, not {principal.role}")
        self.principal = principal
        self._guard = guard
        self._store = guard.ledger
        self._catalogue = catalogue
        self._clock = clock
        self._timeout = attempt_timeout
        self._limits = limits

    # -- the three things the policy may do ---------------------------------------------------
    def public_task(self, class_id: str) -> dict[str, Any]:
        """The public part of a task class (see ``views``).  Raises AccessDenied, InputError
        (unknown class), RuleError (no benchmark in force yet)."""
        self._guard.verify_allowed(self.principal, Resource.TASK_SPEC_PUBLIC, Action.READ,
                                   target=class_id if isinstance(class_id, str) else None)
        tc = self._catalogue.get(class_id)
        # The rules a submission made now would run under (an owner's rollback included): the
        # policy sees which rules apply, never the loop's mode or why (spec 9.19).
        pinned = pin_new_attempt(self._store, self._catalogue, tc.id, self._clock())
        return public_task(pinned.task_class, pinned,
                           permitted_actions=self._guard.matrix.grants(Role.EVALUATED_POLICY))

    def submit(self, class_id: str, artefact: bytes, claims: Sequence[str] = (),
               diagnostics: Sequence[str] = (), *, instance: str | None = None) -> str:
        """Hand in an artefact for a task class; return the new attempt's id.

        ``instance`` names the task instance the attempt works on (default: the attempt
        itself); its earlier attempts must be this principal's own.  Raises AccessDenied,
        InputError (unknown class, malformed or oversized input, an instance of another class)
        or RuleError (no benchmark in force).
        """
        self._guard.verify_allowed(self.principal, Resource.SUBMISSIONS, Action.APPEND,
                                   owner_of=self.principal.id,
                                   target=class_id if isinstance(class_id, str) else None)
        tc = self._catalogue.get(class_id)
        if not isinstance(artefact, bytes):
            raise InputError("the artefact must be bytes")
        if len(artefact) > self._limits.artefact_bytes:
            raise InputError(f"the artefact is over {self._limits.artefact_bytes} bytes")
        claim_list = check_notes(claims, "claims", self._limits)
        note_list = check_notes(diagnostics, "diagnostics", self._limits)
        if len(claim_list) + len(note_list) > self._limits.notes:
            raise InputError(f"at most {self._limits.notes} claims and diagnostic notes")
        if instance is not None:
            _verify_own_instance(self._guard, self.principal, instances.verify_instance(instance))
        now = self._clock()
        attempt_id = f"att-{secrets.token_hex(16)}"
        digest = sha256_hex(artefact)
        # issue 16 item 4: the rollback, the instance and the published rules from one read
        # of the ledger's new tail (nothing is appended in between)
        with tail.read_once(self._store):
            # spec 10.5: the version in force now (or the owner's rollback, 9.19)
            pinned = pin_new_attempt(self._store, self._catalogue, tc.id, now)
            # spec 10.4: attempt.initiated comes first, and the attempt is logged with what it
            # submitted in ONE write (the blobs and the events together, or neither): no
            # attempt is left in the log without its artefact, nor anything of it unlogged.
            events = initiation_events(
                self._store, pinned, attempt_id=attempt_id, task_version=pinned.version,
                started_at=now, deadline=now + self._timeout, artefact_sha256=digest,
                instance=instance)
        actor = self.principal.id
        blobs = [artefact]
        events.append(NewEvent.make(EventKind.EVIDENCE_STORED, EvidenceStored(
            what=ARTEFACT, digest=digest, size=len(artefact), submitted_by=actor,
            origin="evaluated_model_output",
        ), actor=actor, at=now, attempt=attempt_id))
        for what, texts in (("claim", claim_list), ("diagnostic", note_list)):
            for n, text in enumerate(texts):
                blobs.append(text.encode("utf-8"))
                # spec 8.8, 9.9: a claim or note is stored as what it is; never evidence.
                events.append(NewEvent.make(EventKind.POLICY_OUTPUT, PolicyOutput(
                    output=sha256_hex(blobs[-1]), fingerprint=fingerprint(text).to_data(),
                    what=what, index=n, origin="evaluated_model_output",
                ), actor=actor, at=now, attempt=attempt_id))
        # issue 16 item 4: one round trip on PostgreSQL
        self._store.append_with_evidence(events, blobs)
        return attempt_id

    def attempt_status(self, attempt_id: str) -> dict[str, Any]:
        """The sanitised status of one of this principal's attempts (see ``views``).

        Another principal's attempt and an attempt that does not exist are refused alike, so the
        answer does not tell which.  Raises AccessDenied.
        """
        # Only a well-formed id reaches the store; anything else owns nothing (refused, logged).
        events = self._store.attempt_events(attempt_id) if is_plain_id(attempt_id) else []
        self._guard.verify_allowed(self.principal, Resource.ATTEMPTS, Action.READ,
                                   owner_of=owner_of(events),
                                   target=attempt_id if isinstance(attempt_id, str) else None)
        return policy_status(attempt_id, events)

    # -- the generic door the HTTP layer routes every endpoint through -------------------------
    def request(self, resource: str, action: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Any (resource, action) with a JSON payload; the answer is JSON.

        ``task_spec_public``/``read`` ``{"class_id"}``; ``submissions``/``append``
        ``{"class_id", "artefact_b64", "claims": [...], "diagnostics": [...]}`` ->
        ``{"attempt_id"}``; ``attempts``/``read`` ``{"attempt_id"}`` (the models of
        ``access.requests``, read after the matrix decided).  Anything else is refused by the
        matrix and logged.  Raises InputError for an unknown resource or action or a payload
        that does not fit its model (naming the field), AccessDenied for a refusal.
        """
        res, act = parse_resource(resource), parse_action(action)
        if not isinstance(payload, Mapping):
            raise InputError("the request payload must be a JSON object")
        if (res, act) == (Resource.TASK_SPEC_PUBLIC, Action.READ):
            self._guard.verify_allowed(self.principal, res, act,
                                       target=optional_text(payload, "class_id"))
            return self.public_task(parse_request(ClassRef, res, act, payload).class_id)
        if (res, act) == (Resource.SUBMISSIONS, Action.APPEND):
            class_id = payload.get("class_id")
            self._guard.verify_allowed(self.principal, res, act, owner_of=self.principal.id,
                                       target=class_id if isinstance(class_id, str) else None)
            unknown = set(payload) - _SUBMISSION_FIELDS
            if unknown:
                # spec 8.12, 9.2: nothing in a submission can choose a verifier, a test or a
                # score; a field the port does not know is refused, not silently ignored.
                raise InputError(f"unknown submission fields: {sorted(unknown)}")
            req = parse_request(SubmissionAppend, res, act, payload)
            artefact = decode_b64(req.artefact_b64, "artefact_b64", self._limits.artefact_bytes)
            attempt_id = self.submit(req.class_id, artefact, req.claims,  # type: ignore[arg-type]
                                     req.diagnostics)  # type: ignore[arg-type]
            return {"attempt_id": attempt_id}
        if (res, act) == (Resource.ATTEMPTS, Action.READ):
            # The matrix decides on the id as sent: anything not the policy's own attempt is
            # refused and logged (spec 11.14); then nothing else may be in the payload.
            answer = self.attempt_status(payload.get("attempt_id"))  # type: ignore[arg-type]
            parse_request(AttemptRef, res, act, payload)
            return answer
        target = optional_text(payload, "attempt_id") or optional_text(payload, "class_id")
        self._guard.verify_allowed(self.principal, res, act, target=target)
        raise InputError(f"{act.value} {res.value} is not offered through the policy port")


def _verify_own_instance(guard: AccessGuard, principal: Principal, instance: str) -> None:
    """spec 8.6: a policy may rework only its own instance; joining another's would let it
    consume that instance first.  An instance opened outside the policy port has no owner
    (fail closed).  Raises AccessDenied (logged)."""
    members = instances.attempts_of(guard.ledger, instance)
    if members and owner_of(guard.ledger.attempt_events(members[0])) != principal.id:
        guard.refuse(principal, Resource.SUBMISSIONS, Action.APPEND, target=instance,
                     reason=f"instance {instance!r} holds another principal's attempts")
