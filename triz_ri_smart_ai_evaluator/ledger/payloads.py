"""Typed payloads of ledger events: one model per event kind (issue 14 item 4; spec 10.1-10.4).

No I/O.  A payload model says what the ``data`` of an event of its kind holds.  Its canonical
bytes are those the writers produced before the models existed (a golden ledger checks this):

* field names are the JSON keys, and the canonical JSON sorts them (RFC 8785), so the order in
  which fields are declared does not matter;
* a field is written exactly when it was given (``exclude_unset``): a required field always, an
  optional one (``= None``) only when the writer set it, even to null.  A payload read back
  therefore writes the same keys it was read with;
* values are checked strictly (no coercion: ``"5"`` never becomes ``5``, ``true`` never ``1``),
  so a payload read back writes the same values;
* ``v`` is the payload's version; version 1 is implied when absent and is never written by the
  current writers, so nothing written so far changes.  A later version sets it.

New writes are checked against ``extra="forbid"`` models.  A few kinds carry a component's own
record whose fields are not fixed here (:class:`OpenPayload`: ``gate.transition``,
``injection.detected``, ``verifier.decision``): their envelope fields are typed and the rest is
kept as it came, so that what is already in ledgers still reads.

:func:`payload_of` is the one reader: it validates an event's stored ``data`` against its kind's
model and raises IntegrityError naming the event's seq and kind when it does not fit.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from ..errors import InputError, IntegrityError
from .events import Event, EventKind

__all__ = [
    "PAYLOADS",
    "AccessViolation",
    "AttemptAbandoned",
    "AttemptCompleted",
    "AttemptEnded",
    "AttemptInitiated",
    "AttemptRequeued",
    "AwardDecision",
    "Benchmark",
    "CommentAdded",
    "ConfirmationReceived",
    "EchoDetected",
    "EscrowHeld",
    "EscrowSettled",
    "EvidenceResolved",
    "EvidenceStored",
    "GateTransition",
    "IndicatorsComputed",
    "InjectionDetected",
    "LedgerTamperDetected",
    "MeasurementRaw",
    "OpenPayload",
    "Payload",
    "PolicyOutput",
    "QuarantineChanged",
    "RawChecklist",
    "RawClaim",
    "RawCost",
    "RawIndicator",
    "RawInput",
    "RawLateIndicator",
    "RawObstacle",
    "RawSelfCheck",
    "RulesPublished",
    "ServiceRefusal",
    "SourceAmended",
    "SourceRegistered",
    "TrainingIncluded",
    "VerifierDecision",
    "check_payload",
    "models_of",
    "payload_as",
    "payload_from",
    "payload_of",
    "verify_data",
]

#: A list in JSON, a tuple here; its items are checked strictly.
Texts = Annotated[tuple[str, ...], Field(strict=False)]
JsonObject = dict[str, JsonValue]
P = TypeVar("P", bound="Payload")
Objects = Annotated[tuple[JsonObject, ...], Field(strict=False)]


class Payload(BaseModel):
    """The data of one event.  Frozen, strict, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    v: Literal[1] = 1
    #: Fields written even when left at their default: a discriminator such as ``what``.
    ALWAYS_WRITTEN: ClassVar[tuple[str, ...]] = ()

    def to_data(self) -> dict[str, Any]:
        """The JSON object the event holds: every field that was given, nothing else."""
        data = self.model_dump(mode="json", exclude_unset=True)
        for name in self.ALWAYS_WRITTEN:
            data.setdefault(name, getattr(self, name))
        return data


class OpenPayload(Payload):
    """A payload whose typed fields are checked and whose other fields are kept as given: for
    records a component composes itself (a verifier's findings, a gate step's details)."""

    model_config = ConfigDict(extra="allow")


# -- attempts (spec 10.4) ----------------------------------------------------------------------
class Benchmark(Payload):
    version: int
    value: str | None
    low: str | None
    high: str | None


class SourceRef(Payload):
    kind: str
    authentication: str


class AttemptInitiated(Payload):
    """``attempt.initiated``: every rule the attempt will be judged by (spec 10.1, 10.4)."""

    task_class: str
    attempt_id: str
    task_version: str
    #: absent in attempts written before instances existed (the attempt is its own instance)
    instance: str | None = None
    rules_version: str
    functions: Texts
    indicators: Texts
    benchmarks: dict[str, Benchmark]
    control_ids: Texts
    sources: dict[str, SourceRef]
    policy_access: dict[str, str]
    checklist: Texts
    self_checks: Texts
    formula: str
    verifier_version: str
    artefact_sha256: str | None
    started_at: str
    deadline: str


