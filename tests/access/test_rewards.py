"""The rewards a trainer gets (issue 16; spec 6.7, 9.11, 9.17, 9.19): a number only when the
ledger holds one training may use, ``None`` with a reason otherwise, and never a made-up 0.

Each ledger here is a real SQLite ledger written by the evaluator's own attempt functions; the
expected numbers come from the signal calculator, not from the reader under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.ledger._attempt_cli import with_stored_evidence
from tests.signal.factories import DEFECT, PILOT, inputs_for, pilot_values, task_class
from triz_ri_smart_ai_evaluator.access import AccessDenied, AccessGuard, Principal, Role
from triz_ri_smart_ai_evaluator.access.matrix import load_matrix
from triz_ri_smart_ai_evaluator.access.rewards import SCORED, RewardReader, reward_of
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts, loop
from triz_ri_smart_ai_evaluator.evaluation.loop import ClassState
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.payloads import AttemptEnded, QuarantineChanged
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.formula import Mode
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import PinnedRules
from triz_ri_smart_ai_evaluator.signal import Signal

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)  # pilot 02 rules version 3 is in force
NOW = T0 + timedelta(minutes=5)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore.open(tmp_path / "ledger.db")
    yield s
    s.close()


def trained(class_id: str = PILOT) -> TaskClass:
    """The class's rules with mode training (every bundled class starts in shadow or limited,
    spec 12.17): what a class looks like once its gates are passed."""
    tc = task_class(class_id)
    return tc.model_copy(update={"formula": tc.formula.model_copy(
        update={"mode": Mode.TRAINING})})


def _open(store: SqliteStore, attempt: str, class_id: str = PILOT,
          started: datetime = T0, *, rules: TaskClass | None = None) -> PinnedRules:
    pinned = pin(rules or trained(class_id), started_at=started)
    attempts.initiate(store, pinned, attempt_id=attempt, task_version=pinned.version,
                      started_at=started, deadline=started + timedelta(hours=1))
    return pinned


def _award(store: SqliteStore, attempt: str, values: dict[str, str] | None = None, *,
           rules: TaskClass | None = None, **kwargs: Any) -> Signal:
    pinned = _open(store, attempt, rules=rules)
    inputs = with_stored_evidence(store, attempt,
                                  inputs_for(PILOT, values or pilot_values(), **kwargs))
    return attempts.evaluate(store, pinned, inputs, attempt_id=attempt, at=T0)


def _reward(store: SqliteStore, attempt: str, class_id: str = PILOT, now: datetime = NOW):
    return reward_of(attempt, store.attempt_events(attempt),
                     loop.class_state(store, class_id), now)


def test_a_verified_award_pays_its_signal_and_is_for_training(store: SqliteStore) -> None:
    signal = _award(store, "a-1")
    assert signal.verified
    assert signal.value > 0
    got = _reward(store, "a-1")
    assert (got.reason, got.reward, got.training_use) == ("verified", signal.value, True)
    award_seq = next(e.seq for e in store.attempt_events("a-1")
                     if e.kind == EventKind.AWARD_DECISION.value)
    assert got.ledger_seq == award_seq
    assert got.to_data()["reward"] == float(signal.value)


def test_an_unverified_award_is_a_real_zero_not_a_skip(store: SqliteStore) -> None:
    signal = _award(store, "a-2", drop_evidence=("delivery",))
    assert not signal.verified
    got = _reward(store, "a-2")
    assert got.reason == "not_verified"
    assert got.reward == 0
    assert got.to_data()["reward"] == 0.0
    assert got.training_use is False  # the ledger never counts it as included


def test_shadow_rules_give_null_to_training_and_the_number_to_an_evaluation(
        store: SqliteStore) -> None:
    """Pilot 02's rules are in shadow mode (pilot 10): measured and recorded, never trained
    on.  An evaluation (which trains nothing) gets the measured number; training gets null."""
    signal = _award(store, "p-1", rules=task_class(PILOT))
    assert signal.verified
    got = _reward(store, "p-1")
    assert (got.reward, got.reason, got.training_use) == (None, "shadow", False)
    seen = reward_of("p-1", store.attempt_events("p-1"), loop.class_state(store, PILOT), NOW,
                     purpose="evaluation")
    assert (seen.reward, seen.reason, seen.training_use) == (signal.value, "verified", False)
    with pytest.raises(InputError, match="purpose"):
        reward_of("p-1", store.attempt_events("p-1"), ClassState(PILOT), NOW, purpose="train")


@pytest.mark.parametrize("mode", ["suspended", "shut_down"])
def test_an_evaluation_gets_nothing_from_a_suspended_class(store: SqliteStore,
                                                           mode: str) -> None:
    _award(store, "p-2")
    loop.set_mode(store, PILOT, mode, cause="owner", reason="exploit suspected", at=NOW)
    seen = reward_of("p-2", store.attempt_events("p-2"), loop.class_state(store, PILOT), NOW,
                     purpose="evaluation")
    assert (seen.reward, seen.reason) == (None, mode)


def test_shadow_class_gives_null_even_for_a_verified_award(store: SqliteStore) -> None:
    loop.set_mode(store, PILOT, "shadow", cause="divergence", reason="the public suite drifted",
                  at=T0 - timedelta(minutes=1))
    _award(store, "a-3")
    got = _reward(store, "a-3")
    assert (got.reward, got.reason, got.training_use) == (None, "shadow", False)
    assert "drifted" in (got.detail or "")


@pytest.mark.parametrize("mode", ["suspended", "shut_down", "shadow"])
def test_a_mode_set_after_the_award_still_withholds(store: SqliteStore, mode: str) -> None:
    """Fail closed: a class suspended after an exploit pays nothing out, even for awards made
    before the suspension (spec 9.11 step 1)."""
    _award(store, "a-4")
    assert _reward(store, "a-4").reason == "verified"
    loop.set_mode(store, PILOT, mode, cause="exploit" if mode == "suspended" else "owner",
                  reason="stop", at=NOW)
    got = _reward(store, "a-4")
    assert (got.reward, got.reason) == (None, mode)


def test_an_unverified_award_in_a_shadow_class_is_null_too(store: SqliteStore) -> None:
    loop.set_mode(store, PILOT, "shadow", cause="owner", reason="piloting", at=T0)
    _award(store, "a-5", drop_evidence=("delivery",))
    assert _reward(store, "a-5").reward is None


def test_pressure_limit_withholding_is_null(store: SqliteStore) -> None:
    loop.set_mode(store, PILOT, "limited", cause="owner", reason="cap", at=T0 - timedelta(1),
                  max_included=1, per_seconds=3600)
    _award(store, "a-6")
    _award(store, "a-7")
    assert _reward(store, "a-6").reason == "verified"
    got = _reward(store, "a-7")
    assert (got.reward, got.reason) == (None, "paused")
    assert "pressure limit" in (got.detail or "")


def test_quarantine_after_the_award_turns_the_reward_to_null(store: SqliteStore) -> None:
    _award(store, "a-8")
    store.append([NewEvent.make(EventKind.QUARANTINE_CHANGED,
                                QuarantineChanged(status="quarantined", reason="exploit x"),
                                actor="owner-1", at=NOW, attempt="a-8")])
    got = _reward(store, "a-8")
    assert (got.reward, got.reason, got.training_use) == (None, "quarantined", False)


def _quarantine(store: SqliteStore, attempt: str) -> None:
    store.append([NewEvent.make(EventKind.QUARANTINE_CHANGED,
                                QuarantineChanged(status="quarantined", reason="stopping rule"),
                                actor="owner-1", at=NOW, attempt=attempt)])


def test_a_caught_cheat_keeps_its_penalty_in_quarantine(store: SqliteStore) -> None:
    """A verified award of S <= 0 (a critical violation the harness caught) stays a real
    number when the attempt is quarantined: as a null, the cheat would escape its penalty and
    count as a skipped sample."""
    critical = next(i.id for i in task_class(PILOT).checklist if i.severity == "critical")
    signal = _award(store, "c-1", failed=(critical,))
    assert signal.verified
    assert signal.value <= 0
    _quarantine(store, "c-1")
    got = _reward(store, "c-1")
    assert (got.reward, got.reason, got.training_use) == (signal.value, "quarantined_penalty",
                                                          False)
    # ... but not in shadow, and not while the class is suspended
    loop.set_mode(store, PILOT, "suspended", cause="exploit", reason="x", at=NOW)
    assert _reward(store, "c-1").reward is None


def test_an_unverified_award_in_quarantine_is_null(store: SqliteStore) -> None:
    _award(store, "c-2", drop_evidence=("delivery",))
    _quarantine(store, "c-2")
    assert (_reward(store, "c-2").reward, _reward(store, "c-2").reason) == (None, "quarantined")


def test_an_open_attempt_is_pending_then_timeout(store: SqliteStore) -> None:
    _open(store, "a-9")
    assert _reward(store, "a-9").reason == "pending"
    assert _reward(store, "a-9").reward is None
    late = _reward(store, "a-9", now=T0 + timedelta(hours=2))
    assert (late.reward, late.reason) == (None, "timeout")


def _end(store: SqliteStore, attempt: str, kind: EventKind, stage: str | None) -> None:
    store.append([NewEvent.make(kind, AttemptEnded(reason="why", stage=stage),
                                actor="harness", at=T0, attempt=attempt)])


@pytest.mark.parametrize(("kind", "stage", "reason", "reward"), [
    (EventKind.ATTEMPT_ERRORED, "isolation", "infrastructure_failure", None),
    (EventKind.ATTEMPT_ERRORED, "run", "infrastructure_failure", None),
    (EventKind.ATTEMPT_ERRORED, "service restart", "infrastructure_failure", None),
    (EventKind.ATTEMPT_ERRORED, None, "infrastructure_failure", None),
    (EventKind.ATTEMPT_CANCELLED, None, "infrastructure_failure", None),
    # The policy's own artefact could not be taken: a real zero, or a broken artefact would
    # be a way to skip a bad reward.
    (EventKind.ATTEMPT_ERRORED, "prepare", "invalid_artefact", 0),
    (EventKind.ATTEMPT_VERIFICATION_FAILED, None, "verification_failed", 0),
])
def test_ended_without_an_award(store: SqliteStore, kind: EventKind, stage: str | None,
                                reason: str, reward: int | None) -> None:
    _open(store, "e-1")
    _end(store, "e-1", kind, stage)
    got = _reward(store, "e-1")
    assert (got.reason, got.reward) == (reason, reward)


def test_abandoned_is_a_timeout(store: SqliteStore) -> None:
    _open(store, "e-2")
    later = T0 + timedelta(hours=2)
    assert attempts.reconcile(store, now=later) == ["e-2"]
    got = _reward(store, "e-2", now=later)
    assert (got.reason, got.reward) == ("timeout", None)
    assert got.ledger_seq == store.size()  # the attempt.abandoned event


def test_held_escrow_is_pending_confirmation(store: SqliteStore) -> None:
    started = datetime(2026, 12, 20, tzinfo=UTC)
    pinned = _open(store, "d-1", DEFECT, started, rules=task_class(DEFECT))
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "240",
              "recurrence_free": "1"}
    inputs = with_stored_evidence(store, "d-1", inputs_for(DEFECT, values))
    signal = attempts.evaluate(store, pinned, inputs, attempt_id="d-1", at=started)
    assert signal.verified
    assert signal.delayed
    got = _reward(store, "d-1", DEFECT, started + timedelta(minutes=1))
    assert (got.reward, got.reason) == (None, "pending_confirmation")


def test_a_recall_turns_the_reward_to_null(store: SqliteStore) -> None:
    _award(store, "a-10")
    store.append([NewEvent.make(EventKind.TRAINING_INCLUDED, {
        "included": False, "mode": "training", "verified": True, "task_class": PILOT,
        "recall": "exploit ex-1: drop this attempt"}, actor="exploit", at=NOW,
        attempt="a-10")])
    got = _reward(store, "a-10")
    assert (got.reward, got.reason) == (None, "recalled")


def test_the_scored_reasons_are_exactly_those_with_a_number(store: SqliteStore) -> None:
    """Whatever the path, reward is None exactly when the reason is not a scored one."""
    _award(store, "s-1")
    _award(store, "s-2", drop_evidence=("delivery",))
    _open(store, "s-3")
    for attempt in ("s-1", "s-2", "s-3"):
        got = _reward(store, attempt)
        assert (got.reward is not None) == (got.reason in SCORED)
    state = ClassState(PILOT, mode="suspended")
    got = reward_of("s-1", store.attempt_events("s-1"), state, NOW)
    assert got.reward is None


# -- the reader: the access matrix first ----------------------------------------------------

def _submitted(store: SqliteStore, guard: AccessGuard, policy: str) -> str:
    from triz_ri_smart_ai_evaluator.access import Catalogue, PolicyPort
    from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue

    port = PolicyPort(guard, Principal(policy, Role.EVALUATED_POLICY),
                      catalogue=Catalogue(load_catalogue()))
    return port.submit(PILOT, f"artefact of {policy}".encode(), [], [])


def test_a_trainer_reads_only_its_own_runs(store: SqliteStore) -> None:
    guard = AccessGuard(load_matrix(), store)
    mine = _submitted(store, guard, "policy-1")
    theirs = _submitted(store, guard, "policy-2")
    trainer = RewardReader(guard, Principal("trainer-1", Role.TRAINING_CONSUMER,
                                            frozenset({"policy-1"})))
    [got] = trainer.read([mine])
    assert (got.reward, got.reason) == (None, "pending")
    before = store.size()
    with pytest.raises(AccessDenied):
        trainer.read([mine, theirs])
    logged = [json.loads(body)["kind"] for _, body in store.scan(before + 1)]
    assert logged == ["access.violation"], "the refusal is logged, and only it"
    # An unknown attempt is refused like another's: no oracle for which ids exist.
    with pytest.raises(AccessDenied):
        trainer.read(["no-such-attempt"])
    # A trainer with no runs reads nothing.
    with pytest.raises(AccessDenied):
        RewardReader(guard, Principal("trainer-2", Role.TRAINING_CONSUMER)).read([mine])


@pytest.mark.parametrize("role", [Role.EVALUATED_POLICY, Role.CONFIRMATION_SOURCE])
def test_roles_without_award_reads_are_refused(store: SqliteStore, role: Role) -> None:
    guard = AccessGuard(load_matrix(), store)
    mine = _submitted(store, guard, "policy-1")
    with pytest.raises(AccessDenied):
        RewardReader(guard, Principal("someone", role, frozenset())).read([mine])


@pytest.mark.parametrize("ids", [[], ["../etc"], ["a b"], ["x"] * 513])
def test_malformed_batches_are_input_errors(store: SqliteStore, ids: list[str]) -> None:
    guard = AccessGuard(load_matrix(), store)
    with pytest.raises(InputError):
        RewardReader(guard, Principal("owner-1", Role.OWNER)).read(ids)


def test_an_idempotency_key_keeps_its_first_answer(store: SqliteStore) -> None:
    guard = AccessGuard(load_matrix(), store)
    reader = RewardReader(guard, Principal("owner-1", Role.OWNER))
    first = [{"attempt_id": "a", "reward": None, "reason": "pending"}]
    assert reader.remembered("k-1", "req-1") is None
    assert reader.remember("k-1", "req-1", first) == first
    assert reader.remember("k-1", "req-1", [{"attempt_id": "a", "reward": 1.0}]) == first
    assert reader.remembered("k-1", "req-1") == first
    with pytest.raises(InputError, match="different request"):
        reader.remembered("k-1", "req-2")
    with pytest.raises(InputError, match="plain identifier"):
        reader.remembered("bad key", "req-1")
