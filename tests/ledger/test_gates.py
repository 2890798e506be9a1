"""The gates between operating modes (spec 4.7, 9.8, 9.11, 9.12, 9.19, 12.17; pilot 10; issue 15
item 8): shadow -> limited needs a passing audit for the current versions and no recent
divergence trip; limited -> training also needs a full window of limited awards and divergence
checks without a trip; a step down is never gated.  Real events in a real signed ledger."""

from __future__ import annotations

from datetime import timedelta

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import divergence, gates, loop
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.payloads import AuditReport
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore

from .test_loop_modes import CLASS, _award
from .test_payloads import T0

RULES = "a1" * 32
HARNESS = "pilot-02/7"
_clock = iter(range(10_000))


def _at(minutes: int | None = None) -> timedelta:
    return timedelta(minutes=next(_clock) if minutes is None else minutes)


def _mode(store: SqliteStore, mode: str, *, exploit: str | None = None) -> None:
    """The owner's mode change, or the exploit procedure's suspension under RULES."""
    if exploit is None:
        loop.set_mode(store, CLASS, mode, cause="owner", reason=f"test: {mode}", at=T0 + _at())
    else:
        loop.set_mode(store, CLASS, mode, cause="exploit", reason=f"test: {mode}", at=T0 + _at(),
                      exploit=exploit, rules_version=RULES)


def _audit(store: SqliteStore, *, passed: bool = True, rules: str = RULES,
           harness: str = HARNESS) -> None:
    report = AuditReport(task_class=CLASS, rules_version=rules, harness_version=harness,
                         campaign="c-1", budget={"automated": 150}, tried={"automated": 150},
                         caught=150, exploits=() if passed else ("false_success",),
                         stopped="budget spent",
                         statement=("No exploit was found within budget 150 attempts."
                                    if passed else "1 exploit found"),
                         passed=passed, report="ee" * 32)
    store.append([NewEvent.make(EventKind.AUDIT_REPORT, report, actor="audit", at=T0 + _at(),
                                attempt=loop.subject(CLASS))])


def _checks(store: SqliteStore, n: int, *, known: str = "1/2", hidden: str = "1/2") -> None:
    """``n`` observations, each followed by the monitor's check, as the runner does."""
    for _ in range(n):
        at = T0 + _at()
        loop.record_observation(store, CLASS, f"obs-{at.isoformat()}", known=known,
                                hidden=hidden, known_cases=20, hidden_cases=20, at=at)
        divergence.check(store, CLASS, at)


def _unmet(store: SqliteStore, mode: str) -> list[str]:
    return gates.unmet(store, CLASS, mode, RULES, HARNESS)


@pytest.mark.parametrize("target", ["limited", "shadow", "suspended", "shut_down"])
def test_a_step_down_is_never_gated(store: SqliteStore, target: str) -> None:
    """spec 9.19: the owner can always restrict or stop a class - no audit, no window."""
    _mode(store, "training")
    assert _unmet(store, target) == []


def test_a_suspended_or_shut_down_class_can_always_be_shut_down(store: SqliteStore) -> None:
    _mode(store, "suspended", exploit="x-1")
    assert _unmet(store, "shut_down") == []
    assert _unmet(store, "suspended") == []


def test_shadow_to_limited_needs_a_passing_audit_for_the_current_versions(
        store: SqliteStore) -> None:
    _mode(store, "shadow")
    [reason] = _unmet(store, "limited")
    assert "no passing audit.report" in reason
    _audit(store, rules="b2" * 32)  # another rules version
    _audit(store, harness="pilot-02/6")  # another harness version
    assert len(_unmet(store, "limited")) == 1
    _audit(store)
    assert _unmet(store, "limited") == []
    _audit(store, passed=False)  # a later failing campaign withdraws the pass
    assert "no passing audit.report" in _unmet(store, "limited")[0]