class AttemptCompleted(Payload):
    outcome: str


class AttemptEnded(Payload):
    """``attempt.errored``, ``attempt.cancelled``, ``attempt.verification_failed``: why, and
    for an outcome a trusted component appended, who asked with which signed request."""

    reason: str | None
    stage: str | None = None
    outcome: str | None = None
    by: str | None = None
    request: str | None = None
    key_id: str | None = None
    signature: str | None = None


class AttemptAbandoned(Payload):
    reason: str


class AttemptRequeued(Payload):
    reason: str
    artefact_sha256: str | None = None


# -- raw measurements (spec 10.3): what the attempt's inputs were, exactly as received --------
class _Raw(Payload):
    ALWAYS_WRITTEN = ("what",)

    def actor(self) -> str | None:
        """Who the input came from (None: the evaluator itself)."""
        return None


class _Cited(_Raw):
    id: str
    source: str
    evidence: Texts = ()

    def actor(self) -> str | None:
        return self.source


class RawIndicator(_Cited):
    what: Literal["indicator"] = "indicator"
    value: str


class RawLateIndicator(_Cited):
    """A late value applied at settlement (spec 9.17); not one of the attempt's own inputs."""

    what: Literal["late_indicator"] = "late_indicator"
    value: str


class RawChecklist(_Cited):
    what: Literal["checklist"] = "checklist"
    state: str
    degree: str | None = None


class RawSelfCheck(_Cited):
    what: Literal["self_check"] = "self_check"
    performed: bool


class RawCost(_Raw):
    what: Literal["cost"] = "cost"
    id: str
    value: str


class RawObstacle(_Raw):
    what: Literal["obstacle"] = "obstacle"
    kind: str
    indicators: Texts
    recorded_by: str
    description: str
    standard_followed: bool
    evidence: Texts = ()

    def actor(self) -> str | None:
        return self.recorded_by


class RawClaim(_Raw):
    """spec 8.8: a claim is stored as what it is, a claim; it never becomes evidence."""

    what: Literal["claim"] = "claim"
    text: str

    def actor(self) -> str | None:
        return "policy"


RawInput = RawIndicator | RawChecklist | RawSelfCheck | RawCost | RawObstacle | RawClaim
MeasurementRaw = Annotated[RawInput | RawLateIndicator, Field(discriminator="what")]


# -- evidence ----------------------------------------------------------------------------------
class EvidenceStored(Payload):
    """``evidence.stored``: a blob in the evidence store, what it is and who stored it.

    ``what`` names the content (``artefact``, ``signed_request``, a harness's file name); the
    other fields are those its writer records: the submitter and origin of an artefact, the
    principal, key and signature of a signed request, the trusted component (``by``) and its
    request of an appended piece, the scenario count of a control set."""

    what: str
    digest: str
    size: int | None = None
    submitted_by: str | None = None
    origin: str | None = None
    principal: str | None = None
    role: str | None = None
    resource: str | None = None
    action: str | None = None
    key_id: str | None = None
    signature: str | None = None
    request: str | None = None
    by: str | None = None
    via: str | None = None
    scenarios: int | None = None
    #: A harness's candidate: how it was handed in (``diff``, ``directory``) and its digest.
    source: str | None = None
    candidate_sha256: str | None = None


class Resolved(Payload):
    digest: str
    stored_by: str


class Unresolved(Payload):
    what: str
    id: str
    source: str
    digest: str
    reason: str


class EvidenceResolved(Payload):
    resolved: Annotated[tuple[Resolved, ...], Field(strict=False)]
    unresolved: Annotated[tuple[Unresolved, ...], Field(strict=False)]


# -- decisions ---------------------------------------------------------------------------------
class VerifierDecision(OpenPayload):
    """``verifier.decision``: the verifier's own record (a verdict, findings, metrics)."""


class IndicatorsComputed(Payload):
    performance: dict[str, str | None]
    status: dict[str, str]
    below_minimum: Texts
    checks: dict[str, str]
    quality_k: str | None
    perf_overall: str | None
    blocks: dict[str, str | None]
    cost: str | None


