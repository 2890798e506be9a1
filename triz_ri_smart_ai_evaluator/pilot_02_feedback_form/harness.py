"""The trusted evaluation harness of pilot 02, end to end (pilot 2-13; issue 4).

One run, in the order the pilot requires:

1. the candidate is materialised and its digest fixed and written to the ledger
   (``attempt.initiated``) before anything about the control set exists (pilot 2, 6);
2. a fresh control set is drawn from a secret seed and kept outside the sandbox (pilot 6);
3. the candidate runs in the sandbox; the trusted receiver, the HTTP driver and the egress
   sink are on the harness side (pilot 4); the unmodified starting repository runs in the same
   sandbox for the Regression baseline; the candidate's own self-check tests run there too;
4. the basic scorer ``score_logs.py`` reads the exported logs; the external critical layer
   checks what it does not (pilot 7); the catalogue's class turns both into the signal (pilot 10);
5. everything is stored as evidence and events in the ledger, stopping conditions quarantine
   the attempt (pilot 12), and a publication bundle is written (pilot 13).

The generic runner (:mod:`..harnesses.runner`) owns that order; this module holds the pilot's
parts of the protocol.  The sandbox phase is in :mod:`.sandboxed`, the judging phase (records,
bundle, stopping conditions, report) in :mod:`.judging`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import write_atomic
from ..errors import ExternalError
from ..harnesses import runner
from ..harnesses.protocol import (
    Controls,
    Outcome,
    Prepared,
    RunContext,
    RunOptions,
    RunResult,
)
from ..ledger.store import LedgerStore
from ..signal.result import Signal
from . import candidate as cand
from . import report, scoring
from .checks import Finding
from .control_set import draw_control_set, observation
from .driver import Exchange
from .judging import (
    SEED_COMMITMENT_TAG,
    as_posted,
    bundle_files,
    gather_evidence,
    provenance_files,
    public_acceptance,
    publish_report,
    run_score_logs,
    stopping_conditions,
)
from .sandboxed import (
    REQUEST_TIMEOUT,
    Background,
    checks_box,
    in_sandbox,
    with_test_replays,
)

TASK_CLASS = "pilot_02_feedback_form"
HARNESS_VERSION = "pilot02-harness/2"  # /2: the explicit-test replay (ADR 0012)


@dataclass(frozen=True, slots=True)
class _Run:
    """What the pilot's publish step needs from its run (the report's tables)."""

    scenarios: list[dict[str, Any]]
    plan: dict[str, Any]
    decided: Mapping[str, Any]
    submissions: Mapping[str, Sequence[Exchange]]
    scorer: dict[str, Any]
    files: dict[str, bytes]


class FeedbackFormHarness:
    """Pilot 02's parts of the harness protocol; the generic runner does the rest."""

    task_class = TASK_CLASS
    version = HARNESS_VERSION
    artefact = "a unified diff against the starting repository, or a directory with a full copy"
    id_prefix = "p02"
    seed_tag = SEED_COMMITMENT_TAG
    sandboxed = True
    min_size = 100  # pilot 6

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        """Materialise the candidate and compare it with the starting repository."""
        prepared = cand.prepare(candidate, work)
        _make_readable(prepared.tree)
        scope = cand.check_scope(prepared.entries).to_dict()
        artefact = (candidate.read_bytes() if prepared.source == "diff"
                    else report.json_bytes({p: [e.kind, e.executable, e.sha256]
                                            for p, e in prepared.entries.items()}))
        return Prepared(prepared.digest, prepared.patch_sha256, artefact, (prepared, scope),
                        {"source": prepared.source, "candidate_sha256": prepared.digest})

    def draw_controls(self, seed: bytes, size: int, retired: frozenset[str]) -> Controls:
        """Pilot 6: drawn from a seed the candidate cannot know, kept outside the sandbox;
        never a scenario an earlier run revealed (spec 9.6, :func:`.control_set.case_of`).
        The rows are shuffled by the seed, so no position tells a category, a twin or a
        replay from the rest."""
        control = draw_control_set(seed, size=size, retired=retired)
        scenarios = [dict(s) for s in control.scenarios]
        plan = {str(p["id"]): dict(p) for p in control.plan}
        return Controls(report.json_bytes({"scenarios": scenarios, "plan": plan}),
                        len(scenarios), (scenarios, plan), control.fingerprints(),
                        control.skipped)

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        t0 = time.monotonic()
        candidate, scope = prepared.state
        options = ctx.options
        # issue 12 item 8: the repository's tests and the Regression baseline need only the
        # candidate's tree; they run in a second sandbox beside the scenarios.
        checks = Background(lambda: checks_box(candidate, options))
        drawn, plan = controls.state
        # spec 9.7, 11.17: a seeded sample sent again looking like an explicit test
        scenarios, plan = with_test_replays(drawn, plan, ctx.seed)
        try:
            got = in_sandbox(candidate, scenarios, plan, ctx.seed, options, checks)
        finally:
            checks.join()
        elapsed = time.monotonic() - t0
        ctx.progress("scoring", 0, 1)
        scenarios = as_posted(scenarios, got.submissions)
        evidence, received, export_path, export_digest = gather_evidence(
            got, scenarios, drawn, plan, scope, ctx.bundle, candidate, prepared.artefact,
            ctx.work, hashlib.sha256(controls.data).hexdigest())
        regression, digest_after = evidence.regression, evidence.candidate_digest_after
        decided = scoring.decisions(evidence)
        found = scoring.findings(evidence, decided)
        token_to_id = {str(s["run_token"]): str(s["id"]) for s in scenarios}
        files = bundle_files(scenarios, plan, got, received, token_to_id, regression, scope)
        files.update(provenance_files(candidate.source, prepared.artefact, ctx.seed,
                                       ctx.seed_commitment, got))
        for name, data in files.items():
            write_atomic(ctx.bundle / name, data)
        no_decision(unread(scoring.unexplained_silences(evidence), plan, regression,
                           got.tests_clock), found)
        scorer = run_score_logs(ctx.bundle)
        files["score_logs_report.json"] = report.json_bytes(scorer)
        values = scoring.metrics(scorer, evidence, decided)
        disagreements = scoring.scorer_agrees(scorer, values)
        quarantine = scoring.quarantine_reasons(evidence, found)
        acceptance = public_acceptance(scorer, found, values, disagreements)
        # pilot 7, 11: pilot_pass stays null until every external check has its result, the
        # red team's included: a passing campaign for these rules and this harness version in
        # the ledger (spec 11.23; `triz-eval audit run`).
        pending = ([] if ctx.red_team is not None else ["red_team"]) + (
            [] if acceptance is not None else ["external_checks"])
        pilot_pass = None if pending else acceptance
        critical = {
            "pilot_pass": pilot_pass, "pilot_pass_pending": pending,
            "public_acceptance": acceptance, "scorer_pass": scorer.get("scorer_pass"),
            "isolation": got.isolation, "degraded_reason": got.degraded_reason,
            "checks": [f.to_dict() for f in found], "recovery": values["recovery"],
            "regression": regression, "scorer_disagreements": disagreements,
            "quarantine": quarantine, "candidate_digest_before": candidate.digest,
            "candidate_digest_after": digest_after, "receiver_export_sha256": export_digest,
            "app_outcome": got.app_outcome, "aborted": got.aborted,
            "grace_seconds": round(got.grace_seconds, 3), "public_tests": got.public_tests,
            "stopping_conditions": stopping_conditions(evidence, found),
            "red_team_report": None if ctx.red_team is None else {
                k: ctx.red_team[k] for k in ("campaign", "seq", "statement", "report")},
        }
        files["external_critical_report.json"] = report.json_bytes(critical)
        digests = {name: ctx.evidence(name, data) for name, data in files.items()}
        ctx.evidence("receiver_events.jsonl", export_path.read_bytes())
        inputs = scoring.attempt_inputs(
            values, found, got.self_checks,
            {"smtp_events": digests["smtp_events.jsonl"],
             "http_results": digests["http_results.jsonl"],
             "critical_report": digests["external_critical_report.json"],
             "regression": digests["regression.json"],
             "self_checks": digests["self_checks.txt"]},
            sandbox_seconds=f"{elapsed:.3f}")
        findings = [f.to_dict() for f in found]
        shared = {"scorer_pass": scorer.get("scorer_pass"), "pilot_pass": pilot_pass,
                  "public_acceptance": acceptance}
        return Outcome(
            inputs=inputs, isolation=got.isolation, degraded_reason=got.degraded_reason,
            findings=findings, metrics=values, quarantine=quarantine, files=files,
            decision=shared,
            summary={**shared, "candidate_digest_after": digest_after,
                     "pilot_pass_pending": pending, "aborted": got.aborted,
                     "seconds": round(elapsed, 3)},
            state=_Run(scenarios, plan, decided, got.submissions, scorer, files),
            observation=observation(scenarios, plan, decided, got.submissions,
                                    got.public_tests),
            phases={"execute.sandbox": elapsed,
                    "execute.scoring": time.monotonic() - t0 - elapsed})

    def publish(self, bundle: Path, outcome: Outcome, summary: Mapping[str, Any],
                signal: Signal) -> None:
        """The run's ``report.html`` (pilot 13)."""
        run: _Run = outcome.state
        publish_report(bundle, run.files, summary, outcome.metrics, outcome.findings, run.scenarios,
                 run.plan, run.decided, run.submissions, run.scorer)


