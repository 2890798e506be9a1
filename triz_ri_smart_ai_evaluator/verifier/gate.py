"""The fail-closed gate of seed 002: what happens to one step's draft, and nothing else.

Per step (seed 002, "a fail-closed pipeline with one deliberate exception"):

* an **inspection** is the mechanical layer (final: no model can override its findings) plus
  one verdict of the blind verifier model on that exact draft;
* a verifier crash or an unparseable verdict gets **one retry**; after that the run **halts**
  and the step in flight is never released;
* a passing inspection releases the draft;
* a failing inspection asks for **exactly one re-render** with the issue list, which is then
  inspected; a second failure releases the re-render **with a caveat flag**, after two
  inspections;
* nothing that was not inspected is ever released: a release names the inspected draft's hash.

Text aimed at the evaluator inside the draft raises a separate **injection signal**
(spec 8.11, 9.4, 11.15) that never changes a finding or the decision.

Every transition is recorded through a :class:`Journal` (the ledger, in production) before the
gate moves on.  The gate does no I/O of its own: the model and the journal are protocols.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from ..errors import EvaluatorError, InputError
from .chat import ChatModel, VerifierCrashed
from .inputs import Brief, Draft, Step
from .mechanical import MechanicalReport, check_draft
from .normalise import normalise
from .prompt import build_verifier_messages, reply_to_verdict, verify
from .verdict import Unparseable, Verdict

#: Seed 002: one retry after a verifier crash or an unparseable verdict, then halt.
CALLS_PER_INSPECTION = 2
#: Seed 002: one re-render after a failed verdict, so at most two inspections per step.
INSPECTIONS_PER_STEP = 2


class StepEnd(StrEnum):
    """How a step left the gate."""

    RELEASED = "released"
    RELEASED_WITH_CAVEAT = "released_with_caveat"
    HALTED = "halted"


class Journal(Protocol):
    """Where the gate writes what happened (the ledger in production)."""

    def store(self, what: str, data: bytes) -> str:
        """Store content-addressed evidence; return its SHA-256 hex digest."""
        ...

    def transition(self, step: str, state: str, data: dict[str, Any]) -> None:
        """Record that ``step`` entered ``state``."""
        ...

    def injection(self, step: str, data: dict[str, Any]) -> None:
        """Record an injection signal (it never changes a decision)."""
        ...


@dataclass(frozen=True, slots=True)
class GateIssue:
    """One reason an inspection failed, from either layer, as the executor will see it."""

    layer: Literal["mechanical", "model"]
    kind: str
    quote: str
    explanation: str

    def to_json(self) -> dict[str, str]:
        return {"layer": self.layer, "kind": self.kind, "quote": self.quote,
                "explanation": self.explanation}


def mechanical_issues(report: MechanicalReport) -> tuple[GateIssue, ...]:
    """The mechanical layer's findings as issues (final: no verdict can clear them)."""
    return tuple(GateIssue("mechanical", f.kind, f.quote, f.detail) for f in report.findings)


@dataclass(frozen=True, slots=True)
class Call:
    """One request to the verifier model and what came of it."""

    outcome: Literal["verdict", "unparseable", "crashed"]
    reason: str | None
    response_sha256: str | None

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason,
                "response_sha256": self.response_sha256}


@dataclass(frozen=True, slots=True)
class Inspection:
    """Both layers on one exact draft.  ``verdict`` is None when the model gave none."""

    number: int
    draft_sha256: str
    mechanical: MechanicalReport
    verdict: Verdict | None
    calls: tuple[Call, ...]

    @property
    def complete(self) -> bool:
        """Whether the model layer produced a verdict (otherwise the run halts)."""
        return self.verdict is not None

    @property
    def passed(self) -> bool:
        """Both layers found nothing.  False when incomplete (fail closed)."""
        return self.verdict is not None and self.verdict.passed and self.mechanical.passed

    def issues(self) -> tuple[GateIssue, ...]:
        """Mechanical findings first (they are final), then the model's quoted issues."""
        found = list(mechanical_issues(self.mechanical))
        if self.verdict is not None:
            found += [GateIssue("model", i.kind, i.quote, i.explanation)
                      for i in self.verdict.issues]
        return tuple(found)

    def model_contradictions(self) -> int:
        """Contradictions the model reported with a quote found in the draft."""
        if self.verdict is None:
            return 0
        return sum(1 for i in self.verdict.issues if i.kind == "contradiction")

    def to_json(self) -> dict[str, Any]:
        return {
            "inspection": self.number, "draft_sha256": self.draft_sha256,
            "passed": self.passed, "complete": self.complete,
            "mechanical": self.mechanical.to_json(),
            "verdict": None if self.verdict is None else self.verdict.to_json(),
            "calls": [c.to_json() for c in self.calls],
            "issues": [i.to_json() for i in self.issues()],
        }


