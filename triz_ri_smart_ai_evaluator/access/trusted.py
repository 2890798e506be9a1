"""The trusted port: per trusted role, exactly its matrix rights (spec 2.11, 9.3, 9.15, 10.3).

Every request goes through :meth:`AccessGuard.verify_allowed`.  A trusted component is the
source with its principal id in the provenance register; what it appends carries its Ed25519
signature over the canonical request (:func:`request_message`), verified against the key of the
source's current revision before anything is written (spec 9.3 bullet 1: the record is created
by a trusted component; 9.15: authenticated, with known origin).  An unregistered, unsigned or
quarantined source, or a bad signature, is refused and logged like any other violation.  Each
signed append records an ``evidence.stored`` event ``what: signed_request`` with the principal,
key id and signature, and the signed bytes in the evidence store (for control sets only their
digest: the content stays hidden, 9.6), so an outsider can re-verify who asked for what.

Reads need no signature: the caller's identity is the transport's credential.  All payloads and
answers are JSON; bytes travel as base64.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from .._clock import now_utc
from .._ids import is_plain_id
from ..canonical import canonical_json, sha256_hex
from ..errors import InputError
from ..evaluation.attempts import (
    attempt_record,
    evaluate,
    record_measurements,
    rules_in_ledger,
    rules_published_in,
)
from ..ledger.events import Event, EventKind, NewEvent, parse_body
from ..ledger.payloads import (
    PAYLOADS,
    AttemptEnded,
    AttemptInitiated,
    EvidenceStored,
    P,
    Payload,
    PolicyOutput,
    QuarantineChanged,
    RulesPublished,
    VerifierDecision,
    payload_as,
    payload_of,
)
from ..provenance.confirmation import ComponentKey, Confirmation, is_valid_signature
from ..provenance.models import AuthMethod
from ..provenance.register import ProvenanceRegister
from ..rules.indicators import PolicyAccess
from ..rules.task_class import TaskClass
from ..rules.versions import canonical_rules, pin, rules_version
from ..signal.inputs import AttemptInputs
from .backing import Catalogue, ControlSetStore, ScheduleBook
from .enforce import AccessGuard, Principal, parse_action, parse_resource
from .loop_control import LoopControl, end_if_shut_down
from .matrix import TRUSTED_ROLES, Action, Resource, Role, Scope
from .nonces import book_for
from .ports import (
    DEFAULT_LIMITS,
    Limits,
    decode_b64,
    encode_b64,
    optional_text,
)
from .requests import (
    AttemptRef,
    ClassRef,
    ConfirmationAppend,
    ControlSetAppend,
    DecisionAppend,
    DrillReportAppend,
    EvaluateAppend,
    EvidenceAppend,
    EvidenceRead,
    HarnessReportAppend,
    LedgerRead,
    LoopModeAppend,
    MeasurementsAppend,
    NoFields,
    OutcomeAppend,
    QuarantineAppend,
    RulesAppend,
    ScheduleAppend,
    parse_request,
    request_model,
)
from .views import (
    ARTEFACT,
    SIGNED_REQUEST,
    final_award,
    of_kind,
    owner_of,
    public_task,
    quarantine_of,
    started_at,
    status_of,
)

DOMAIN = "triz-ri-smart-ai-evaluator/access/request/v1"
#: an append's optional idempotency key (signed with the payload), remembered this long
REQUEST_ID = "request_id"
REQUEST_ID_SECONDS = 24 * 3600
_RESERVED_WHAT = frozenset({ARTEFACT, SIGNED_REQUEST})
_OUTCOMES = {"errored": EventKind.ATTEMPT_ERRORED, "cancelled": EventKind.ATTEMPT_CANCELLED,
             "verification_failed": EventKind.ATTEMPT_VERIFICATION_FAILED}
_VERDICTS = frozenset({"verified", "rejected", "inconclusive"})


def request_message(principal: Principal, resource: Resource | str, action: Action | str,
                    payload: Mapping[str, Any]) -> bytes:
    """The bytes a trusted component signs: RFC 8785 JSON of the domain, who, what and the
    payload without its ``signature``.  Raises InputError for a payload JSON cannot carry."""
    body = {k: v for k, v in payload.items() if k != "signature"}
    return canonical_json({"domain": DOMAIN, "principal": principal.id,
                           "role": principal.role.value, "resource": str(resource),
                           "action": str(action), "payload": body})


def sign_request(key: ComponentKey, principal: Principal, resource: Resource | str,
                 action: Action | str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload with the component's ``signature`` added (the client side of a request)."""
    body = {k: v for k, v in payload.items() if k != "signature"}
    return {**body, "signature": key.sign(request_message(principal, resource, action, body))}