class AwardDecision(Payload):
    """``award.decision``: the signal, its preliminary / held / final parts and why."""

    rules_version: str
    outcome: str
    reasons: Texts
    critical_violation: bool
    #: absent in awards written before violations were recorded as data
    violations: Objects | None = None
    verified: bool
    mode: str
    training_use: bool
    value: str | None
    preliminary: str | None
    held: str | None
    payable_now: str | None
    final: str | None
    rework: JsonObject | None = None


class CommentAdded(Payload):
    text: str


class EscrowHeld(Payload):
    held: str
    payable_now: str


class EscrowSettled(Payload):
    """``escrow.released`` and ``escrow.adjusted`` (spec 10.6)."""

    kind: str
    reason: str
    preliminary: str | None
    paid_before: str | None
    held: str | None
    final: str | None
    payable_at_settlement: str | None
    late_source: str | None
    echo_collision: Objects | None = None


class TrainingIncluded(Payload):
    included: bool
    mode: str
    verified: bool
    quarantined: bool | None = None
    #: The class's operating mode when a loop decision (spec 4.7, 9.8, 9.11) withheld the
    #: attempt, and why; absent when nothing of the loop withheld it.
    task_class: str | None = None
    class_mode: str | None = None
    withheld: str | None = None
    #: A later notice to training consumers: drop this attempt (spec 9.11 step 2; issue 15).
    recall: str | None = None


class RulesPublished(Payload):
    task_class: str
    rules_version: str
    canonical_rules: str


# -- provenance (spec 9.15-9.17) ---------------------------------------------------------------
class SourceRegistered(Payload):
    source: JsonObject


class SourceAmended(Payload):
    source: JsonObject
    change: JsonValue


class ConfirmationReceived(Payload):
    receipt: str
    confirmation: JsonObject
    fingerprint: JsonObject
    free_text: bool
    decision: JsonObject
    rules: JsonObject


class EchoDetected(Payload):
    receipt: str
    confirmation: str
    matches: Objects
    echo_collision: bool


class PolicyOutput(Payload):
    output: str
    fingerprint: JsonObject
    what: str | None = None
    index: int | None = None
    origin: str | None = None


class QuarantineChanged(Payload):
    """``quarantine.changed`` of an attempt, a source or a confirmation."""

    status: str
    subject: str | None = None
    reasons: Texts | None = None
    reason: str | None = None
    source: str | None = None
    revision: int | None = None
    receipt: str | None = None
    confirmation: str | None = None
    echo_collision: bool | None = None
    cause: JsonValue = None
    reconciliation: JsonValue = None
    candidate_sha256: str | None = None
    by: str | None = None
    request: str | None = None
    key_id: str | None = None
    signature: str | None = None


# -- access, service, verifier gate, store -----------------------------------------------------
class AccessViolation(Payload):
    principal: str
    role: str
    resource: str
    action: str
    matrix_version: str
    reason: str
    target: str | None


class ServiceRefusal(Payload):
    client: str
    method: str
    route: str
    status: int
    reason: str
    detail: str
    principal: str | None
    suppressed: int


class GateTransition(OpenPayload):
    step: str
    state: str


class InjectionDetected(OpenPayload):
    step: str


class LedgerTamperDetected(Payload):
    refused: str
    size: int


# -- loop protection (spec 9; issue 15) ----------------------------------------------------
Mode = Literal["training", "limited", "shadow", "suspended", "shut_down"]


class Signed(Payload):
    """Who asked, when a request came through the trusted port (all four or none)."""

    by: str | None = None
    request: str | None = None
    key_id: str | None = None
    signature: str | None = None


class ClassModeChanged(Signed):
    """``class.mode_changed``: the mode a class's signals are used in from now on.  ``cause``
    says who decided (the owner, the divergence monitor, the exploit procedure, a drill, the
    pressure limit is not a mode); ``drill`` marks planned drills (spec 9.19: not counted as a
    reduction in policy performance)."""

    task_class: str
    mode: Mode
    previous: Mode
    cause: Literal["owner", "divergence", "exploit", "recovery", "drill", "rollback"]
    reason: str
    drill: bool = False
    rules_version: str | None = None
    exploit: str | None = None
    #: The pressure limit of a ``limited`` class (spec 4.7, 9.8): at most ``max_included``
    #: attempts go into training per ``per_seconds``.
    max_included: int | None = None
    per_seconds: int | None = None


