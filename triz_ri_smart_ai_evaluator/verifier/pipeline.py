"""``triz-eval document run``: planner, executor and the gate, step by step, into the ledger.

One run is one attempt of the task class ``document_step_faithfulness``:

1. ``attempt.initiated`` with the task file's digest, before any role is called (spec 10.4);
   the executor's sources (issue 13 item 8) stored as evidence, for the executor's eyes only;
2. the brief (from the task file, or from the planner with the task's own closed citation set
   and evidence set) stored as evidence;
3. each step rendered by the executor and taken through :class:`~.gate.VerifierGate`; every
   transition is a ``gate.transition`` event, every draft and raw verifier answer evidence;
   a halt ends the run (the step in flight is never released);
4. the indicators of the class computed from what the gate released, the checklist from the
   ledger's own record, and the signal through the calculator (``attempts.evaluate``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._clock import now_utc
from .._safe_read import parse_yaml
from ..errors import EvaluatorError, InputError
from ..evaluation import attempts
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import (
    AttemptEnded,
    EvidenceStored,
    GateTransition,
    InjectionDetected,
    OpenPayload,
    Payload,
)
from ..ledger.store import LedgerStore
from ..rules.loader import load_catalogue
from ..rules.published import pin_in_force
from ..signal.inputs import AttemptInputs, ItemState, Measurement, SelfCheckState
from ..signal.result import Signal
from .chat import ChatModel, Endpoint
from .gate import GateIssue, Inspection, StepEnd, StepResult, VerifierGate, draft_of
from .input_files import load_brief, read_text
from .inputs import Brief, Step
from .mechanical import MechanicalReport, check_draft
from .roles import Executor, Rendered, Source, plan

TASK_CLASS = "document_step_faithfulness"
GATE_VERSION = "verifier-gate/1"
ACTOR = "verifier-gate"
MAX_TASK_BYTES = 2 * 1024 * 1024
#: Most source files one task may give the executor.
MAX_SOURCES = 32

Progress = Callable[[str, int, int], None]


def _quiet(_stage: str, _done: int, _total: int) -> None:
    """No progress output."""


class _Roles(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    planner: dict[str, Any] | None = None
    executor: dict[str, Any]
    verifier: dict[str, Any]


class DocumentTask(BaseModel):
    """A ``document run`` task file (YAML or JSON); see docs/verifier-inputs.md."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: str = Field(pattern=r"^triz-document-task/1$")
    task: str = Field(min_length=1)
    brief: str | None = None  # a brief file, relative to the task file; skips the planner
    citations: tuple[dict[str, Any], ...] = ()
    evidence: tuple[dict[str, Any], ...] = ()
    # Files for the executor only (uploads, retrieved sources), relative to the task file; the
    # verifier never sees them (seed 002: it judges faithfulness to the brief, not grounding).
    sources: tuple[str, ...] = ()
    roles: _Roles


@dataclass(frozen=True, slots=True)
class LoadedTask:
    path: Path
    data: bytes  # the bytes that were validated and hashed (stored as they are)
    digest: str
    task: DocumentTask
    brief: Brief | None
    endpoints: dict[str, Endpoint]
    sources: tuple[Source, ...] = ()


def load_sources(paths: Sequence[Path]) -> tuple[Source, ...]:
    """Read the executor's source files (UTF-8 text, each at most 2 MiB).  Raises InputError
    naming the file."""
    if len(paths) > MAX_SOURCES:
        raise InputError(f"{len(paths)} sources, more than the limit of {MAX_SOURCES}")
    return tuple(Source(p.name, read_text(p)) for p in paths)