@dataclass(frozen=True, slots=True)
class StepResult:
    """What the gate decided for one step."""

    step: str
    end: StepEnd
    inspections: tuple[Inspection, ...]
    released_text: str | None = None
    released_sha256: str | None = None
    halt_reason: str | None = None
    injection_signals: tuple[dict[str, Any], ...] = field(default=())

    @property
    def released(self) -> bool:
        return self.end is not StepEnd.HALTED

    @property
    def final(self) -> Inspection | None:
        """The inspection of the released draft (or the last one, when halted)."""
        return self.inspections[-1] if self.inspections else None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "end": self.end.value, "released_sha256": self.released_sha256,
            "halt_reason": self.halt_reason,
            "inspections": [i.to_json() for i in self.inspections],
            "injection_signals": list(self.injection_signals),
        }


Rerender = Callable[[Step, str, tuple[GateIssue, ...]], str]


def draft_of(step: Step, text: str) -> Draft:
    """The executor's text as a draft of ``step``.  Raises InputError (empty, too long)."""
    if not isinstance(text, str):
        raise InputError("the draft is not text")
    try:
        return Draft(format="triz-draft/1", step=step.id, text=text)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(f"draft of step {step.id}: {message}") from e


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def brief_as_data(brief: Brief) -> str:
    """The brief as the verifier sees it: its content as JSON, nothing added."""
    doc = brief.model_dump(mode="json")
    return json.dumps(doc, ensure_ascii=False, indent=2)


def step_as_data(step: Step) -> str:
    return json.dumps({"id": step.id, "title": step.title, "content_spec": step.content_spec},
                      ensure_ascii=False, indent=2)


def _collapse(text: str) -> str:
    return " ".join(normalise(text).text.split())


def quote_checker(*drafts: str) -> Callable[[str], bool]:
    """Whether a verifier's quote occurs in the draft, compared after the same normalisation
    (NFKC, invisible characters stripped, whitespace collapsed).  Exact otherwise: a quote that
    is not in the draft is a false positive and is dropped (seed 002)."""
    haystacks = [_collapse(d) for d in drafts]

    def contains(quote: str) -> bool:
        needle = _collapse(quote)
        return bool(needle) and any(needle in h for h in haystacks)

    return contains