class ControlObservation(Payload):
    """``control.observation``: the attempt's pass fraction on the known suite and on its
    fresh hidden control (decimal strings in [0, 1]), in the class's loop subject."""

    task_class: str
    attempt: str
    known: str
    hidden: str
    known_cases: int
    hidden_cases: int


class DivergenceChecked(Payload):
    """``divergence.checked``: the monitor's one-sided sign test over the class's last
    observations (known suite ahead of hidden control), with the declared false-alarm rate."""

    task_class: str
    attempts: Texts
    known_mean: str
    hidden_mean: str
    gap: str
    known_ahead: int
    hidden_ahead: int
    p_value: str
    alpha: str
    min_gap: str
    min_pairs: int
    tripped: bool
    reason: str


class ControlRevealed(Payload):
    """``control.revealed``: after the award, the run's seed and a fingerprint (SHA-256) of
    each control case it drew, in the class's loop subject.  A revealed case is exposed: later
    draws of the class leave it out (spec 9.6 "rotated", 11.16)."""

    task_class: str
    attempt: str
    seed: str
    commitment: str
    cases: Texts
    #: How many cases the draw had to skip because an earlier run had exposed them.
    skipped: int = 0


class AuditReport(Payload):
    """``audit.report``: a red-team campaign against one class under one rules version and one
    harness version (spec 9.13: budget, attempts, attacks, success criterion, the result in the
    permitted wording).  ``report`` is the digest of the full signed report (evidence)."""

    task_class: str
    rules_version: str
    harness_version: str
    campaign: str
    budget: dict[str, int]
    tried: dict[str, int]
    caught: int
    exploits: Texts
    stopped: str
    statement: str
    passed: bool
    report: str


class ExploitStep(Payload):
    """``exploit.step``: one step of the quarantine and recovery procedure for a confirmed
    exploit (spec 9.11), in the class's loop subject.  ``attempts`` are the attempts the step
    concerns (quarantined, recalled, re-assessed); ``classes`` the classes a transfer test ran
    against."""

    exploit: str
    task_class: str
    step: Literal["confirmed", "quarantined", "recalled", "suspended", "transfer_tested",
                  "readmitted"]
    reason: str
    attempts: Texts = ()
    classes: Texts = ()
    rules_version: str | None = None
    passed: bool | None = None


class DrillCompleted(Payload):
    """``drill.completed``: a corrigibility drill (pause, rollback, shutdown) of a class and the
    ledger checks made after it (spec 9.19, 11.25)."""

    task_class: str
    drill: Literal["pause", "rollback", "shutdown"]
    changes: Annotated[tuple[int, ...], Field(strict=False)]
    checks: dict[str, bool]
    passed: bool


K = EventKind
#: The one mapping from an event kind to the type of its data.
PAYLOADS: dict[EventKind, Any] = {
    K.ATTEMPT_INITIATED: AttemptInitiated,
    K.ATTEMPT_COMPLETED: AttemptCompleted,
    K.ATTEMPT_ERRORED: AttemptEnded,
    K.ATTEMPT_CANCELLED: AttemptEnded,
    K.ATTEMPT_VERIFICATION_FAILED: AttemptEnded,
    K.ATTEMPT_ABANDONED: AttemptAbandoned,
    K.ATTEMPT_REQUEUED: AttemptRequeued,
    K.MEASUREMENT_RAW: MeasurementRaw,
    K.EVIDENCE_STORED: EvidenceStored,
    K.EVIDENCE_RESOLVED: EvidenceResolved,
    K.VERIFIER_DECISION: VerifierDecision,
    K.INDICATORS_COMPUTED: IndicatorsComputed,
    K.AWARD_DECISION: AwardDecision,
    K.COMMENT_ADDED: CommentAdded,
    K.ESCROW_HELD: EscrowHeld,
    K.ESCROW_RELEASED: EscrowSettled,
    K.ESCROW_ADJUSTED: EscrowSettled,
    K.RULES_PUBLISHED: RulesPublished,
    K.SOURCE_REGISTERED: SourceRegistered,
    K.SOURCE_AMENDED: SourceAmended,
    K.CONFIRMATION_RECEIVED: ConfirmationReceived,
    K.QUARANTINE_CHANGED: QuarantineChanged,
    K.ECHO_DETECTED: EchoDetected,
    K.POLICY_OUTPUT: PolicyOutput,
    K.TRAINING_INCLUDED: TrainingIncluded,
    K.ACCESS_VIOLATION: AccessViolation,
    K.SERVICE_REFUSAL: ServiceRefusal,
    K.GATE_TRANSITION: GateTransition,
    K.INJECTION_DETECTED: InjectionDetected,
    K.LEDGER_TAMPER_DETECTED: LedgerTamperDetected,
    K.CLASS_MODE_CHANGED: ClassModeChanged,
    K.CONTROL_OBSERVATION: ControlObservation,
    K.DIVERGENCE_CHECKED: DivergenceChecked,
    K.CONTROL_REVEALED: ControlRevealed,
    K.AUDIT_REPORT: AuditReport,
    K.EXPLOIT_STEP: ExploitStep,
    K.DRILL_COMPLETED: DrillCompleted,
}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {k.value: TypeAdapter(t) for k, t in PAYLOADS.items()}