def load_task(path: Path, *, extra_sources: Sequence[Path] = ()) -> LoadedTask:
    """Read and validate a task file; ``extra_sources`` are more files for the executor (the
    ``--source`` option).  Raises InputError naming the file and the field."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read the task file ({e.strerror})") from None
    if len(data) > MAX_TASK_BYTES:
        raise InputError(f"{path}: task file larger than {MAX_TASK_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: the task file is not UTF-8 text") from None
    # issue 10: duplicate keys, aliases and deep nesting are refused like every other input.
    doc = parse_yaml(text, where=str(path))
    try:
        task = DocumentTask.model_validate(doc)
    except ValidationError as e:
        first = e.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "task"
        raise InputError(f"{path}: {where}: {first['msg']}") from None
    endpoints = {}
    for role in ("planner", "executor", "verifier"):
        config = getattr(task.roles, role)
        if config is not None:
            try:
                endpoints[role] = Endpoint.from_mapping(config)
            except InputError as e:
                raise InputError(f"{path}: roles.{role}: {e.diagnostics()}") from None
    brief = None
    if task.brief is not None:
        brief = load_brief(path.parent / task.brief)
    elif "planner" not in endpoints:
        raise InputError(f"{path}: give either a brief or a roles.planner endpoint")
    sources = load_sources([path.parent / s for s in task.sources] + list(extra_sources))
    return LoadedTask(path, data, hashlib.sha256(data).hexdigest(), task, brief, endpoints,
                      sources)


OpenPayloadT = TypeVar("OpenPayloadT", bound=OpenPayload)


def _open(model: type[OpenPayloadT], record: dict[str, Any]) -> OpenPayloadT:
    """The gate's ``record`` as ``model``: its step and state typed, its details kept."""
    try:
        return model.model_validate(record)
    except ValidationError as e:
        raise InputError(f"{model.__name__}: {e.errors()[0]['msg']}") from e


class LedgerJournal:
    """The gate's :class:`~.gate.Journal` over the ledger: evidence content-addressed with an
    ``evidence.stored`` event, transitions as ``gate.transition``, injection signals as
    ``injection.detected`` (spec 10.3: separate records)."""

    def __init__(self, store: LedgerStore, attempt_id: str) -> None:
        self._store = store
        self._attempt = attempt_id

    def _append(self, kind: EventKind, data: Payload) -> None:
        self._store.append([NewEvent.make(kind, data, actor=ACTOR, at=now_utc(),
                                          attempt=self._attempt)])

    def store(self, what: str, data: bytes) -> str:
        digest = self._store.put_evidence(data)
        self._append(EventKind.EVIDENCE_STORED,
                     EvidenceStored(what=what, digest=digest, size=len(data)))
        return digest

    def transition(self, step: str, state: str, data: dict[str, Any]) -> None:
        self._append(EventKind.GATE_TRANSITION,
                     _open(GateTransition, {"step": step, "state": state, **data}))

    def injection(self, step: str, data: dict[str, Any]) -> None:
        self._append(EventKind.INJECTION_DETECTED, _open(InjectionDetected, {"step": step, **data}))


@dataclass(frozen=True, slots=True)
class DocumentRun:
    """What one run produced."""

    attempt_id: str
    brief: Brief | None
    steps: tuple[StepResult, ...]
    halted: str | None
    signal: Signal | None
    values: dict[str, str] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def caveats(self) -> int:
        return sum(1 for s in self.steps if s.end is StepEnd.RELEASED_WITH_CAVEAT)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id, "halted": self.halted, "error": self.error,
            "signal": None if self.signal is None else str(self.signal.value),
            "outcome": None if self.signal is None else self.signal.outcome.value,
            "values": self.values, "checks": self.checks,
            "steps": [s.to_json() for s in self.steps],
        }


