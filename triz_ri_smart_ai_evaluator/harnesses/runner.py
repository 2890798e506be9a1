"""The generic attempt runner: the order every executable task class shares (issue 14 item 1).

1. isolation is probed before anything runs when the class needs the sandbox (DESIGN
   "isolation is measured, not assumed");
2. the candidate is materialised and its digest fixed in ``attempt.initiated`` before anything
   about the control set exists (spec 10.4; pilot 2, 6), and stored as evidence;
3. a commitment to a fresh secret seed is stored, and only then is the control set drawn from
   it (pilot 6; issue 12 item 12), leaving out every case an earlier run of the class revealed
   (spec 9.6 "rotated"; a set that holds one ends the attempt errored);
4. the class runs and judges the candidate (:meth:`~.protocol.Harness.execute`), storing its
   evidence through the context;
5. every stopping condition that fired quarantines the attempt before any award (pilot 12);
6. the critical layer's decision is recorded, then the signal through the one calculator
   (``attempts.evaluate``), then the known-suite against hidden-control observation and the
   divergence monitor (spec 4.7, 9.8);
7. only after the award, ``control.revealed`` reveals the seed and each case's fingerprint in
   the class's loop subject (spec 9.6, 11.16), and the publication bundle is written with its
   signed ``MANIFEST`` (pilot 13).

A run for an attempt the policy port opened (``options.attempt_id``) is judged under the rules
the attempt started with (spec 10.5), and every failure ends it as ``attempt.errored``.

Steps 1, 2 (materialising) and 4 (running) are the class's own work, and the only ones that
need the sandbox: they go through an :class:`Executor`.  :class:`LocalExecutor` does them here;
the service's Ray workers do them on a node that can run the sandbox and hand back what they
found, while every ledger write above stays with the runner (issue 16 item 4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import secrets
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from .._clock import now_utc
from .._io import write_atomic
from ..errors import EvaluatorError, InputError
from ..evaluation import attempts, controls, divergence, loop
from ..ledger.checkpoint import NoteSigner, sign_note
from ..ledger.events import OUTCOME_KINDS, EventKind, NewEvent
from ..ledger.payloads import (
    AttemptEnded,
    CommentAdded,
    EvidenceStored,
    Payload,
    QuarantineChanged,
    VerifierDecision,
)
from ..ledger.store import LedgerStore
from ..rules.loader import load_catalogue
from ..rules.versions import PinnedRules, pin, rules_version
from ..sandbox import IsolationError, IsolationSupport, probe_isolation
from ..signal.calculator import SignalCalculator
from ..signal.result import Signal
from .protocol import (
    Controls,
    Harness,
    Outcome,
    Prepared,
    RunContext,
    RunFields,
    RunOptions,
    RunResult,
)
from .registry import harness_for

ACTOR = "harness"
#: How long an attempt the runner opens itself may take before reconcile abandons it.
ATTEMPT_DEADLINE = timedelta(minutes=30)


def json_bytes(doc: Any) -> bytes:
    """The bundle's JSON: sorted keys, two-space indent, UTF-8, a final newline."""
    return (json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def event(kind: EventKind, data: Payload, attempt: str) -> NewEvent:
    """One event of the runner's actor, stamped now (``data``: the kind's payload model)."""
    return NewEvent.make(kind, data, actor=ACTOR, at=now_utc(), attempt=attempt)


def store_evidence(store: LedgerStore, attempt_id: str, what: str, data: bytes,
                   **extra: Any) -> str:
    """Content-addressed evidence plus its ``evidence.stored`` event (spec 10.3).  ``extra``
    are further fields of :class:`~..ledger.payloads.EvidenceStored` (``scenarios``).  Raises
    InputError for a field that model does not have."""
    try:
        stored = EvidenceStored(what=what, digest=store.put_evidence(data), size=len(data),
                                **extra)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(payload)"
        raise InputError(f"evidence {what!r}: {field}: {first['msg']}") from e
    store.append([event(EventKind.EVIDENCE_STORED, stored, attempt_id)])
    return stored.digest


@dataclass(slots=True)
class _Context(RunFields):
    """The :class:`~.protocol.RunContext` the runner lends a class for one run."""

    store: LedgerStore

    def evidence(self, what: str, data: bytes, **extra: Any) -> str:
        return store_evidence(self.store, self.attempt_id, what, data, **extra)

    def progress(self, stage: str, done: int, total: int) -> None:
        self.options.progress(stage, done, total)


class Executor(Protocol):
    """Where a class's own work runs: the isolation probe, materialising the candidate and
    running it.  It writes nothing to the ledger; evidence goes through the context."""

    def probe(self) -> IsolationSupport:
        """Whether the sandbox can run where the candidate will run."""
        ...

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        """:meth:`~.protocol.Harness.prepare` where the candidate will run."""
        ...

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        """:meth:`~.protocol.Harness.execute` where the candidate runs."""
        ...


@dataclass(frozen=True, slots=True)
class LocalExecutor:
    """The class's work in this process."""

    harness: Harness

    def probe(self) -> IsolationSupport:
        return probe_isolation()

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        return self.harness.prepare(candidate, work)

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        return self.harness.execute(ctx, prepared, controls)


@dataclass(frozen=True, slots=True)
class _Opened:
    """An attempt opened before the run: its id, rules and recorded artefact SHA-256."""

    attempt_id: str
    pinned: PinnedRules
    artefact_sha256: str | None


def seed_commitment(harness: Harness, seed: bytes) -> str:
    """``sha256(tag || seed)``: what the ledger holds before the control set is drawn."""
    return hashlib.sha256(harness.seed_tag + seed).hexdigest()


def seed_scheme(tag: bytes) -> str:
    """How the commitment is computed, for a reader who re-draws the set from the revealed
    seed: ``sha256('<tag>' || 0x00 || seed)`` for a NUL-terminated tag."""
    text = tag.removesuffix(b"\x00").decode("ascii", "backslashreplace")
    nul = " || 0x00" if tag.endswith(b"\x00") else ""
    return f"sha256('{text}'{nul} || seed)"


def run(harness: Harness, candidate: Path, store: LedgerStore, bundle_root: Path,
        options: RunOptions | None = None, executor: Executor | None = None) -> RunResult:
    """Evaluate one candidate with ``harness``.  Without ``options.attempt_id`` the runner
    opens the attempt once the candidate is prepared; an unpreparable candidate or missing
    isolation raises (InputError, IsolationError) with nothing written.  With it, the attempt
    the policy port opened (spec 10.4) must be open and of this class (else InputError, nothing
    written), is judged under the rules it started with (10.5), and every failure ends it as
    errored.  ``executor`` does the class's own work (default: here, :class:`LocalExecutor`)."""
    options = options or RunOptions()
    executor = executor or LocalExecutor(harness)
    if options.size is None:
        options = dataclasses.replace(options, size=harness.min_size)
    assert options.size is not None
    if options.size < harness.min_size:
        raise InputError(f"control-set size {options.size} is below this class's minimum of "
                         f"{harness.min_size}")
    opened = None if options.attempt_id is None else _open_attempt(store, harness,
                                                                    options.attempt_id)
    try:
        # spec 9.19 (issue 15): a class the owner shut down runs no new attempt; one the policy
        # port opened before the shutdown ends errored, never left open.
        loop.refuse_if_shut_down(store, harness.task_class)
    except InputError as e:
        if opened is None:
            raise
        return _errored(store, opened.attempt_id, bundle_root, e.diagnostics(), "shut_down")
    support = executor.probe() if harness.sandboxed and not options.unsafe_degraded else None
    if support is not None and not support.available:
        # Refuse before anything runs: without isolation there is no training-grade signal.
        refusal = f"sandbox isolation not available: {support.reason}"
        if opened is None:
            raise IsolationError(f"{refusal} (a labelled, non-training-grade run needs "
                                 "--unsafe-degraded)")
        return _errored(store, opened.attempt_id, bundle_root, refusal, "isolation")
    # spec 10.5: a new attempt runs under the published version in force now.
    # spec 9.19: the owner's rollback applies to attempts the runner opens itself too.
    pinned = opened.pinned if opened else loop.pin_for_new_attempt(
        store, load_catalogue()[harness.task_class], now_utc())
    with tempfile.TemporaryDirectory(prefix="trz-harness-") as private:
        work = Path(private)
        work.chmod(0o711)  # the sandbox uid may traverse to the candidate tree, not list
        options.progress("preparing the candidate", 0, 1)
        try:
            prepare_started = time.monotonic()
            prepared = executor.prepare(candidate, work)
            prepare_seconds = time.monotonic() - prepare_started
            if opened is not None and prepared.artefact_sha256 != opened.artefact_sha256:
                raise InputError(f"the candidate is not the artefact attempt "
                                 f"{opened.attempt_id} recorded (its SHA-256 differs)")
        except InputError as e:
            if opened is None:
                raise
            return _errored(store, opened.attempt_id, bundle_root, e.diagnostics(), "prepare")
        attempt_id = opened.attempt_id if opened else _initiate(store, harness, pinned,
                                                                prepared)
        try:
            store_evidence(store, attempt_id, "candidate", prepared.artefact,
                           **prepared.evidence)
            return _evaluate(store, harness, pinned, attempt_id, prepared,
                             bundle_root / attempt_id, options, work,
                             {"prepare": prepare_seconds}, executor)
        except EvaluatorError as e:
            return _errored(store, attempt_id, bundle_root, e.diagnostics(), "run",
                            prepared.digest)


def run_class(task_class: str, candidate: Path, store: LedgerStore, bundle_root: Path,
              options: RunOptions | None = None, executor: Executor | None = None
              ) -> RunResult:
    """:func:`run` with the harness the registry holds for ``task_class``."""
    return run(harness_for(task_class), candidate, store, bundle_root, options, executor)


def _evaluate(store: LedgerStore, harness: Harness, pinned: PinnedRules, attempt_id: str,
              prepared: Prepared, bundle: Path, options: RunOptions, work: Path,
              phases: dict[str, float], executor: Executor) -> RunResult:
    started = lap = time.monotonic()
    seed = options.seed or secrets.token_bytes(32)
    commitment = seed_commitment(harness, seed)
    store_evidence(store, attempt_id, "control_seed_commitment",
                   json_bytes({"commitment": commitment,
                               "scheme": seed_scheme(harness.seed_tag)}))
    assert options.size is not None  # run() fills it in
    drawn = _draw(harness, seed, options.size, controls.retired(store, harness.task_class))
    store_evidence(store, attempt_id, "control_set", drawn.data, scenarios=drawn.count)
    bundle.mkdir(parents=True, exist_ok=True)
    lap = _lap(phases, "draw", lap)
    ctx = _Context(attempt_id, seed, commitment, work, bundle, options, pinned,
                   loop.passing_audit(store, harness.task_class, pinned.version,
                                      harness.version), store)
    try:
        outcome, signal = _judge(store, harness, pinned, ctx, prepared, drawn, phases,
                                 executor)
        lap = _lap(phases, "award", phases.pop("_award_started"))
    except EvaluatorError as e:
        # The candidate may have met the cases before the run broke: they are exposed all the
        # same, so they are revealed (and retired) once the attempt has ended errored.
        result = _errored(store, attempt_id, bundle.parent, e.diagnostics(), "run",
                          prepared.digest)
        controls.reveal(store, harness.task_class, attempt_id, seed, commitment, drawn.cases,
                        drawn.skipped, now_utc())
        return result
    seen = outcome.observation
    if seen is not None:
        # spec 4.7, 9.8: the known suite beside the hidden control, for the divergence monitor.
        loop.record_observation(store, harness.task_class, attempt_id, known=seen.known,
                                hidden=seen.hidden, known_cases=_whole(seen.known),
                                hidden_cases=_whole(seen.hidden), at=now_utc())
        divergence.check(store, harness.task_class, now_utc())
    # spec 9.6, 11.16: only now, after the award, are the seed and the cases revealed; every
    # later draw of the class leaves these cases out.
    controls.reveal(store, harness.task_class, attempt_id, seed, commitment, drawn.cases,
                    drawn.skipped, now_utc())
    _lap(phases, "reveal", lap)
    elapsed = time.monotonic() - started
    summary = {
        "attempt_id": attempt_id, "task_class": harness.task_class, "status": "completed",
        "candidate_digest": prepared.digest,
        "isolation": outcome.isolation if outcome.isolation == "full"
        else f"degraded: {outcome.degraded_reason}",
        "rules_version": pinned.version, "signal": str(signal.value),
        # A critical violation is named as one (issue 12 item 14), not by the outcome code.
        "outcome": "critical_violation" if signal.critical_violation
        else signal.outcome.value, "reasons": list(signal.reasons),
        "quarantine": list(outcome.quarantine), "metrics": outcome.metrics,
        "seconds": round(elapsed, 3), "scenarios": drawn.count, **outcome.summary,
        # issue 16 item 5: where the run's time went, the harness's own sub-phases included
        "phases": {name: round(value, 3) for name, value in
                   {**phases, **outcome.phases}.items()},
    }
    files = dict(outcome.files)
    files["summary.json"] = json_bytes(summary)
    files["signal.json"] = json_bytes(signal.to_dict())
    # Written after the award: the ledger already holds every file it lists but the summary
    # and the signal, which the log key's signature covers here.
    files["MANIFEST"] = manifest(files, options.signer, harness.task_class)
    for name, data in sorted(files.items()):
        write_atomic(bundle / name, data)
    harness.publish(bundle, outcome, summary, signal)
    return RunResult(attempt_id, prepared.digest, "completed", signal, summary, bundle,
                     outcome.findings, outcome.metrics)


def _judge(store: LedgerStore, harness: Harness, pinned: PinnedRules, ctx: _Context,
           prepared: Prepared, drawn: Controls, phases: dict[str, float],
           executor: Executor) -> tuple[Outcome, Signal]:
    """Run and judge the candidate, and record the award: stopping conditions first, then the
    critical layer's decision, then the signal.  A malformed observation is refused before
    the award.  Raises EvaluatorError when the run cannot be completed."""
    attempt_id = ctx.attempt_id
    started = time.monotonic()
    outcome = executor.execute(ctx, prepared, drawn)
    phases["_award_started"] = _lap(phases, "execute", started)
    if outcome.quarantine:
        # Pilot 12: quarantined the moment the run's stopping conditions are known, before any
        # award is computed.
        store.append([event(EventKind.QUARANTINE_CHANGED, QuarantineChanged(
            status="quarantined", reasons=tuple(outcome.quarantine),
            candidate_sha256=prepared.digest), attempt_id)])
    store.append([event(EventKind.VERIFIER_DECISION, VerifierDecision.model_validate({
        "verifier": harness.version, "isolation": outcome.isolation,
        "degraded_reason": outcome.degraded_reason, "findings": outcome.findings,
        "metrics": outcome.metrics, **outcome.decision,
    }), attempt_id)])
    if outcome.isolation != "full":
        store.append([event(EventKind.COMMENT_ADDED, CommentAdded(
            text=f"isolation degraded ({outcome.degraded_reason}): not a training-grade "
                 "signal"), attempt_id)])
    if outcome.observation is not None:
        _whole(outcome.observation.known)  # checked before the award, recorded after it
        _whole(outcome.observation.hidden)
    signal = attempts.evaluate(store, pinned, outcome.inputs, attempt_id=attempt_id,
                               at=now_utc())
    return outcome, signal


def _draw(harness: Harness, seed: bytes, size: int, retired: frozenset[str]) -> Controls:
    """The class's control set, checked before anything is stored: one fingerprint per case
    and none of them retired.  Raises EvaluatorError otherwise (the attempt ends errored)."""
    drawn = harness.draw_controls(seed, size, retired)
    if len(drawn.cases) != drawn.count:
        raise EvaluatorError(f"the control set of {harness.task_class} names {len(drawn.cases)} "
                             f"case fingerprints for {drawn.count} cases")
    exposed = [case for case in drawn.cases if case in retired]
    if exposed:
        raise EvaluatorError(f"the control set of {harness.task_class} holds {len(exposed)} "
                             f"case(s) an earlier run revealed ({exposed[0][:12]}...): a "
                             "revealed case is never drawn again (spec 9.6)")
    if drawn.skipped < 0:
        raise EvaluatorError(f"the control set of {harness.task_class} skipped "
                             f"{drawn.skipped} cases")
    return drawn


def _lap(phases: dict[str, float], name: str, since: float) -> float:
    """Record ``name`` as the time from ``since`` to now; return now (the next lap's start)."""
    now = time.monotonic()
    phases[name] = now - since
    return now


def _whole(fraction: str) -> int:
    """The number of cases of a ``"part/whole"`` fraction.  Raises InputError otherwise."""
    part, _, whole = fraction.partition("/")
    if not (part.isdigit() and whole.isdigit() and int(whole) > 0 and int(part) <= int(whole)):
        raise InputError(f"observation {fraction!r} is not a fraction part/whole of cases")
    return int(whole)


def manifest(files: Mapping[str, bytes], signer: NoteSigner | None, task_class: str) -> bytes:
    """``MANIFEST``: the task class and the SHA-256 of every file of the bundle, as a note
    signed by the log key (pilot 13) when the run was given it."""
    lines = [f"{hashlib.sha256(data).hexdigest()}  {name}" for name, data in sorted(files.items())]
    body = (f"triz-ri bundle manifest v1\nclass: {task_class}\n" + "\n".join(lines)
            + "\n")
    if signer is None:
        return (body + "\nunsigned: the run was not given the log key\n").encode()
    return sign_note(body, signer).encode()


def _open_attempt(store: LedgerStore, harness: Harness, attempt_id: str) -> _Opened:
    """The open attempt ``attempt_id`` of the harness's class.  Raises InputError otherwise."""
    events = store.attempt_events(attempt_id)
    initiated = [e.data for e in events if e.kind == EventKind.ATTEMPT_INITIATED.value]
    if not initiated:
        raise InputError(f"attempt {attempt_id!r} was not initiated (spec 10.4)")
    if initiated[0].get("task_class") != harness.task_class:
        raise InputError(f"attempt {attempt_id!r} is of task class "
                         f"{initiated[0].get('task_class')!r}, not {harness.task_class}")
    ended = [e.kind for e in events if e.kind in OUTCOME_KINDS]
    if ended:
        raise InputError(f"attempt {attempt_id!r} already has an outcome ({ended[0]})")
    return _Opened(attempt_id, pinned_at_start(store, initiated[0]),
                   initiated[0].get("artefact_sha256"))


def pinned_at_start(store: LedgerStore, initiated: Mapping[str, Any]) -> PinnedRules:
    """spec 10.5: the rules version an attempt started with, pinned at its start, from the
    catalogue if it still serves it, else from the ledger's ``rules.published``."""
    version = str(initiated["rules_version"])
    tc = load_catalogue().get(str(initiated.get("task_class")))
    if tc is None or rules_version(tc) != version:
        # issue 10: the ledger's copy is checked against its hash before it is used.
        tc = attempts.rules_in_ledger(store, version)
    return pin(tc, started_at=datetime.fromisoformat(str(initiated["started_at"])),
               version=version)


def _initiate(store: LedgerStore, harness: Harness, pinned: PinnedRules,
              prepared: Prepared) -> str:
    """Open an attempt for a candidate handed straight to the runner; return its id."""
    started = now_utc()
    attempt_id = f"{harness.id_prefix}-{started.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    attempts.initiate(store, pinned, attempt_id=attempt_id, task_version="1",
                      started_at=started, deadline=started + ATTEMPT_DEADLINE,
                      verifier_version=harness.version, artefact_sha256=prepared.digest)
    return attempt_id


def _errored(store: LedgerStore, attempt_id: str, bundle_root: Path, reason: str, stage: str,
             digest: str | None = None) -> RunResult:
    """End the attempt as ``attempt.errored`` with a one-line reason, and say so in the bundle."""
    reason = " ".join(reason.split())
    store.append([event(EventKind.ATTEMPT_ERRORED, AttemptEnded(reason=reason, stage=stage),
                        attempt_id)])
    summary = {"attempt_id": attempt_id, "status": "errored", "error": reason,
               "candidate_digest": digest}
    bundle = bundle_root / attempt_id
    write_atomic(bundle / "summary.json", json_bytes(summary))
    return RunResult(attempt_id, digest or "", "errored", None, summary, bundle)


def signal_of(store: LedgerStore, attempt_id: str) -> Signal | None:
    """Recompute the award of a recorded attempt from its events (for tests and reports)."""
    events = store.attempt_events(attempt_id)
    initiated = next((e for e in events if e.kind == EventKind.ATTEMPT_INITIATED.value), None)
    if initiated is None:
        return None
    with contextlib.suppress(EvaluatorError):
        pinned = pinned_at_start(store, initiated.data)
        return SignalCalculator(pinned).compute(attempts.inputs_from_events(events))
    return None