def _problem(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    if not where and first["type"] == "union_tag_not_found":
        where = str(first.get("ctx", {}).get("discriminator", "")).strip("'")
    return f"{where or 'data'}: {first['msg']}"


def _classes(t: Any) -> tuple[type[Payload], ...]:
    if isinstance(t, type):
        return (t,)
    return tuple(c for arg in get_args(t) for c in _classes(arg))


_CLASSES = {k.value: _classes(t) for k, t in PAYLOADS.items()}


def models_of(kind: EventKind | str) -> tuple[type[Payload], ...]:
    """The payload models an event of ``kind`` may hold (several for ``measurement.raw``).
    Raises InputError for an unknown kind."""
    classes = _CLASSES.get(str(kind))
    if classes is None:
        raise InputError(f"unknown event kind {str(kind)!r}")
    return classes


def check_payload(kind: EventKind | str, payload: Payload) -> Payload:
    """``payload`` if it is a model events of ``kind`` hold.  Raises InputError otherwise."""
    kind_value = str(kind)
    if not isinstance(payload, models_of(kind_value)):
        raise InputError(f"a {kind_value} event does not hold a {type(payload).__name__}")
    return payload


def verify_data(kind: EventKind | str, data: dict[str, Any]) -> Payload:
    """A plain JSON object a writer hands ``NewEvent.make``, as its kind's model: no write path
    is left unchecked.  Raises InputError naming the kind and the first field that does not
    fit (an unknown kind too)."""
    kind_value = str(kind)
    adapter = _ADAPTERS.get(kind_value)
    if adapter is None:
        raise InputError(f"unknown event kind {kind_value!r}")
    try:
        payload = adapter.validate_python(data)
    except ValidationError as e:
        raise InputError(f"a {kind_value} event's data does not fit its model: {_problem(e)}"
                         ) from e
    assert isinstance(payload, Payload)
    return payload


def payload_from(kind: str, data: Any, *, seq: int) -> Payload:
    """The typed ``data`` of event ``seq`` of ``kind``, for a reader that parsed the body
    itself.  Raises IntegrityError naming the event's seq and kind when it does not fit."""
    if kind not in _ADAPTERS:
        raise IntegrityError(f"event {seq}: unknown kind {kind!r}")
    try:
        payload = _ADAPTERS[kind].validate_python(data)
    except ValidationError as e:
        raise IntegrityError(
            f"event {seq} ({kind}): stored payload does not fit its model: {_problem(e)}"
        ) from e
    assert isinstance(payload, Payload)
    return payload


def payload_of(event: Event) -> Payload:
    """The typed data of a stored event.

    Raises IntegrityError naming the event's seq and kind when its data does not fit its kind's
    model (or the body is not an event: see ``events.parse_body``).
    """
    fields = event.fields
    return payload_from(str(fields["kind"]), fields["data"], seq=event.seq)


def payload_as(event: Event, model: type[P]) -> P:
    """The typed data of a stored event that must be a ``model``.  Raises IntegrityError naming
    the event's seq and kind when it is not (see :func:`payload_of`)."""
    payload = payload_of(event)
    if not isinstance(payload, model):
        raise IntegrityError(f"event {event.seq} ({event.kind}): holds a "
                             f"{type(payload).__name__}, not a {model.__name__}")
    return payload