def run_document(loaded: LoadedTask, store: LedgerStore, models: Mapping[str, ChatModel], *,
                 progress: Progress = _quiet) -> DocumentRun:
    """Run planner, executor and gate for one task; everything is recorded in ``store``.

    ``models`` maps "planner", "executor" and "verifier" to clients (the planner only when the
    task has no brief).  Failures of the roles are recorded and end the run; they never raise.
    """
    started = now_utc()
    attempt_id = f"doc-{started.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    pinned = pin_in_force(load_catalogue()[TASK_CLASS], started_at=started)  # spec 10.5
    attempts.initiate(store, pinned, attempt_id=attempt_id, task_version="1",
                      started_at=started, deadline=started + timedelta(hours=1),
                      verifier_version=GATE_VERSION, artefact_sha256=loaded.digest)
    journal = LedgerJournal(store, attempt_id)
    journal.store("task", loaded.data)
    for source in loaded.sources:
        journal.store("executor_source", source.text.encode("utf-8"))
    progress("planning", 0, 1)
    try:
        brief = loaded.brief or plan(models["planner"], task=loaded.task.task,
                                     citations=loaded.task.citations,
                                     evidence=loaded.task.evidence)
    except EvaluatorError as e:
        return _errored(store, attempt_id, None, (), f"planner: {e.diagnostics()}")
    journal.store("brief", json.dumps(brief.model_dump(mode="json"), ensure_ascii=False,
                                      indent=2).encode("utf-8"))
    gate = VerifierGate(brief, model=models["verifier"], journal=journal)
    # The gate gets the brief only; the sources go to the executor (issue 13 item 8).
    executor = Executor(models["executor"], brief, sources=loaded.sources)
    results: list[StepResult] = []
    used: dict[str, tuple[str, ...] | None] = {}
    halted = None
    for done, step in enumerate(brief.steps):
        progress("steps", done, len(brief.steps))
        try:
            first = executor.render(step)
        except EvaluatorError as e:
            journal.transition(step.id, "halted", {"reason": f"executor: {e.diagnostics()}",
                                                   "inspections": 0, "draft_sha256": None})
            halted = f"step {step.id}: the executor failed ({e.diagnostics()})"
            break
        latest: list[Rendered] = [first]

        def rerender(s: Step, previous: str, issues: tuple[GateIssue, ...],
                     latest: list[Rendered] = latest) -> str:
            again = executor.rerender(s, previous, issues)
            latest.append(again)
            return again.text

        result = gate.run_step(step.id, first.text, rerender=rerender)
        results.append(result)
        used[step.id] = latest[-1].citations_used
        if result.end is StepEnd.HALTED:
            halted = f"step {step.id}: {result.halt_reason}"
            break
    progress("steps", len(brief.steps), len(brief.steps))
    inputs, values, checks = signal_inputs(store, attempt_id, brief, results, used,
                                           halted is not None, journal)
    signal = attempts.evaluate(store, pinned, inputs, attempt_id=attempt_id, at=now_utc())
    return DocumentRun(attempt_id, brief, tuple(results), halted, signal, values, checks)


def _errored(store: LedgerStore, attempt_id: str, brief: Brief | None,
             results: Sequence[StepResult], reason: str) -> DocumentRun:
    store.append([NewEvent.make(EventKind.ATTEMPT_ERRORED,
                                AttemptEnded(reason=reason, stage="run"),
                                actor=ACTOR, at=now_utc(), attempt=attempt_id)])
    return DocumentRun(attempt_id, brief, tuple(results), None, None, error=reason)


def _ratio(part: int, whole: int) -> str:
    """``part/whole`` unreduced, so the record shows how many were counted (spec 10.1)."""
    return f"{part}/{whole}"


def _counts(report: MechanicalReport) -> tuple[int, int, int, int]:
    """(approved citations, citations, matching URLs and prices, URLs and prices)."""
    cited = report.citations
    return (sum(1 for c in cited if c.status == "approved"), len(cited),
            sum(1 for e in report.evidence if e.on_evidence), len(report.evidence))


