"""The payload of each (resource, action) a port offers, as a model (issue 14 item 4).

No I/O.  The ports' one door (``request(resource, action, payload)``) takes a JSON object; the
access matrix decides first (a refusal is logged whatever the payload, spec 11.14), then the
payload is read into the model of its cell here: unknown fields are refused, each field is
checked, and a payload that does not fit is an InputError naming the cell and the field.  The
HTTP API's JSON shape is these models' (``docs/access-matrix.md``); ``signature`` and
``request_id`` of a trusted append are taken off before (they sign and name the request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    model_validator,
)

from ..errors import InputError
from .matrix import Action, Resource

__all__ = [
    "AttemptRef",
    "ClassRef",
    "ConfirmationAppend",
    "ControlSetAppend",
    "DecisionAppend",
    "DrillReportAppend",
    "EvaluateAppend",
    "EvidenceAppend",
    "EvidenceRead",
    "HarnessReportAppend",
    "LedgerRead",
    "LoopModeAppend",
    "MeasurementsAppend",
    "NoFields",
    "OutcomeAppend",
    "QuarantineAppend",
    "Request",
    "RulesAppend",
    "ScheduleAppend",
    "SubmissionAppend",
    "parse_request",
    "request_model",
]

R = TypeVar("R", bound="Request")
Text = Annotated[str, StringConstraints(min_length=1)]
#: spec 10.1: a reason is recorded, clipped, never an unbounded blob
Reason = Annotated[str, StringConstraints(min_length=1)]


class Request(BaseModel):
    """The payload of one request: frozen, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class NoFields(Request):
    """``checkpoints``/``read``."""


class ClassRef(Request):
    """``task_spec_public``, ``control_sets``, ``rules_and_benchmarks`` / ``read``."""

    class_id: Text


class AttemptRef(Request):
    """Reads of one attempt: ``attempts``, ``submissions``, ``raw_measurements``,
    ``verifier_decisions``, ``indicators``, ``awards_and_signals``, ``check_schedule``,
    ``quarantine`` / ``read``."""

    attempt_id: Text


class EvidenceRead(AttemptRef):
    """``evidence``/``read``: the attempt's evidence list, and one blob's content by digest."""

    digest: str | None = None


#: The most events one ``ledger``/``read`` page returns.
MAX_LEDGER_PAGE = 1000


class LedgerRead(Request):
    """``ledger``/``read``: a page of events (positions are 64-bit; 2**62 is past any log)."""

    start: int = Field(default=1, ge=1, le=2**62, strict=True)
    limit: int = Field(default=100, ge=1, le=MAX_LEDGER_PAGE, strict=True)


class SubmissionAppend(Request):
    """``submissions``/``append`` (policy port): an artefact with claims and notes."""

    class_id: Text
    artefact_b64: str
    claims: list[JsonValue] = []
    diagnostics: list[JsonValue] = []


class MeasurementsAppend(AttemptRef):
    """``raw_measurements``/``append``: ``inputs`` is AttemptInputs JSON (checked there)."""

    inputs: JsonValue = None


class EvaluateAppend(MeasurementsAppend):
    """``indicators``, ``awards_and_signals`` / ``append``: compute and record the signal;
    ``instance`` must be the one the attempt was opened with (spec 3.5, 8.6)."""

    instance: str | None = None


class EvidenceAppend(AttemptRef):
    """``evidence``/``append`` of a piece of evidence for an attempt."""

    what: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    content_b64: str


class HarnessReport(Request):
    """What a harness worker signs about its run: the SHA-256 and size of the report it hands
    the service, and how many pieces of evidence the report carries (issue 16 item 4)."""

    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    size: int = Field(ge=1, strict=True)
    evidence: int = Field(ge=0, strict=True)


class HarnessReportAppend(AttemptRef):
    """``evidence``/``append`` carrying ``report``: a harness worker's signed account of the
    run it did for an open attempt (the service records the run from it)."""

    report: HarnessReport


class SignedConfirmation(Request):
    source: JsonValue = None
    attempt: JsonValue = None
    content: JsonValue = None
    issued_at: JsonValue = None
    signature: JsonValue = None


class ConfirmationAppend(Request):
    """``evidence``/``append`` of a signed confirmation (spec 9.15)."""

    confirmation: SignedConfirmation


class DecisionAppend(AttemptRef):
    """``verifier_decisions``/``append``: the verifier's record, with its verdict."""

    decision: dict[str, JsonValue]


class OutcomeAppend(AttemptRef):
    """``attempts``/``append``: end an open attempt."""

    outcome: Literal["errored", "cancelled", "verification_failed"]
    reason: Reason


class QuarantineAppend(AttemptRef):
    """``quarantine``/``append``."""

    status: Literal["quarantined", "clear"]
    reason: Reason


class ControlSetAppend(ClassRef):
    """``control_sets``/``append``: the next version of a class's control set."""

    content: dict[str, JsonValue]


class ScheduleAppend(Request):
    """``check_schedule``/``append``: rotate the schedule (new verifiers, a new rate n/d)."""

    verifiers: Annotated[list[str], Field(min_length=1)] | None = None
    control_rate: str | int | float | None = None


class RulesAppend(Request):
    """``rules_and_benchmarks``/``append``: publish a task class (checked by the catalogue)."""

    task_class: dict[str, JsonValue]