def test_a_divergence_trip_in_the_last_window_blocks_limited(store: SqliteStore) -> None:
    _mode(store, "shadow")
    _audit(store)
    _checks(store, 10, known="1", hidden="0")  # the known suite far ahead: trips
    [reason] = _unmet(store, "limited")
    assert "divergence checks tripped" in reason
    _checks(store, gates.WINDOW - 1)  # the trips are still in the window
    assert "divergence checks tripped" in _unmet(store, "limited")[0]
    # Honest attempts: the checks keep tripping while the known-ahead pairs are in the
    # monitor's window of observations, and the gate opens once its window of checks is clean.
    _checks(store, 2 * gates.WINDOW)
    assert _unmet(store, "limited") == []


def test_training_is_reached_only_through_limited(store: SqliteStore) -> None:
    """pilot 10: "The signal is used in shadow mode before limited training"."""
    _mode(store, "shadow")
    _audit(store)
    reasons = _unmet(store, "training")
    assert any("goes to limited before training" in r for r in reasons)


def test_limited_to_training_needs_a_window_of_awards_and_watched_checks(
        store: SqliteStore) -> None:
    _audit(store)
    for i in range(3):  # awards before the class became limited do not count
        _award(store, f"before-{i}", 0)
    _mode(store, "shadow")
    _mode(store, "limited")
    reasons = _unmet(store, "training")
    assert any(r.startswith("0 verified awards since") for r in reasons)
    assert any(r.startswith("0 divergence checks since") for r in reasons)
    for i in range(gates.MIN_LIMITED_AWARDS - 1):
        _award(store, f"limited-{i}", 100 + i)
    _checks(store, gates.WINDOW)
    [reason] = _unmet(store, "training")
    assert reason.startswith(f"{gates.MIN_LIMITED_AWARDS - 1} verified awards since")
    _award(store, "limited-last", 200)
    assert _unmet(store, "training") == []
    # The same class under a new rules version has no audit yet (spec 9.12: a change to the
    # indicator or verifier calls for a repeated adversarial audit).
    assert "no passing audit.report" in gates.unmet(store, CLASS, "training", "c3" * 32,
                                                    HARNESS)[0]


def test_a_class_suspended_for_an_exploit_is_readmitted_only_by_the_procedure(
        store: SqliteStore) -> None:
    """spec 9.11 step 7: no mode change lifts the exploit's suspension, not even to shadow;
    the procedure's readmission (to shadow, under the fixed rules) does."""
    _audit(store)
    _mode(store, "suspended", exploit="x-1")
    for target in ("shadow", "limited", "training"):
        assert any("only the exploit procedure readmits it" in r for r in _unmet(store, target))
    fixed = "d4" * 32
    # What `exploit respond` records once the transfer test passed under the fixed version.
    loop.set_mode(store, CLASS, "shadow", cause="recovery", exploit="x-1", rules_version=fixed,
                  reason="transfer test passed", at=T0 + _at())
    [reason] = gates.unmet(store, CLASS, "limited", fixed, HARNESS)
    assert "no passing audit.report" in reason  # spec 9.11 step 6: a repeated audit
    _audit(store, rules=fixed)
    assert gates.unmet(store, CLASS, "limited", fixed, HARNESS) == []


@pytest.mark.parametrize("frm", ["suspended", "shut_down"])
def test_shadow_after_an_owners_stop_is_not_gated(store: SqliteStore, frm: str) -> None:
    """Shadow uses nothing for training: bringing a stopped class back to measurement needs no
    audit; only the steps into training use do."""
    _mode(store, frm)
    assert _unmet(store, "shadow") == []
    assert "no passing audit.report" in _unmet(store, "limited")[0]


def test_an_unknown_mode_is_refused(store: SqliteStore) -> None:
    with pytest.raises(InputError, match="is not one of"):
        _unmet(store, "full_speed")


def test_unmet_writes_nothing(store: SqliteStore) -> None:
    _mode(store, "shadow")
    before = store.size()
    assert _unmet(store, "training")
    assert store.size() == before
