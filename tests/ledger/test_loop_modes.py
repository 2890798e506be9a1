"""A class's operating mode decides whether its attempts go into training (spec 4.7, 9.8,
9.11, 9.19; issue 15), and ``ledger recompute`` replays that decision independently.

The attempts are the golden ledger's pilot attempt, under its rules with the formula's mode set
to ``training`` (a verified award, so ``training_use`` is true): without a loop decision each
goes into training.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts, loop
from triz_ri_smart_ai_evaluator.ledger.events import EventKind
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules.formula import Mode
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import pin

from .test_payloads import PILOT, T0, _inputs, task_class, with_stored_evidence

CLASS = "pilot_02_feedback_form"


def _training_rules() -> TaskClass:
    tc = task_class(PILOT)
    return tc.model_copy(update={"formula": tc.formula.model_copy(
        update={"mode": Mode.TRAINING})})



def _award(store: LedgerStore, attempt: str, minutes: int) -> dict[str, object]:
    """Evaluate one verified attempt at T0 + ``minutes``; its ``training.included`` data."""
    at = T0 + timedelta(minutes=minutes)
    pinned = pin(_training_rules(), started_at=at)
    attempts.initiate(store, pinned, attempt_id=attempt, task_version="1", started_at=at,
                      deadline=at + timedelta(hours=1), artefact_sha256="ab" * 32)
    inputs = with_stored_evidence(store, attempt, _inputs("pilot"))
    attempts.evaluate(store, pinned, inputs, attempt_id=attempt, at=at)
    return next(e.data for e in store.attempt_events(attempt)
            if e.kind == EventKind.TRAINING_INCLUDED.value)


def test_without_a_loop_decision_a_verified_attempt_goes_into_training(store: SqliteStore
                                                                        ) -> None:
    included = _award(store, "a-1", 0)
    assert included["included"] is True
    assert included["task_class"] == CLASS
    assert "withheld" not in included
    assert recompute_ledger(store).ok


@pytest.mark.parametrize("mode", ["shadow", "suspended", "shut_down"])
def test_a_withholding_mode_keeps_the_attempt_out_of_training_with_its_reason(
        store: SqliteStore, mode: str) -> None:
    loop.set_mode(store, CLASS, mode, cause="divergence", reason="known 1.0 vs hidden 0.4",
                  at=T0)
    included = _award(store, "a-1", 1)
    assert included["included"] is False
    assert included["class_mode"] == mode
    assert "divergence: known 1.0 vs hidden 0.4" in str(included["withheld"])
    report = recompute_ledger(store)
    assert report.ok, report.mismatches


def test_a_mode_change_applies_from_then_on_not_to_earlier_awards(store: SqliteStore) -> None:
    assert _award(store, "a-1", 0)["included"] is True
    loop.set_mode(store, CLASS, "shadow", cause="owner", reason="pause", at=T0)
    assert _award(store, "a-2", 1)["included"] is False
    loop.set_mode(store, CLASS, "training", cause="recovery", reason="cause found", at=T0)
    assert _award(store, "a-3", 2)["included"] is True
    assert loop.class_state(store, CLASS).previous == "shadow"
    assert recompute_ledger(store).ok


def test_the_pressure_limit_caps_inclusions_per_unit_time(store: SqliteStore) -> None:
    loop.set_mode(store, CLASS, "limited", cause="owner", reason="pilot 10: limited training",
                  at=T0, max_included=2, per_seconds=3600)
    got = [_award(store, f"a-{i}", i) for i in range(3)]
    assert [g["included"] for g in got] == [True, True, False]
    assert got[2]["withheld"] == "pressure limit: 2 attempts per 3600 s reached"
    # an hour after the first two, the window has room again
    assert _award(store, "a-9", 70)["included"] is True
    report = recompute_ledger(store)
    assert report.ok, report.mismatches


def test_recompute_catches_a_training_decision_that_ignores_the_mode(store: SqliteStore
                                                                     ) -> None:
    loop.set_mode(store, CLASS, "shadow", cause="owner", reason="pause", at=T0)
    # A writer that forgets the loop: the award is written without the class's mode.
    original = loop.training_decision
    try:
        loop.training_decision = lambda _s, c, inc, _a: inc.model_copy(  # type: ignore[assignment]
            update={"task_class": c})
        _award(store, "a-1", 1)
    finally:
        loop.training_decision = original  # type: ignore[assignment]
    report = recompute_ledger(store)
    assert not report.ok
    assert "training.included" in report.mismatches[0]


def test_a_shut_down_class_runs_no_new_attempt(store: SqliteStore) -> None:
    loop.refuse_if_shut_down(store, CLASS)
    loop.set_mode(store, CLASS, "shut_down", cause="owner", reason="drill", at=T0, drill=True)
    with pytest.raises(InputError, match="shut down"):
        loop.refuse_if_shut_down(store, CLASS)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mode": "paused", "reason": "x"}, "not one of"),
    ({"mode": "shadow", "reason": "  "}, "needs a reason"),
    ({"mode": "limited", "reason": "x", "max_included": 3}, "both"),
    ({"mode": "shadow", "reason": "x", "max_included": 3, "per_seconds": 60}, "limited mode"),
    ({"mode": "limited", "reason": "x", "max_included": 3, "per_seconds": 0}, ">= 1"),
])
def test_a_bad_mode_change_is_refused_and_nothing_is_written(
        store: SqliteStore, kwargs: dict[str, object], message: str) -> None:
    before = store.size()
    with pytest.raises(InputError, match=message):
        loop.set_mode(store, CLASS, cause="owner", at=T0, **kwargs)  # type: ignore[arg-type]
    assert store.size() == before
