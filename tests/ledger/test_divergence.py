"""The divergence monitor (spec 4.7, 9.8, 11.16; issue 15): a policy that learns the public suite
trips it and the class drops to shadow with the reason recorded; an honest policy does not."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import divergence, loop
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore

from ._attempt_cli import Home
from .test_loop_modes import CLASS, _award
from .test_payloads import T0

CASES = 20  # cases per suite in each simulated attempt


def _observe(store: SqliteStore, rng: random.Random, n: int, known_rate: list[float],
             hidden_rate: list[float]) -> list[divergence.DivergenceChecked]:
    """``n`` simulated attempts: each passes each known and hidden case with its step's rates;
    the monitor runs after each, as the runner does."""
    checks = []
    for i in range(n):
        known = sum(rng.random() < known_rate[i] for _ in range(CASES))
        hidden = sum(rng.random() < hidden_rate[i] for _ in range(CASES))
        at = T0 + timedelta(minutes=i)
        loop.record_observation(store, CLASS, f"sim-{i}", known=f"{known}/{CASES}",
                                hidden=f"{hidden}/{CASES}", known_cases=CASES,
                                hidden_cases=CASES, at=at)
        checks.append(divergence.check(store, CLASS, at))
    return checks


def test_a_policy_that_learns_the_public_suite_trips_the_monitor_and_the_class_drops_to_shadow(
        store: SqliteStore) -> None:
    # Training pushes the known suite from 0.5 to 1.0; fresh hidden control stays at 0.5.
    rising = [min(1.0, 0.5 + 0.05 * i) for i in range(30)]
    checks = _observe(store, random.Random(7), 30, rising, [0.5] * 30)
    first = next(i for i, c in enumerate(checks) if c.tripped)
    assert 5 < first < 30
    state = loop.class_state(store, CLASS)
    assert (state.mode, state.cause) == ("shadow", "divergence")
    assert "known suite ahead of hidden control" in str(state.reason)
    # From now on the class's awards are measured but not used for training.
    included = _award(store, "after-trip", 40)
    assert included["included"] is False
    assert "divergence" in str(included["withheld"])
    assert recompute_ledger(store).ok


def test_an_honest_policy_does_not_trip_the_monitor(store: SqliteStore) -> None:
    # Known and hidden both improve together: no divergence, many seeds.
    for seed in range(5):
        improving = [0.5 + 0.015 * i for i in range(30)]
        checks = _observe(store, random.Random(seed), 30, improving, improving)
        assert not any(c.tripped for c in checks), seed
    assert loop.class_state(store, CLASS).mode == "training"


def test_the_sign_test_matches_the_binomial_tail_by_hand() -> None:
    assert divergence.sign_test_p(8, 0) == Fraction(1, 256)
    assert divergence.sign_test_p(0, 3) == 1
    # P(X >= 7), n = 9: (C(9,7) + C(9,8) + C(9,9)) / 512 = (36 + 9 + 1) / 512
    assert divergence.sign_test_p(7, 2) == Fraction(46, 512)


@pytest.mark.parametrize(("pairs", "tripped"), [
    ([(f"a{i}", Fraction(1), Fraction(1, 2)) for i in range(8)], True),  # p = 1/256, gap 0.5
    ([(f"a{i}", Fraction(1), Fraction(1, 2)) for i in range(7)], False),  # fewer than 8 pairs
    ([(f"a{i}", Fraction(11, 20), Fraction(1, 2)) for i in range(20)], False),  # gap 0.05
    ([(f"a{i}", Fraction(1, 2), Fraction(1)) for i in range(20)], False),  # hidden ahead
])
def test_the_check_needs_enough_pairs_a_small_p_and_a_real_gap(pairs, tripped) -> None:
    assert divergence.evaluate(pairs, divergence.Settings(), CLASS).tripped is tripped


def test_every_check_is_recorded_tripped_or_not(store: SqliteStore) -> None:
    loop.record_observation(store, CLASS, "a-1", known="1/1", hidden="1/1", known_cases=1,
                            hidden_cases=1, at=T0)
    divergence.check(store, CLASS, T0)
    kinds = [e.kind for e in loop.class_events(store, CLASS)]
    assert kinds == ["control.observation", "divergence.checked"]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InputError):
        divergence.Settings(alpha=Fraction(0))
    with pytest.raises(InputError):
        divergence.Settings(window=0)


def test_the_monitor_command_trips_and_reports_the_mode(tmp_path: Path) -> None:
    home = Home(tmp_path)
    home.run("ledger", "init")
    from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger

    ledger = open_sqlite_ledger(tmp_path / "ledger.db")
    try:
        for i in range(10):
            loop.record_observation(ledger, CLASS, f"a-{i}", known="10/10", hidden="4/10",
                                    known_cases=10, hidden_cases=10, at=T0)
    finally:
        ledger.close()
    doc = json.loads(home.run("loop", "monitor", "-t", CLASS, "--json").stdout)
    assert (doc["tripped"], doc["mode"], doc["known_ahead"]) == (True, "shadow", 10)
    bad = home.run("loop", "monitor", "-t", CLASS, "--alpha", "lots", ok=False)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
