"""The generic runner's order and its fail-closed paths (issue 14 item 1), with the toy class's
harness object and a real SQLite ledger: no sandbox needed, so every path runs in seconds."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.errors import ExternalError, InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts, loop
from triz_ri_smart_ai_evaluator.harnesses import runner
from triz_ri_smart_ai_evaluator.harnesses.protocol import (
    Controls,
    Observation,
    Outcome,
    Prepared,
    RunContext,
    RunOptions,
)
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules.versions import pin

from . import _toy

HARNESS = _toy.HARNESS
ToySumHarness = _toy.ToySumHarness
TOY_RULES = _toy.TOY_RULES
_candidate = _toy.candidate
_kinds = _toy.kinds


def test_the_runner_records_each_step_in_the_order_every_class_shares(store, tmp_path):
    result = runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8))
    assert result.status == "completed"
    kinds = _kinds(store, result.attempt_id)
    # The digest is fixed before the seed is committed, the commitment before the set exists,
    # the class's evidence before the decision, the decision before the award.
    expected = ["attempt.initiated", "evidence.stored:candidate",
                "evidence.stored:control_seed_commitment", "evidence.stored:control_set",
                "evidence.stored:results.json", "verifier.decision"]
    assert kinds[:len(expected)] == expected
    assert "award.decision" in kinds[len(expected):]
    assert kinds[-1] == "attempt.completed"
    summary = json.loads((result.bundle / "summary.json").read_text("utf-8"))
    assert (summary["signal"], summary["scenarios"]) == ("2", 8)
    # The commitment in the ledger is sha256(tag || seed) of a seed the class never chose.
    committed = [json.loads(store.get_evidence(e.fields["data"]["digest"]))
                 for e in store.attempt_events(result.attempt_id)
                 if e.kind == "evidence.stored"
                 and e.fields["data"]["what"] == "control_seed_commitment"]
    assert committed[0]["scheme"] == "sha256('toy sum control seed' || 0x00 || seed)"


def test_the_same_seed_draws_the_same_set_only_before_it_is_revealed(store, tmp_path):
    # spec 9.6 "rotated": once run a reveals its cases, the same seed draws past all of them.
    seed = bytes(32)
    a, b = (runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                       RunOptions(size=8, seed=seed)) for _ in range(2))
    fresh = runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                       RunOptions(size=8))

    def control_set(attempt_id: str) -> bytes:
        return next(store.get_evidence(e.fields["data"]["digest"])
                    for e in store.attempt_events(attempt_id)
                    if e.kind == "evidence.stored" and e.fields["data"]["what"] == "control_set")

    first = HARNESS.draw_controls(seed, 8, frozenset())
    assert control_set(a.attempt_id) == first.data
    assert control_set(b.attempt_id) == HARNESS.draw_controls(seed, 8,
                                                              frozenset(first.cases)).data
    assert control_set(b.attempt_id) != control_set(a.attempt_id)
    assert control_set(fresh.attempt_id) != control_set(a.attempt_id)


def test_an_unpreparable_candidate_is_refused_with_nothing_written(store, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("not json", "utf-8")
    with pytest.raises(InputError, match=r"bad\.json"):
        runner.run(HARNESS, bad, store, tmp_path / "runs", RunOptions(size=8))
    assert store.size() == 0


def test_a_control_set_below_the_class_minimum_is_refused(store, tmp_path):
    with pytest.raises(InputError, match="below this class's minimum of 5"):
        runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                   RunOptions(size=4))
    assert store.size() == 0


@dataclass
class _Failing(ToySumHarness):
    """The toy harness whose run breaks, or reports a stopping condition."""

    fail: bool = False
    stop: bool = False

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        if self.fail:
            raise ExternalError("simulated: the sandbox went away")
        outcome = super().execute(ctx, prepared, controls)
        if self.stop:
            outcome.quarantine = ["simulated stopping condition"]
        return outcome


def test_a_run_that_breaks_ends_the_attempt_errored_never_open(store, tmp_path):
    result = runner.run(_Failing(fail=True), _candidate(tmp_path, "add"), store,
                        tmp_path / "runs", RunOptions(size=8))
    assert (result.status, result.signal) == ("errored", None)
    kinds = _kinds(store, result.attempt_id)
    assert kinds[-1] == "attempt.errored"
    assert "award.decision" not in kinds
    error = json.loads((result.bundle / "summary.json").read_text("utf-8"))["error"]
    assert "the sandbox went away" in error


def test_a_stopping_condition_quarantines_before_the_award(store, tmp_path):
    result = runner.run(_Failing(stop=True), _candidate(tmp_path, "add"), store,
                        tmp_path / "runs", RunOptions(size=8))
    kinds = _kinds(store, result.attempt_id)
    assert kinds.index("quarantine.changed") < kinds.index("award.decision")
    assert result.summary["quarantine"] == ["simulated stopping condition"]


def _open(store: LedgerStore, artefact: bytes) -> str:
    started = datetime.now(UTC)
    attempt_id = "toy-opened-1"
    attempts.initiate(store, pin(TOY_RULES, started_at=started), attempt_id=attempt_id,
                      task_version="1", started_at=started,
                      deadline=started + timedelta(minutes=5), verifier_version="port",
                      artefact_sha256=_sha256(artefact))
    return attempt_id


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_opened_attempt_runs_only_the_artefact_it_recorded(store, tmp_path):
    recorded = _candidate(tmp_path, "add")
    attempt_id = _open(store, recorded.read_bytes())
    other = _candidate(tmp_path, "sub")
    result = runner.run(HARNESS, other, store, tmp_path / "runs",
                        RunOptions(size=8, attempt_id=attempt_id))
    assert result.status == "errored"
    assert "not the artefact attempt toy-opened-1 recorded" in result.summary["error"]
    with pytest.raises(InputError, match="already has an outcome"):
        runner.run(HARNESS, recorded, store, tmp_path / "runs",
                   RunOptions(size=8, attempt_id=attempt_id))


def test_an_opened_attempt_of_another_class_is_refused_with_nothing_written(store, tmp_path):
    with pytest.raises(InputError, match="was not initiated"):
        runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                   RunOptions(size=8, attempt_id="nobody"))
    assert store.size() == 0


def test_the_recorded_award_recomputes_from_the_ledger(store, tmp_path):
    result = runner.run(HARNESS, _candidate(tmp_path, "mul"), store, tmp_path / "runs",
                        RunOptions(size=8))
    again: Any = runner.signal_of(store, result.attempt_id)
    assert result.signal is not None
    assert again is not None
    assert again.value == result.signal.value


@dataclass
class _OddEvidence(ToySumHarness):
    """The toy harness whose candidate evidence names a field the ledger's model lacks."""

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        prepared = super().prepare(candidate, work)
        return Prepared(prepared.digest, prepared.artefact_sha256, prepared.artefact,
                        prepared.state, {"no_such_field": 1})


