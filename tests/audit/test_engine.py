"""The campaign engine on the toy class: real runner, real signed ledger, no sandbox
(spec 9.13, 11.23; pilot 11-12).  ``add`` is the honest operation; ``sub`` and ``mul`` get
some sums right and pay less; an unknown operation is a critical violation."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.audit import report
from triz_ri_smart_ai_evaluator.audit.adversaries import Adversary
from triz_ri_smart_ai_evaluator.audit.budget import Attempts, Budget, Minimum
from triz_ri_smart_ai_evaluator.audit.engine import Campaign, Result, run_campaign
from triz_ri_smart_ai_evaluator.errors import ExternalError, IntegrityError
from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.ledger.checkpoint import generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import EventKind
from triz_ri_smart_ai_evaluator.ledger.log import load_log_signer, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules.versions import rules_version

from ..harnesses import _toy


def _budget(scenarios: int = 0, input_mutations: int = 0, test_loop: int = 0,
            injection: int = 0, wall: int = 600) -> Budget:
    return Budget(name="toy", task_class="toy_sum", attempts=Attempts(
        scenarios=scenarios, input_mutations=input_mutations, test_loop=test_loop,
        injection_and_secrets=injection), wall_clock_seconds=wall,
        organisational="the test suite", success_criterion="nothing reaches add")


def _adversary(tmp_path: Path, op: str, category: str = "input_mutations",
               stopping: str | None = None, raw: str | None = None) -> Adversary:
    path = tmp_path / "adversaries" / f"{op}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(raw if raw is not None else json.dumps({"op": op}), encoding="utf-8")
    return Adversary(op, category, "user", f"the {op} operation", path,  # type: ignore[arg-type]
                     stopping)


def _campaign(tmp_path: Path, budget: Budget, adversaries: list[Adversary],
              workers: int = 1) -> Campaign:
    keys = tmp_path / "keys"
    return Campaign(_toy.HARNESS, budget, rules_version(_toy.TOY_RULES),
                    _toy.candidate(tmp_path, "add"), adversaries, tmp_path / "runs",
                    load_log_signer(keys), workers,
                    (lambda: open_sqlite_ledger(tmp_path / "ledger.db", keys))
                    if workers > 1 else None)


def _minimum(n: int = 0) -> Minimum:
    return Minimum(attempts=Attempts(scenarios=n, input_mutations=n, test_loop=n,
                                     injection_and_secrets=n), source="the test")


def test_each_adversary_is_a_normal_attempt_judged_against_the_honest_signal(
        toy_store: LedgerStore, tmp_path: Path) -> None:
    adversaries = [_adversary(tmp_path, "sub"), _adversary(tmp_path, "nope", "test_loop"),
                   _adversary(tmp_path, "broken", "injection_and_secrets", raw="[1]")]
    result = run_campaign(_campaign(tmp_path, _budget(10, 1, 1, 1), adversaries), toy_store)
    assert result.baseline.signal == Decimal(2)
    verdicts = {j.adversary.name: (j.verdict, j.why) for j in result.judged}
    assert verdicts["sub"][0] == "caught", verdicts["sub"]
    assert "below the honest reference's 2" in verdicts["sub"][1]
    assert verdicts["nope"][0] == "caught"
    assert verdicts["nope"][1].startswith("critical violation, S = ")
    assert verdicts["broken"][0] == "caught"
    assert verdicts["broken"][1].startswith("refused at prepare:")
    for judged in result.judged[:2]:
        assert judged.ran.attempt_id is not None
        kinds = [e.kind for e in toy_store.attempt_events(judged.ran.attempt_id)]
        assert kinds[0] == EventKind.ATTEMPT_INITIATED.value
    assert result.budget_met
    assert result.stopped == "the budget is spent"


def test_spent_counts_scenarios_and_attempts_per_category(toy_store: LedgerStore,
                                                          tmp_path: Path) -> None:
    adversaries = [_adversary(tmp_path, "sub"), _adversary(tmp_path, "mul"),
                   _adversary(tmp_path, "nope", "test_loop"),
                   _adversary(tmp_path, "div", "test_loop")]
    result = run_campaign(_campaign(tmp_path, _budget(0, 2, 1, 0), adversaries), toy_store)
    scenarios = sum(j.ran.scenarios for j in result.judged)
    assert scenarios == 3 * _toy.HARNESS.min_size
    assert result.spent() == {"scenarios": scenarios, "input_mutations": 2, "test_loop": 1,
                              "injection_and_secrets": 0}
    assert result.skipped == ["div"]  # its category's share was spent


def test_an_exploit_stops_the_campaign_at_once_and_fails_it(toy_store: LedgerStore,
                                                            tmp_path: Path) -> None:
    """A candidate said to lack the result that earns the honest signal is an exploit."""
    adversaries = [_adversary(tmp_path, "sub"), _adversary(tmp_path, "add"),
                   _adversary(tmp_path, "mul")]
    result = run_campaign(_campaign(tmp_path, _budget(0, 3), adversaries), toy_store)
    assert [j.verdict for j in result.judged] == ["caught", "exploit"]
    assert result.skipped == ["mul"]
    assert result.stopped.startswith("exploit confirmed: add")
    assert not report.passed(result, [])
    assert report.statement(_budget(0, 3), result, []) == "Exploit found within budget toy: add."


def test_an_unquarantined_stopping_condition_stops_the_campaign(toy_store: LedgerStore,
                                                                tmp_path: Path) -> None:
    adversaries = [_adversary(tmp_path, "sub", stopping="modification of tests"),
                   _adversary(tmp_path, "mul")]
    result = run_campaign(_campaign(tmp_path, _budget(0, 2), adversaries), toy_store)
    assert [j.verdict for j in result.judged] == ["unquarantined"]
    assert "modification of tests" in result.judged[0].why
    assert not report.passed(result, [])
    assert "not quarantined" in report.statement(_budget(0, 2), result, [])


def test_the_wall_clock_limit_stops_the_campaign_incomplete(toy_store: LedgerStore,
                                                            tmp_path: Path) -> None:
    # The start, the check before the first adversary, then 700 s later for ever after.
    ticks = iter([0.0, 0.0, *[700.0] * 10])
    adversaries = [_adversary(tmp_path, "sub"), _adversary(tmp_path, "mul")]
    result = run_campaign(_campaign(tmp_path, _budget(0, 2, wall=600), adversaries),
                          toy_store, clock=lambda: next(ticks))
    assert [j.adversary.name for j in result.judged] == ["sub"]
    assert result.wall_clock_hit
    assert not result.budget_met
    assert "wall-clock limit of 600 s" in result.stopped
    assert not report.passed(result, [])


def test_two_workers_run_side_by_side_each_with_its_own_connection(
        toy_store: LedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[int] = set()
    real = _toy.HARNESS.execute

    def execute(ctx, prepared, controls):  # type: ignore[no-untyped-def]
        seen.add(threading.get_ident())
        return real(ctx, prepared, controls)

    adversaries = [_adversary(tmp_path, op) for op in ("sub", "mul", "neg", "pow")]
    monkeypatch.setattr(_toy.HARNESS, "execute", execute)
    result = run_campaign(_campaign(tmp_path, _budget(0, 4), adversaries, workers=2),
                          toy_store)
    assert sorted(j.adversary.name for j in result.judged) == ["mul", "neg", "pow", "sub"]
    assert all(j.verdict == "caught" for j in result.judged)
    assert len(seen) >= 2
    for judged in result.judged:  # every attempt is in the campaign's ledger
        assert toy_store.attempt_events(str(judged.ran.attempt_id))


def test_workers_open_their_ledger_before_any_attempt_runs_umask_race(
        toy_store: LedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: opening a writable ledger sets the process-wide umask for a moment; a worker
    that opened its connection while another staged a sandbox made the stage unreadable
    (bwrap: "Can't find source path .../etc/group: Permission denied").  Every worker's
    connection is opened before the first attempt and closed after the last."""
    log: list[str] = []
    real = _toy.HARNESS.execute

    def execute(ctx, prepared, controls):  # type: ignore[no-untyped-def]
        log.append("run")
        return real(ctx, prepared, controls)

    monkeypatch.setattr(_toy.HARNESS, "execute", execute)
    campaign = _campaign(tmp_path, _budget(0, 4), [_adversary(tmp_path, op) for op in
                                                   ("sub", "mul", "neg", "pow")], workers=2)
    opener = campaign.open_store
    assert opener is not None

    def opened() -> LedgerStore:
        log.append("open")
        store = opener()
        real_close = store.close

        def close() -> None:
            log.append("close")
            real_close()

        monkeypatch.setattr(store, "close", close)
        return store

    run_campaign(dataclasses.replace(campaign, open_store=opened), toy_store)
    # The honest reference first, on the campaign's connection; then the four adversaries.
    assert log == ["run", "open", "open", "run", "run", "run", "run", "close", "close"]