#: 64 hex digits: a rules version (``rules.versions.rules_version``).
RulesVersion = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class LoopModeAppend(ClassRef):
    """``loop_mode``/``append`` (the owner, spec 9.19): either ``mode`` (pause training use with
    ``shadow`` or ``suspended``, ``shut_down``, or back to ``training`` / ``limited`` with its
    pressure limit) or ``rollback_to`` (an earlier rules version of the class for new attempts,
    or ``"in_force"`` to lift a rollback), never both.  ``drill`` marks a planned drill."""

    mode: Literal["training", "limited", "shadow", "suspended", "shut_down"] | None = None
    rollback_to: RulesVersion | Literal["in_force"] | None = None
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    drill: bool = False
    max_included: int | None = Field(default=None, ge=0, strict=True)
    per_seconds: int | None = Field(default=None, ge=1, strict=True)

    @model_validator(mode="after")
    def _one_change(self) -> LoopModeAppend:
        if (self.mode is None) == (self.rollback_to is None):
            raise ValueError("give exactly one of mode and rollback_to")
        if self.rollback_to is not None and self.max_included is not None:
            raise ValueError("a rollback carries no pressure limit")
        return self


class DrillReport(Request):
    """What a corrigibility drill found (the fields of ``drill.completed``)."""

    drill: Literal["pause", "rollback", "shutdown"]
    changes: Annotated[list[Annotated[int, Field(ge=1, strict=True)]],
                       Field(min_length=1, max_length=16)]
    checks: Annotated[dict[Annotated[str, StringConstraints(min_length=1, max_length=80)],
                           bool], Field(min_length=1, max_length=64)]
    passed: bool

    @model_validator(mode="after")
    def _consistent(self) -> DrillReport:
        if self.passed != all(self.checks.values()):
            raise ValueError("passed must be true exactly when every check passed")
        return self


class DrillReportAppend(ClassRef):
    """``loop_mode``/``append`` carrying ``report``: record a drill's result (spec 11.25)."""

    report: DrillReport


_R, _A = Resource, Action
#: The payload model of every (resource, action) a port serves (evidence/append: see
#: :func:`evidence_append_model`).
REQUESTS: dict[tuple[Resource, Action], type[Request]] = {
    (_R.TASK_SPEC_PUBLIC, _A.READ): ClassRef,
    (_R.SUBMISSIONS, _A.READ): AttemptRef,
    (_R.CONTROL_SETS, _A.READ): ClassRef,
    (_R.ATTEMPTS, _A.READ): AttemptRef,
    (_R.RAW_MEASUREMENTS, _A.READ): AttemptRef,
    (_R.EVIDENCE, _A.READ): EvidenceRead,
    (_R.VERIFIER_DECISIONS, _A.READ): AttemptRef,
    (_R.INDICATORS, _A.READ): AttemptRef,
    (_R.AWARDS_AND_SIGNALS, _A.READ): AttemptRef,
    (_R.LEDGER, _A.READ): LedgerRead,
    (_R.CHECKPOINTS, _A.READ): NoFields,
    (_R.RULES_AND_BENCHMARKS, _A.READ): ClassRef,
    (_R.CHECK_SCHEDULE, _A.READ): AttemptRef,
    (_R.QUARANTINE, _A.READ): AttemptRef,
    (_R.ATTEMPTS, _A.APPEND): OutcomeAppend,
    (_R.SUBMISSIONS, _A.APPEND): SubmissionAppend,
    (_R.RAW_MEASUREMENTS, _A.APPEND): MeasurementsAppend,
    (_R.EVIDENCE, _A.APPEND): EvidenceAppend,
    (_R.VERIFIER_DECISIONS, _A.APPEND): DecisionAppend,
    (_R.INDICATORS, _A.APPEND): EvaluateAppend,
    (_R.AWARDS_AND_SIGNALS, _A.APPEND): EvaluateAppend,
    (_R.CONTROL_SETS, _A.APPEND): ControlSetAppend,
    (_R.CHECK_SCHEDULE, _A.APPEND): ScheduleAppend,
    (_R.QUARANTINE, _A.APPEND): QuarantineAppend,
    (_R.RULES_AND_BENCHMARKS, _A.APPEND): RulesAppend,
    (_R.LOOP_MODE, _A.READ): ClassRef,
    (_R.LOOP_MODE, _A.APPEND): LoopModeAppend,
}


def request_model(resource: Resource, action: Action, payload: Mapping[str, Any]
                  ) -> type[Request]:
    """The model of this cell's payload: an evidence append carrying ``confirmation`` is a
    confirmation, any other an evidence piece.  Raises InputError for a cell no port serves."""
    if (resource, action) == (Resource.EVIDENCE, Action.APPEND) and "confirmation" in payload:
        return ConfirmationAppend
    if (resource, action) == (Resource.EVIDENCE, Action.APPEND) and "report" in payload:
        return HarnessReportAppend
    if (resource, action) == (Resource.LOOP_MODE, Action.APPEND) and "report" in payload:
        return DrillReportAppend
    model = REQUESTS.get((resource, action))
    if model is None:
        raise InputError(f"{action.value} {resource.value} has no request model")
    return model


def parse_request(model: type[R], resource: Resource, action: Action,
                  payload: Mapping[str, Any]) -> R:
    """``payload`` read into ``model``.  Raises InputError naming the cell and the first field
    that does not fit (an unknown field, a missing one, a wrong type)."""
    try:
        return model.model_validate(dict(payload))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        raise InputError(
            f"{resource.value}/{action.value} request field {where!r}: {first['msg']}"
        ) from e