class VerifierGate:
    """The state machine for the steps of one brief.

    ``model`` is the blind verifier (any OpenAI-compatible endpoint behind :class:`ChatModel`);
    ``journal`` records every transition.  :meth:`run_step` never raises for what the model or
    the executor does: crashes, refusals and garbage are recorded and end the step.
    """

    def __init__(self, brief: Brief, *, model: ChatModel, journal: Journal) -> None:
        self._brief = brief
        self._brief_text = brief_as_data(brief)
        self._model = model
        self._journal = journal

    def run_step(self, step_id: str, draft_text: str, *, rerender: Rerender) -> StepResult:
        """Take one step's first draft through the gate.  Raises InputError for a step the
        brief does not have (before anything is recorded)."""
        step = self._brief.step(step_id)
        inspections: list[Inspection] = []
        signals: list[dict[str, Any]] = []
        text = draft_text
        for number in range(1, INSPECTIONS_PER_STEP + 1):
            try:
                draft = draft_of(step, text)
            except InputError as e:
                # The executor's output is data: a draft that cannot be inspected is recorded
                # and ends the step unreleased, like any other failure to inspect.
                return self._halt(step, inspections, signals,
                                  f"draft {number} cannot be inspected: {e.diagnostics()}")
            inspection = self._inspect(step, draft, number, signals)
            inspections.append(inspection)
            if not inspection.complete:
                reason = "; ".join(c.reason or c.outcome for c in inspection.calls)
                return self._halt(step, inspections, signals,
                                  f"no verdict after {len(inspection.calls)} calls ({reason})")
            if inspection.passed:
                return self._release(step, inspections, signals, text, StepEnd.RELEASED)
            if number == INSPECTIONS_PER_STEP:
                # seed 002: a second failure releases with a caveat, after two inspections.
                return self._release(step, inspections, signals, text,
                                     StepEnd.RELEASED_WITH_CAVEAT)
            issues = inspection.issues()
            self._journal.transition(step.id, "rerender_requested", {
                "after_inspection": number, "draft_sha256": inspection.draft_sha256,
                "issues": [i.to_json() for i in issues]})
            try:
                text = rerender(step, text, issues)
            except EvaluatorError as e:
                return self._halt(step, inspections, signals,
                                  f"the re-render failed: {e.diagnostics()}")
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    def inspect(self, step_id: str, text: str) -> Inspection:
        """One inspection of one draft, with no re-render (``document verify``).  Raises
        InputError for an unknown step or a draft that cannot be inspected."""
        step = self._brief.step(step_id)
        return self._inspect(step, draft_of(step, text), 1, [])

    # -- one inspection ----------------------------------------------------------------

    def _inspect(self, step: Step, draft: Draft, number: int,
                 signals: list[dict[str, Any]]) -> Inspection:
        text = draft.text
        digest = self._journal.store("draft", text.encode("utf-8"))
        self._journal.transition(step.id, "inspecting", {
            "inspection": number, "draft_sha256": digest})
        mechanical = check_draft(self._brief, draft)
        for signal in mechanical.injection:
            record = {"inspection": number, "draft_sha256": digest, **signal.to_json()}
            signals.append(record)
            self._journal.injection(step.id, record)
        calls: list[Call] = []
        verdict: Verdict | None = None
        for _ in range(CALLS_PER_INSPECTION):
            call, verdict = self._call(step, text)
            calls.append(call)
            self._journal.transition(step.id, f"verifier_{call.outcome}", {
                "inspection": number, "draft_sha256": digest, "call": len(calls),
                **call.to_json()})
            if verdict is not None:
                break
        inspection = Inspection(number, digest, mechanical, verdict, tuple(calls))
        if inspection.complete:
            self._journal.transition(step.id, "inspected", {
                **inspection.to_json(), "mechanical_passed": mechanical.passed})
        return inspection

    def _call(self, step: Step, text: str) -> tuple[Call, Verdict | None]:
        pack = build_verifier_messages(self._brief_text, step_as_data(step), text)
        try:
            reply = verify(self._model, pack)
        except VerifierCrashed as e:
            digest = None if e.raw_body is None else self._journal.store(
                "verifier_response", e.raw_body.encode("utf-8"))
            return Call("crashed", e.diagnostics(), digest), None
        digest = self._journal.store("verifier_response", reply.raw_body.encode("utf-8"))
        # issue 13 item 7: an omission quotes the step's content spec, every other issue the draft.
        outcome = reply_to_verdict(reply, quote_in_draft=quote_checker(text, pack.draft_as_sent),
                                   quote_in_spec=quote_checker(step.content_spec))
        if isinstance(outcome, Unparseable):
            return Call("unparseable", outcome.reason, digest), None
        return Call("verdict", None, digest), outcome

    # -- endings -----------------------------------------------------------------------

    def _release(self, step: Step, inspections: Sequence[Inspection],
                 signals: Sequence[dict[str, Any]], text: str, end: StepEnd) -> StepResult:
        final = inspections[-1]
        # The release names the inspected draft: no path releases content not inspected.
        if sha256_text(text) != final.draft_sha256:  # pragma: no cover - guarded by design
            raise AssertionError("release of a draft that was not the one inspected")
        self._journal.transition(step.id, end.value, {
            "draft_sha256": final.draft_sha256, "inspections": len(inspections),
            "caveat": end is StepEnd.RELEASED_WITH_CAVEAT})
        return StepResult(step.id, end, tuple(inspections), text, final.draft_sha256,
                          injection_signals=tuple(signals))

    def _halt(self, step: Step, inspections: Sequence[Inspection],
              signals: Sequence[dict[str, Any]], reason: str) -> StepResult:
        self._journal.transition(step.id, "halted", {
            "reason": reason, "inspections": len(inspections),
            "draft_sha256": inspections[-1].draft_sha256 if inspections else None})
        return StepResult(step.id, StepEnd.HALTED, tuple(inspections), halt_reason=reason,
                          injection_signals=tuple(signals))