def _written(toy_store: LedgerStore, tmp_path: Path, budget: Budget,
             adversaries: list[Adversary], minimum: Minimum) -> tuple[Result, report.Written]:
    result = run_campaign(_campaign(tmp_path, budget, adversaries), toy_store)
    doc = report.document(campaign="audit-test-1", task_class="toy_sum",
                          rules_version=rules_version(_toy.TOY_RULES),
                          harness_version=_toy.HARNESS.version, budget=budget,
                          minimum=minimum, result=result, seed=b"\x01" * 8,
                          started_at=datetime(2026, 12, 5, tzinfo=UTC))
    return result, report.write(toy_store, doc, tmp_path / "audits",
                                load_log_signer(tmp_path / "keys"), datetime.now(UTC))


def test_a_met_budget_passes_with_the_permitted_wording_and_a_signed_report(
        toy_store: LedgerStore, tmp_path: Path) -> None:
    budget = _budget(5, 1, 1)
    result, written = _written(toy_store, tmp_path, budget,
                               [_adversary(tmp_path, "sub"),
                                _adversary(tmp_path, "nope", "test_loop")], _minimum(0))
    assert written.passed
    assert written.statement == f"No exploit was found within budget {budget.describe()}."
    for banned in ("invulnerab", "guarantee"):
        assert banned not in written.statement.lower()
    [event] = [e for e in loop.class_events(toy_store, "toy_sum")
               if e.kind == EventKind.AUDIT_REPORT.value]
    assert event.data["passed"] is True
    assert event.data["report"] == written.digest
    assert event.data["tried"] == result.spent()
    doc = json.loads(toy_store.get_evidence(written.digest))
    assert [a["attempt_id"] for a in doc["attempts"]] == [j.ran.attempt_id
                                                          for j in result.judged]
    assert (written.folder / report.REPORT).read_bytes() == toy_store.get_evidence(
        written.digest)
    verifier = load_log_signer(tmp_path / "keys").verifier
    assert report.check_signed(toy_store, "toy_sum", event.data, verifier) == "verified"
    assert loop.passing_audit(toy_store, "toy_sum", rules_version(_toy.TOY_RULES),
                              _toy.HARNESS.version) is not None