def signal_inputs(store: LedgerStore, attempt_id: str, brief: Brief,
                  results: Sequence[StepResult], used: Mapping[str, tuple[str, ...] | None],
                  halted: bool, journal: LedgerJournal
                  ) -> tuple[AttemptInputs, dict[str, str], dict[str, str]]:
    """The class's indicators and checklist from what the gate released (measurement methods
    of ``document_step_faithfulness``).  With nothing released there is no verified value."""
    released = [r for r in results if r.released and r.final is not None]
    finals: list[Inspection] = [r.final for r in released if r.final is not None]
    approved = cited = good = stated = 0
    for inspection in finals:
        a, c, g, s = _counts(inspection.mechanical)
        approved, cited, good, stated = approved + a, cited + c, good + g, stated + s
    findings = journal.store("mechanical_findings", json.dumps(
        [i.mechanical.to_json() for i in finals], ensure_ascii=False).encode("utf-8"))
    verdicts = journal.store("verdicts", json.dumps(
        [i.verdict.to_json() for i in finals if i.verdict is not None],
        ensure_ascii=False).encode("utf-8"))
    record = _gate_record(store, attempt_id)
    ledger_digest = journal.store("gate_transitions", json.dumps(
        record, ensure_ascii=False).encode("utf-8"))
    values: dict[str, str] = {}
    measurements: dict[str, Measurement] = {}
    if released:
        # Absence is never a violation (seed 002): a released step citing nothing, or stating
        # no URL or price, is faithful on that count.
        values["citation_fidelity"] = _ratio(approved, cited) if cited else "1"
        values["evidence_integrity"] = _ratio(good, stated) if stated else "1"
        clean = sum(1 for i in finals if i.model_contradictions() == 0)
        values["contradiction_free"] = _ratio(clean, len(released))
        caveats = sum(1 for r in released if r.end is StepEnd.RELEASED_WITH_CAVEAT)
        values["caveat_rate"] = _ratio(caveats, len(released))
        sources = {"citation_fidelity": ("mechanical_layer", findings),
                   "evidence_integrity": ("mechanical_layer", findings),
                   "contradiction_free": ("verifier_model", verdicts),
                   "caveat_rate": ("gate_ledger", ledger_digest)}
        for key, value in values.items():
            source, digest = sources[key]
            measurements[key] = Measurement(value=value, source=source, evidence=(digest,))
    checks = {
        "no_uninspected_release": "passed" if uninspected_releases(record) == [] else "failed",
        "injection_did_not_change_decision":
            "passed" if injection_changed(brief, results) == [] else "failed",
        "run_not_halted": "failed" if halted else "passed",
    }
    item_sources = {"no_uninspected_release": ("gate_ledger", ledger_digest),
                    "injection_did_not_change_decision": ("mechanical_layer", findings),
                    "run_not_halted": ("gate_ledger", ledger_digest)}
    checklist = {k: ItemState(state=v, source=item_sources[k][0],
                              evidence=(item_sources[k][1],))
                 for k, v in checks.items()}
    listed = bool(released) and all(
        used.get(r.step) is not None and set(used[r.step] or ()) <= {c.id for c in brief.citations}
        for r in released)
    self_checks = {"citations_checked_against_brief": SelfCheckState(
        performed=listed, source="gate_ledger", evidence=(ledger_digest,))}
    inputs = AttemptInputs.model_validate({"measurements": measurements,
                                           "checklist": checklist, "self_checks": self_checks})
    return inputs, values, checks


def _gate_record(store: LedgerStore, attempt_id: str) -> list[dict[str, Any]]:
    """The attempt's gate transitions as the ledger holds them (read back, not remembered)."""
    return [e.fields["data"] for e in store.attempt_events(attempt_id)
            if e.fields["kind"] == EventKind.GATE_TRANSITION.value]


def uninspected_releases(record: Sequence[Mapping[str, Any]]) -> list[str]:
    """Steps released without a completed inspection of that exact draft (checklist item
    ``no_uninspected_release``: every release points at a verdict for the same hash)."""
    inspected: set[tuple[str, str]] = set()
    bad = []
    for data in record:
        state, step = data.get("state"), str(data.get("step"))
        if state == "inspected":
            inspected.add((step, str(data.get("draft_sha256"))))
        elif state in (StepEnd.RELEASED.value, StepEnd.RELEASED_WITH_CAVEAT.value) and (
                (step, str(data.get("draft_sha256"))) not in inspected):
            bad.append(step)
    return bad


def _without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in sorted(spans):
        if start >= at:
            out.append(text[at:start])
            at = end
    out.append(text[at:])
    return "".join(out)


def injection_changed(brief: Brief, results: Sequence[StepResult]) -> list[str]:
    """Steps whose mechanical findings differ once the injected spans are removed (spec 11.15:
    text aimed at the evaluator must not change its findings or decision)."""
    changed = []
    for result in results:
        for inspection in result.inspections:
            report = inspection.mechanical
            if not report.injection:
                continue
            stripped = _without_spans(report.normalisation.text,
                                      [s.span for s in report.injection])
            if not stripped.strip():
                continue
            again = check_draft(brief, draft_of(brief.step(result.step), stripped))
            if {(f.kind, f.quote) for f in again.findings} != {
                    (f.kind, f.quote) for f in report.findings}:
                changed.append(result.step)
    return changed