@dataclass(frozen=True, slots=True)
class _Signed:
    digest: str
    key_id: str
    signature: str

    def fields(self) -> dict[str, str]:
        """Who asked, as the events appended for the request record it."""
        return {"request": self.digest, "key_id": self.key_id, "signature": self.signature}


#: A handler gets the payload read into its cell's model (``access.requests``).
Handler = Callable[[Any, Scope, "_Signed | None"], dict[str, Any]]


class TrustedPort:
    """What one trusted principal may do.  Raises InputError for a principal of role
    ``evaluated_policy`` (it has :class:`~.ports.PolicyPort`)."""

    def __init__(self, guard: AccessGuard, principal: Principal, *,
                 register: ProvenanceRegister, catalogue: Catalogue,
                 control_sets: ControlSetStore, schedule: ScheduleBook,
                 clock: Callable[[], datetime] = now_utc, limits: Limits = DEFAULT_LIMITS) -> None:
        if principal.role not in TRUSTED_ROLES:
            raise InputError(f"a trusted port is not for role {principal.role.value}")
        self.principal = principal
        self._guard = guard
        self._store = guard.ledger
        self._register = register
        self._catalogue = catalogue
        self._control_sets = control_sets
        self._schedule = schedule
        self._clock = clock
        self._limits = limits
        R, A = Resource, Action
        self._handlers: dict[tuple[Resource, Action], Handler] = {
            (R.TASK_SPEC_PUBLIC, A.READ): self._read_public,
            (R.SUBMISSIONS, A.READ): self._read_submission,
            (R.CONTROL_SETS, A.READ): self._read_control_set,
            (R.ATTEMPTS, A.READ): self._read_attempt,
            (R.RAW_MEASUREMENTS, A.READ): self._of_kind(EventKind.MEASUREMENT_RAW, "measurements"),
            (R.EVIDENCE, A.READ): self._read_evidence,
            (R.VERIFIER_DECISIONS, A.READ): self._of_kind(EventKind.VERIFIER_DECISION,
                                                         "decisions"),
            (R.INDICATORS, A.READ): self._of_kind(EventKind.INDICATORS_COMPUTED, "indicators"),
            (R.AWARDS_AND_SIGNALS, A.READ): self._read_award,
            (R.LEDGER, A.READ): self._read_ledger,
            (R.CHECKPOINTS, A.READ): self._read_checkpoints,
            (R.RULES_AND_BENCHMARKS, A.READ): self._read_rules,
            (R.CHECK_SCHEDULE, A.READ): self._read_schedule,
            (R.QUARANTINE, A.READ): self._read_quarantine,
            (R.ATTEMPTS, A.APPEND): self._append_outcome,
            (R.RAW_MEASUREMENTS, A.APPEND): self._append_measurements,
            (R.EVIDENCE, A.APPEND): self._append_evidence,
            (R.VERIFIER_DECISIONS, A.APPEND): self._append_decision,
            (R.INDICATORS, A.APPEND): self._evaluate,
            (R.AWARDS_AND_SIGNALS, A.APPEND): self._evaluate,
            (R.CONTROL_SETS, A.APPEND): self._append_control_set,
            (R.CHECK_SCHEDULE, A.APPEND): self._rotate_schedule,
            (R.QUARANTINE, A.APPEND): self._append_quarantine,
            (R.RULES_AND_BENCHMARKS, A.APPEND): self._publish_rules,
            (R.LOOP_MODE, A.READ): lambda req, _, __: self._loop().read(req.class_id),
            (R.LOOP_MODE, A.APPEND): self._append_loop,
        }

    # -- the one door ----------------------------------------------------------------------
    def request(self, resource: str, action: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Perform ``action`` on ``resource`` with a JSON ``payload``; return a JSON answer.

        The matrix decides first (a refusal is logged whatever the payload); an append then needs
        a valid ``signature`` (see :func:`sign_request`).  Raises AccessDenied, InputError for an
        unknown resource or action or a malformed payload, RuleError for rules the catalogue
        refuses.  Payload shapes are listed in docs/access-matrix.md.
        """
        res, act = parse_resource(resource), parse_action(action)
        if not isinstance(payload, Mapping):
            raise InputError("the request payload must be a JSON object")
        target = optional_text(payload, "attempt_id") or optional_text(payload, "class_id")
        scope = self._guard.verify_allowed(self.principal, res, act, target=target,
                                           owner_of=self._owner(res, target))
        handler = self._handlers.get((res, act))
        if handler is None:
            raise InputError(f"{act.value} {res.value} is not offered by the trusted port")
        signed = self._verify_signature(res, act, payload, target) if act is Action.APPEND else None
        body = {k: v for k, v in payload.items() if k not in ("signature", REQUEST_ID)}
        req = parse_request(request_model(res, act, body), res, act, body)
        if signed is None or REQUEST_ID not in payload:
            return handler(req, scope, signed)
        return self._idempotent(payload[REQUEST_ID], signed, lambda: handler(req, scope, signed))

    def _owner(self, res: Resource, target: str | None) -> str | None:
        """Who submitted the attempt ``target`` names, when the caller's cell is scoped to its
        own records (the training consumer's runs, issue 16); else None (not looked up)."""
        scope = self._guard.matrix.cell(self.principal.role, res).scope
        if scope not in (Scope.OWN, Scope.OWN_FINAL) or target is None or not is_plain_id(target):
            return None
        return owner_of(self._store.attempt_events(target))

    def _idempotent(self, request_id: object, signed: _Signed,
                    run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Issue 11 item 2: an append carrying a ``request_id`` (signed with the payload) is
        done once; the same id and request again gets the first answer and appends nothing.
        The answer is recorded in the same transaction as the events (access/nonces.py).
        Raises InputError for a malformed id or one reused for a different request."""
        if not (isinstance(request_id, str) and len(request_id) <= 128
                and is_plain_id(request_id)):
            raise InputError(f"{REQUEST_ID} must be a plain identifier of at most 128 characters")
        book, key = book_for(self._store), f"request-id:{request_id}"
        now = int(self._clock().timestamp())
        first = book.answer(self.principal.id, key, now=now)
        if first is not None:
            if first[0] != signed.digest:
                raise InputError(f"{REQUEST_ID} {request_id!r} was used for a different request")
            answer: dict[str, Any] = json.loads(first[1])
            return answer
        answer = run()
        book.record(self.principal.id, key, request=signed.digest, answer=canonical_json(answer),
                    expires=now + REQUEST_ID_SECONDS, now=now)
        return answer

    def _verify_signature(self, res: Resource, act: Action, payload: Mapping[str, Any],
                          target: str | None) -> _Signed:
        p = self.principal
        source = self._register.state.current_source(p.id)
        problem = None
        if source is None:
            problem = f"no source {p.id!r} in the provenance register"
        elif source.quarantined:
            problem = f"source {p.id!r} is in quarantine (spec 9.11)"
        elif source.authentication.method is not AuthMethod.ED25519:
            problem = f"source {p.id!r} has no Ed25519 key"
        elif source.policy_access is PolicyAccess.WRITE:
            problem = f"source {p.id!r} is writable by the policy: not independent (spec 9.3)"
        if problem is not None or source is None:
            self._guard.refuse(p, res, act, reason=problem or "no source", target=target)
        signature = payload.get("signature")
        message = request_message(p, res, act, payload)
        if not isinstance(signature, str) or not is_valid_signature(
            source.authentication, message, signature
        ):
            self._guard.refuse(p, res, act, target=target,
                               reason=f"signature does not verify against the registered key "
                                      f"{source.authentication.key_id} of {p.id!r}")
        # spec 9.6: a control set's content never goes into the evidence store; its digest does.
        digest = (sha256_hex(message) if res is Resource.CONTROL_SETS
                  else self._store.put_evidence(message))
        assert source.authentication.key_id is not None
        return _Signed(digest, source.authentication.key_id, signature)

    def _signed_event(self, signed: _Signed | None, res: Resource, act: Action,
                      attempt: str | None) -> NewEvent:
        assert signed is not None
        p = self.principal
        return NewEvent.make(EventKind.EVIDENCE_STORED, EvidenceStored(
            what=SIGNED_REQUEST, digest=signed.digest, principal=p.id, role=p.role.value,
            resource=res.value, action=act.value, key_id=signed.key_id,
            signature=signed.signature,
        ), actor=p.id, at=self._clock(), attempt=attempt)

    def _event(self, kind: EventKind, data: Payload, attempt: str | None) -> NewEvent:
        return NewEvent.make(kind, data, actor=self.principal.id, at=self._clock(),
                             attempt=attempt)

    def _events(self, attempt: str, *, open_only: bool = False) -> list[Event]:
        if not is_plain_id(attempt):
            raise InputError("attempt_id is not a plain identifier")
        events = self._store.attempt_events(attempt)
        status = status_of(events)
        if status is None:
            raise InputError(f"no attempt {attempt!r} in the ledger")
        if open_only and status != "initiated":
            raise InputError(f"attempt {attempt!r} already has an outcome ({status})")
        return events

    # -- reads -----------------------------------------------------------------------------
    def _read_public(self, req: ClassRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
        tc = self._catalogue.get(req.class_id)
        return public_task(tc, pin(tc, started_at=self._clock()),
                           permitted_actions=self._guard.matrix.grants(Role.EVALUATED_POLICY))

    def _read_submission(self, req: AttemptRef, _: Scope, __: _Signed | None
                         ) -> dict[str, Any]:
        events = self._events(req.attempt_id)
        artefact = next((d for d in self._typed(events, EvidenceStored) if d.what == ARTEFACT),
                        None)
        notes: dict[str, list[str]] = {"claim": [], "diagnostic": []}
        for output in self._typed(events, PolicyOutput):
            if output.what in notes:
                notes[output.what].append(self._store.get_evidence(output.output).decode("utf-8"))
        return {
            "attempt_id": req.attempt_id,
            "submitted_by": owner_of(events),
            "artefact_sha256": None if artefact is None else artefact.digest,
            "artefact_b64": None if artefact is None
            else encode_b64(self._store.get_evidence(artefact.digest)),
            "claims": notes["claim"],
            "diagnostics": notes["diagnostic"],
        }

    @staticmethod
    def _typed(events: list[Event], model: type[P]) -> list[P]:
        """The payloads of ``events`` of ``model``'s kind (IntegrityError if one does not fit)."""
        kinds = {k.value for k, m in PAYLOADS.items() if m is model}
        return [payload_as(e, model) for e in events if e.kind in kinds]

    def _read_control_set(self, req: ClassRef, _: Scope, __: _Signed | None
                          ) -> dict[str, Any]:
        return self._control_sets.read(self._catalogue.get(req.class_id).id)

    def _read_attempt(self, req: AttemptRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
        """The full spec 10.1 record (owner and auditor: the 3.2 breakdown)."""
        return {"attempt_id": req.attempt_id,
                "record": attempt_record(self._events(req.attempt_id))}

    def _of_kind(self, kind: EventKind, name: str) -> Handler:
        def read(req: AttemptRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
            events = self._events(req.attempt_id)
            # each record read through its kind's model (ledger.payloads), as stored
            return {"attempt_id": req.attempt_id,
                    name: [payload_of(e).to_data() for e in events if e.kind == kind.value]}
        return read

    def _read_evidence(self, req: EvidenceRead, _: Scope, __: _Signed | None) -> dict[str, Any]:
        events = self._events(req.attempt_id)
        stored = self._typed(events, EvidenceStored)
        answer: dict[str, Any] = {"attempt_id": req.attempt_id,
                                  "evidence": [d.to_data() for d in stored]}
        if req.digest is not None:
            if req.digest not in {d.digest for d in stored if d.what != SIGNED_REQUEST}:
                raise InputError(f"no evidence {req.digest!r} stored for this attempt")
            answer["content_b64"] = encode_b64(self._store.get_evidence(req.digest))
        return answer

    def _read_award(self, req: AttemptRef, scope: Scope, _: _Signed | None) -> dict[str, Any]:
        events = self._events(req.attempt_id)
        answer = {"attempt_id": req.attempt_id, **final_award(events)}
        if scope in (Scope.FINAL, Scope.OWN_FINAL):
            return answer  # spec 9.17: only the final, verified value; nothing held or hidden
        escrow = [e.data for e in events if e.kind.startswith("escrow.")]
        return {**answer, "awards": of_kind(events, EventKind.AWARD_DECISION), "escrow": escrow}

    def _read_ledger(self, req: LedgerRead, _: Scope, __: _Signed | None) -> dict[str, Any]:
        # Issue 11: positions are 64-bit in the database; 2**62 is far past any real log.
        start, limit = req.start, req.limit
        events = [parse_body(body, seq=seq)
                  for seq, body in self._store.scan(start, start + limit - 1)]
        return {"size": self._store.size(), "events": events}

    def _read_checkpoints(self, _: NoFields, __: Scope, ___: _Signed | None
                          ) -> dict[str, Any]:
        return {"checkpoints": [{"size": s, "note": n} for s, n in self._store.checkpoints()]}

    def _read_rules(self, req: ClassRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
        tc = self._catalogue.get(req.class_id)
        return {"class_id": tc.id, "rules_version": rules_version(tc),
                "rules": json.loads(canonical_rules(tc))}

    def _read_schedule(self, req: AttemptRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
        self._events(req.attempt_id)
        return self._schedule.current.assign(req.attempt_id).to_data()

    def _read_quarantine(self, req: AttemptRef, _: Scope, __: _Signed | None) -> dict[str, Any]:
        return {"attempt_id": req.attempt_id,
                "quarantine": quarantine_of(self._events(req.attempt_id))}

    # -- appends (signed) ------------------------------------------------------------------
    def _inputs(self, req: MeasurementsAppend) -> AttemptInputs:
        try:
            return AttemptInputs.model_validate(req.inputs)
        except ValidationError as e:
            problem = e.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            raise InputError(f"inputs.{where}: {problem['msg']}") from e

    def _append_measurements(self, req: MeasurementsAppend, _: Scope, signed: _Signed | None
                             ) -> dict[str, Any]:
        self._events(req.attempt_id)
        attempt = req.attempt_id
        inputs = self._inputs(req)
        event = self._signed_event(signed, Resource.RAW_MEASUREMENTS, Action.APPEND, attempt)
        self._store.append([event])
        seqs = record_measurements(self._store, attempt, inputs, at=self._clock())
        return {"attempt_id": attempt, "seqs": seqs}

    def _append_evidence(self, req: EvidenceAppend | ConfirmationAppend | HarnessReportAppend,
                         _: Scope, signed: _Signed | None) -> dict[str, Any]:
        if isinstance(req, ConfirmationAppend):
            return self._submit_confirmation(req, signed)
        if isinstance(req, HarnessReportAppend):
            return self._accept_report(req, signed)
        self._events(req.attempt_id)
        attempt, what = req.attempt_id, req.what
        if what in _RESERVED_WHAT:
            raise InputError(f"evidence 'what' {what!r} is reserved")
        content = decode_b64(req.content_b64, "content_b64", self._limits.artefact_bytes)
        digest = self._store.put_evidence(content)
        assert signed is not None
        self._store.append([
            self._signed_event(signed, Resource.EVIDENCE, Action.APPEND, attempt),
            self._event(EventKind.EVIDENCE_STORED,
                        EvidenceStored(what=what, digest=digest, size=len(content),
                                       by=self.principal.id, request=signed.digest,
                                       key_id=signed.key_id, signature=signed.signature),
                        attempt),
        ])
        return {"attempt_id": attempt, "digest": digest}

    def _accept_report(self, req: HarnessReportAppend, signed: _Signed | None
                       ) -> dict[str, Any]:
        """Issue 16 item 4: a harness worker's signed report of a run for an open attempt.  The
        signed request (with the report's SHA-256) is recorded on the attempt before the
        service records anything the report says; only the harness role reports a run (spec
        9.3 bullet 1: the record is created by a trusted component)."""
        if self.principal.role is not Role.HARNESS:
            raise InputError(f"a run report comes from a harness, not from a "
                             f"{self.principal.role.value}")
        self._events(req.attempt_id, open_only=True)
        self._store.append([self._signed_event(signed, Resource.EVIDENCE, Action.APPEND,
                                               req.attempt_id)])
        return {"attempt_id": req.attempt_id, "report_sha256": req.report.sha256}

    def _submit_confirmation(self, req: ConfirmationAppend, signed: _Signed | None
                             ) -> dict[str, Any]:
        raw = req.confirmation
        # Confirmation checks each field itself (provenance.confirmation), as it does for a
        # confirmation that never came through a port.
        confirmation = Confirmation(raw.source, raw.attempt,  # type: ignore[arg-type]
                                    raw.content, raw.issued_at,  # type: ignore[arg-type]
                                    raw.signature)  # type: ignore[arg-type]
        if confirmation.source != self.principal.id:
            # spec 9.15: a source confirms only as itself.
            self._guard.refuse(self.principal, Resource.EVIDENCE, Action.APPEND,
                               target=confirmation.attempt,
                               reason=f"{self.principal.id!r} may not confirm as "
                                      f"{confirmation.source!r}")
        self._store.append([self._signed_event(signed, Resource.EVIDENCE, Action.APPEND,
                                               confirmation.attempt)])
        entry = self._register.submit_confirmation(confirmation)
        return {"attempt_id": confirmation.attempt, "confirmation": entry.to_data()}

    def _append_decision(self, req: DecisionAppend, _: Scope, signed: _Signed | None
                         ) -> dict[str, Any]:
        self._events(req.attempt_id)
        attempt, decision = req.attempt_id, req.decision
        if decision.get("verdict") not in _VERDICTS:
            raise InputError(f"decision must be an object with verdict one of {sorted(_VERDICTS)}")
        assert signed is not None
        try:
            data = VerifierDecision.model_validate(
                {**decision, "verifier": self.principal.id, **signed.fields()})
        except ValidationError as e:
            raise InputError(f"decision: {e.errors()[0]['msg']}") from e
        seqs = self._store.append([
            self._signed_event(signed, Resource.VERIFIER_DECISIONS, Action.APPEND, attempt),
            self._event(EventKind.VERIFIER_DECISION, data, attempt),
        ])
        return {"attempt_id": attempt, "seq": seqs[-1]}

    def _evaluate(self, req: EvaluateAppend, _: Scope, signed: _Signed | None
                  ) -> dict[str, Any]:
        # attempts.evaluate writes measurements, indicators, the award and the outcome: every one
        # of those rights is needed, not only the one the request named.
        for res, act in ((Resource.RAW_MEASUREMENTS, Action.APPEND),
                         (Resource.INDICATORS, Action.APPEND),
                         (Resource.AWARDS_AND_SIGNALS, Action.APPEND),
                         (Resource.ATTEMPTS, Action.APPEND)):
            self._guard.verify_allowed(self.principal, res, act, target=req.attempt_id)
        events = self._events(req.attempt_id, open_only=True)
        attempt = req.attempt_id
        inputs = self._inputs(req)
        # spec 3.5, 8.6: the harness names the task instance it evaluated; it must be the one
        # the attempt was opened with (evaluation.attempts.evaluate refuses another).
        instance = req.instance
        initiated = self._typed(events, AttemptInitiated)[0]
        assert signed is not None  # spec 9.19: a shut-down class ends it as the runner does
        stopped = end_if_shut_down(self._store, initiated.task_class, attempt, signed.fields(),
                                   self._evidence(signed, Resource.AWARDS_AND_SIGNALS),
                                   actor=self.principal.id, at=self._clock())
        if stopped is not None:
            return stopped
        version = initiated.rules_version
        start = started_at(events)
        assert start is not None
        # spec 10.5: the rules the attempt was pinned to when it started, not today's.
        pinned = pin(self._rules_of(version), started_at=start, version=version)
        self._store.append([self._signed_event(signed, Resource.AWARDS_AND_SIGNALS,
                                               Action.APPEND, attempt)])
        evaluate(self._store, pinned, inputs, attempt_id=attempt, at=self._clock(),
                 instance=instance)
        award = of_kind(self._store.attempt_events(attempt), EventKind.AWARD_DECISION)[-1]
        return {"attempt_id": attempt, "award": award}

    def _rules_of(self, version: str) -> TaskClass:
        tc = self._catalogue.version(version)
        if tc is not None:
            return tc
        try:
            return rules_in_ledger(self._store, version)
        except InputError as e:
            raise InputError(
                f"rules version {version[:12]} is neither served nor in the ledger"
            ) from e

    def _append_outcome(self, req: OutcomeAppend, _: Scope, signed: _Signed | None
                        ) -> dict[str, Any]:
        self._events(req.attempt_id, open_only=True)
        attempt, outcome = req.attempt_id, req.outcome
        assert signed is not None
        data = AttemptEnded(outcome=outcome, reason=req.reason[:2000],
                            by=self.principal.id, request=signed.digest,
                            key_id=signed.key_id, signature=signed.signature)
        seqs = self._store.append([
            self._signed_event(signed, Resource.ATTEMPTS, Action.APPEND, attempt),
            self._event(_OUTCOMES[outcome], data, attempt),
        ])
        return {"attempt_id": attempt, "status": outcome, "seq": seqs[-1]}

    def _append_quarantine(self, req: QuarantineAppend, _: Scope, signed: _Signed | None
                           ) -> dict[str, Any]:
        self._events(req.attempt_id)
        attempt, status = req.attempt_id, req.status
        assert signed is not None
        data = QuarantineChanged(subject="attempt", status=status,
                                 reasons=(req.reason[:2000],),
                                 by=self.principal.id, request=signed.digest,
                            key_id=signed.key_id, signature=signed.signature)
        self._store.append([
            self._signed_event(signed, Resource.QUARANTINE, Action.APPEND, attempt),
            self._event(EventKind.QUARANTINE_CHANGED, data, attempt),
        ])
        return {"attempt_id": attempt, "quarantine": status}

    def _append_control_set(self, req: ControlSetAppend, _: Scope, signed: _Signed | None
                            ) -> dict[str, Any]:
        tc = self._catalogue.get(req.class_id)
        version = self._control_sets.append(tc.id, dict(req.content))
        self._store.append([self._signed_event(signed, Resource.CONTROL_SETS, Action.APPEND,
                                               None)])
        return {"class_id": tc.id, "version": version}

    def _rotate_schedule(self, req: ScheduleAppend, _: Scope, signed: _Signed | None
                         ) -> dict[str, Any]:
        verifiers, rate = req.verifiers, req.control_rate
        try:
            fraction = None if rate is None else Fraction(str(rate))
        except (ValueError, ZeroDivisionError) as e:
            raise InputError(f"control_rate {rate!r} is not a fraction n/d") from e
        schedule = self._schedule.rotate(verifiers=verifiers, control_rate=fraction)
        self._store.append([self._signed_event(signed, Resource.CHECK_SCHEDULE, Action.APPEND,
                                               None)])
        return {"schedule": schedule.label}

    def _publish_rules(self, req: RulesAppend, _: Scope, signed: _Signed | None
                       ) -> dict[str, Any]:
        try:
            tc = TaskClass.model_validate(req.task_class)
        except ValidationError as e:
            raise InputError(f"task_class does not validate: {e.errors()[0]['msg']}") from e
        version = self._catalogue.publish(tc, at=self._clock())
        events = [self._signed_event(signed, Resource.RULES_AND_BENCHMARKS, Action.APPEND, None)]
        if version not in rules_published_in(self._store):
            events.append(self._event(EventKind.RULES_PUBLISHED, RulesPublished(
                task_class=tc.id, rules_version=version,
                canonical_rules=canonical_rules(tc).decode("utf-8"),
            ), None))
        self._store.append(events)
        return {"class_id": tc.id, "rules_version": version}

    def _loop(self) -> LoopControl:
        return LoopControl(self._store, self._catalogue, self.principal.id, self._clock)

    def _evidence(self, signed: _Signed, res: Resource) -> Callable[[str], NewEvent]:
        return lambda subject: self._signed_event(signed, res, Action.APPEND, subject)

    def _append_loop(self, req: LoopModeAppend | DrillReportAppend, _: Scope,
                     signed: _Signed | None) -> dict[str, Any]:
        assert signed is not None
        return self._loop().append(req, signed.fields(), self._evidence(signed,
                                                                        Resource.LOOP_MODE))

    # -- typed entry points (each is one request; sign the payload shown) --------------------
    def read_attempt(self, attempt_id: str) -> dict[str, Any]:
        """``attempts``/``read`` ``{"attempt_id"}``: the full spec 10.1 record."""
        return self.request(Resource.ATTEMPTS, Action.READ, {"attempt_id": attempt_id})

    def read_control_set(self, class_id: str) -> dict[str, Any]:
        """``control_sets``/``read`` ``{"class_id"}``."""
        return self.request(Resource.CONTROL_SETS, Action.READ, {"class_id": class_id})

    def read_schedule(self, attempt_id: str) -> dict[str, Any]:
        """``check_schedule``/``read`` ``{"attempt_id"}``: the attempt's assignment."""
        return self.request(Resource.CHECK_SCHEDULE, Action.READ, {"attempt_id": attempt_id})

    def record_measurements(self, attempt_id: str, inputs: Mapping[str, Any], *,
                            signature: str) -> dict[str, Any]:
        """``raw_measurements``/``append`` ``{"attempt_id", "inputs"}`` (AttemptInputs JSON)."""
        return self.request(Resource.RAW_MEASUREMENTS, Action.APPEND,
                            {"attempt_id": attempt_id, "inputs": dict(inputs),
                             "signature": signature})

    def evaluate(self, attempt_id: str, inputs: Mapping[str, Any], *,
                 signature: str, instance: str | None = None) -> dict[str, Any]:
        """``awards_and_signals``/``append`` ``{"attempt_id", "inputs"[, "instance"]}``: compute
        and record the signal under the attempt's pinned rules (``evaluation.attempts.evaluate``);
        the answer is the award as recorded, with its rework credit.  Sign the payload without
        ``instance`` when none is given."""
        payload: dict[str, Any] = {"attempt_id": attempt_id, "inputs": dict(inputs),
                                   "signature": signature}
        if instance is not None:
            payload["instance"] = instance
        return self.request(Resource.AWARDS_AND_SIGNALS, Action.APPEND, payload)