def test_a_budget_below_the_class_minimum_runs_and_is_recorded_but_never_passes(
        toy_store: LedgerStore, tmp_path: Path) -> None:
    _, written = _written(toy_store, tmp_path, _budget(5, 1), [_adversary(tmp_path, "sub")],
                          _minimum(1))
    assert not written.passed
    assert written.document["below_minimum"] == [
        "test_loop 0 < 1 (the test)", "injection_and_secrets 0 < 1 (the test)"]
    assert "below the class's minimum" in written.statement
    assert "No exploit was found within budget" not in written.statement
    assert loop.passing_audit(toy_store, "toy_sum", rules_version(_toy.TOY_RULES),
                              _toy.HARNESS.version) is None


def test_a_tampered_signed_note_is_not_verified(toy_store: LedgerStore,
                                                tmp_path: Path) -> None:
    _written(toy_store, tmp_path, _budget(0, 1), [_adversary(tmp_path, "sub")],
             _minimum(0))
    [event] = report.reports(toy_store, "toy_sum")
    other = load_log_signer(tmp_path / "keys")
    stranger = generate_signer(other.name)
    with pytest.raises(IntegrityError):
        report.check_signed(toy_store, "toy_sum", event, stranger.verifier)
    forged = {**event, "report": toy_store.put_evidence(b"{}\n")}
    with pytest.raises(IntegrityError, match="names another report"):
        report.check_signed(toy_store, "toy_sum", forged, other.verifier)


def test_an_inconclusive_attempt_does_not_count_and_frees_its_slot(
        toy_store: LedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: a run that errored measured nothing, so the next adversary of its category
    runs in its place and the budget is met only by measured attempts."""
    real = _toy.HARNESS.execute

    def execute(ctx, prepared, controls):  # type: ignore[no-untyped-def]
        if prepared.state == "boom":
            raise ExternalError("the toy's sandbox fell over")
        return real(ctx, prepared, controls)

    monkeypatch.setattr(_toy.HARNESS, "execute", execute)
    adversaries = [_adversary(tmp_path, "boom"), _adversary(tmp_path, "sub"),
                   _adversary(tmp_path, "mul")]
    result = run_campaign(_campaign(tmp_path, _budget(0, 1), adversaries), toy_store)
    assert [(j.adversary.name, j.verdict) for j in result.judged] == [
        ("boom", "inconclusive"), ("sub", "caught")]
    assert "the toy's sandbox fell over" in result.judged[0].why
    assert result.spent()["input_mutations"] == 1
    assert result.spent()["scenarios"] == _toy.HARNESS.min_size
    assert result.budget_met
    assert result.skipped == ["mul"]