def test_candidate_evidence_the_ledger_refuses_ends_the_attempt_errored(store, tmp_path):
    result = runner.run(_OddEvidence(), _candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8))
    assert result.status == "errored"
    assert "no_such_field" in result.summary["error"]
    assert _kinds(store, result.attempt_id) == ["attempt.initiated", "attempt.errored"]


def test_a_class_the_owner_shut_down_runs_no_new_attempt(store, tmp_path):
    # spec 9.19, issue 15: shutting a class down is the owner's, and nothing runs afterwards.
    loop.set_mode(store, HARNESS.task_class, "shut_down", cause="owner", reason="drill",
                  at=datetime.now(UTC))
    before = store.size()
    with pytest.raises(InputError, match="shut down"):
        runner.run(HARNESS, _candidate(tmp_path, "add"), store, tmp_path / "runs",
                   RunOptions(size=8))
    assert store.size() == before


@dataclass
class _Observing(ToySumHarness):
    """The toy harness that reports a known-suite against hidden-control observation."""

    known: str = "5/5"

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        outcome = super().execute(ctx, prepared, controls)
        outcome.observation = Observation(known=self.known, hidden="2/8")
        return outcome


def test_an_observation_is_recorded_in_the_class_subject_after_the_award(store, tmp_path):
    result = runner.run(_Observing(), _candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8))
    events = store.attempt_events(loop.subject(HARNESS.task_class))
    # the observation, then the divergence monitor's check of the class's window, then the
    # control set revealed
    assert [e.kind for e in events] == ["control.observation", "divergence.checked",
                                        "control.revealed"]
    seen = events[0].data
    assert seen == {"task_class": HARNESS.task_class, "attempt": result.attempt_id,
                    "known": "5/5", "hidden": "2/8", "known_cases": 5, "hidden_cases": 8}


def test_a_malformed_observation_ends_the_attempt_errored(store, tmp_path):
    result = runner.run(_Observing(known="6/5"), _candidate(tmp_path, "add"), store,
                        tmp_path / "runs", RunOptions(size=8))
    assert result.status == "errored"
    assert "not a fraction part/whole" in result.summary["error"]
    assert "award.decision" not in _kinds(store, result.attempt_id)


def test_an_opened_attempt_of_a_class_shut_down_since_ends_errored(store, tmp_path):
    candidate = _candidate(tmp_path, "add")
    attempt_id = _open(store, candidate.read_bytes())
    loop.set_mode(store, HARNESS.task_class, "shut_down", cause="owner", reason="drill",
                  at=datetime.now(UTC))
    result = runner.run(HARNESS, candidate, store, tmp_path / "runs",
                        RunOptions(size=8, attempt_id=attempt_id))
    assert result.status == "errored"
    assert "shut down" in result.summary["error"]
    assert _kinds(store, attempt_id)[-1] == "attempt.errored"


class _SlowToy(ToySumHarness):
    """The toy class, with a known pause inside ``execute`` and a sub-phase it reports."""

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        import time

        time.sleep(0.2)
        outcome = super().execute(ctx, prepared, controls)
        outcome.phases["execute.pause"] = 0.2
        return outcome


def test_every_bundle_reports_where_the_time_went(store, tmp_path):
    """Issue 16 item 5: per-phase timings in every bundle, the harness's sub-phases beside the
    runner's, inside the signed summary."""
    result = runner.run(_SlowToy(), _candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8))
    summary = json.loads((result.bundle / "summary.json").read_text("utf-8"))
    phases = summary["phases"]
    assert set(phases) == {"prepare", "draw", "execute", "award", "reveal", "execute.pause"}
    assert all(value >= 0 for value in phases.values())
    assert phases["execute"] >= 0.2, "the pause inside execute is counted there"
    assert phases["execute.pause"] == 0.2
    runner_side = sum(v for k, v in phases.items() if k not in ("prepare", "execute.pause"))
    assert runner_side <= summary["seconds"] + 0.01
    manifest = (result.bundle / "MANIFEST").read_text("utf-8")
    digest = hashlib.sha256((result.bundle / "summary.json").read_bytes()).hexdigest()
    assert f"{digest}  summary.json" in manifest