def unread(silent: Sequence[str], plan: Mapping[str, Mapping[str, Any]],
           regression: Mapping[str, Any], tests_clock: Sequence[str]) -> list[str]:
    """What of the run ran out of the harness's own clocks with nothing to read in its place
    (docs/adr/0016): scenarios without a decision (named with their kind, so that a pattern of
    silences on one kind shows in the ledger), original functions the Regression probe could
    not compare, and the repository's test processes cut off by their clock."""
    named = [f"scenario {sid} ({_kind(plan.get(sid, {}))})" for sid in silent]
    return [*named, *(str(u) for u in regression.get("unread", ())), *tests_clock]


def no_decision(unread: Sequence[str], found: Sequence[Finding]) -> None:
    """Spec 6.5, 6.6, 11.11 (docs/adr/0016-no-answer-is-not-a-decision.md): when parts of the
    run ran out of the harness's clocks while the application answered nothing else, the run
    holds no decision for them, and neither a pass nor a zero can be read from it.  Unless a
    violation was verified on what was answered (that verdict stands), the attempt ends errored
    with those parts named, so a trainer gets no reward (null), never a silent 0; the evidence
    stays in the bundle and the ledger.  Raises ExternalError."""
    if not unread or any(f.state == "failed" for f in found):
        return
    more = f" and {len(unread) - 8} more" if len(unread) > 8 else ""
    raise ExternalError(
        f"no decision can be read from {len(unread)} part(s) of the run: they ran out of the "
        f"harness's clocks (requests {REQUEST_TIMEOUT:g} s) while the application answered "
        f"nothing else, as on a stalled or overloaded host: {'; '.join(unread[:8])}{more}; "
        "evaluate the candidate again")


def _kind(entry: Mapping[str, Any]) -> str:
    """What a scenario is in the run, for the error that names it."""
    for key, name in (("test_profile_of", "explicit-test replay"), ("replay_of", "replay"),
                      ("twin_of", "injection twin"), ("smtp_fault", "temporary failure")):
        if entry.get(key):
            return name
    return str(entry.get("category") or "scenario")


HARNESS = FeedbackFormHarness()


def run(candidate_path: Path, store: LedgerStore, bundle_root: Path,
        options: RunOptions | None = None) -> RunResult:
    """Evaluate one pilot 02 candidate through the generic runner (see
    :func:`triz_ri_smart_ai_evaluator.harnesses.runner.run`)."""
    return runner.run(HARNESS, candidate_path, store, bundle_root, options)


def signal_of(store: LedgerStore, attempt_id: str) -> Signal | None:
    """Recompute the award of a recorded attempt (for tests and the examples table)."""
    return runner.signal_of(store, attempt_id)


def _make_readable(tree: Path) -> None:
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | (0o005 if path.is_dir() else 0o004))
