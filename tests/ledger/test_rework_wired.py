"""Issue 10, defect class 8: the rework rule wired into the ledger (spec 3.5, 8.6, 11.6).

``signal.rework.instance_signal`` was used nowhere outside ``signal/``: a policy could degrade
its first attempt at a task and then "correct" it, and each attempt was awarded on its own.  An
attempt now belongs to a task instance (recorded at initiation); its award records its own
signal and what it is *credited* under the rework rule: the first measured attempt decides the
instance, a later correction earns nothing extra, and attempts that were objectively impossible
or not verified do not consume it.  The credits of an instance always add up to
``instance_signal`` of its attempts, and ``ledger recompute`` reproduces them (11.13).
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.evaluation.instances import consumes
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.signal import AttemptInputs, Outcome, Signal, instance_signal

from ..signal.factories import DEFECT, PILOT, calculator, inputs_for, pilot_values, task_class
from ._attempt_cli import EVIDENCE, Home, make_home, with_stored_evidence

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # defect_fix rules v2 in force


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def _credited(answer: dict[str, Any]) -> Decimal:
    return Decimal(answer["rework"]["credited"])


# -- spec 11.6 through the CLI, on a real SQLite ledger ---------------------------------------
def test_degrading_the_first_attempt_then_correcting_it_credits_less_than_correct_at_once(
    home: Home,
) -> None:
    degraded = home.evaluate("pilot_02_partial", "deg-1", "--instance", "task-a",
                             "--evidence-dir", EVIDENCE / "pilot_02_partial")
    corrected = home.evaluate("pilot_02_honest", "deg-2", "--instance", "task-a",
                              "--evidence-dir", EVIDENCE / "pilot_02_honest")
    at_once = home.evaluate("pilot_02_honest", "once-1", "--instance", "task-b",
                            "--evidence-dir", EVIDENCE / "pilot_02_honest")
    # The corrected attempt's own result is recorded as measured ...
    assert corrected["outcome"] == "obtained"
    assert corrected["signal"]["value"] == "2"
    # ... but it earns nothing extra: the first measured attempt decided the instance.
    assert corrected["rework"] == {"instance": "task-a", "own": "2", "credited": "0",
                                   "consumed_by": "deg-1", "rule": "first_attempt_counts"}
    assert degraded["rework"]["consumed_by"] == "deg-1"
    assert _credited(degraded) == Decimal(degraded["signal"]["value"]) < 2
    assert at_once["rework"]["credited"] == "2"
    assert _credited(degraded) + _credited(corrected) < _credited(at_once)
    # The ledger alone reproduces every credit (spec 10.2, 11.13).
    assert "3 of 3" in home.run("ledger", "recompute").stdout
    shown = home.run("attempt", "show", "deg-2", "--json").stdout
    assert '"credited": "0"' in shown


def test_an_unverified_attempt_does_not_consume_the_instance(home: Home) -> None:
    """A trusted side that produced no verified value is not the policy's error: the next
    attempt of the instance is still credited in full."""
    first = home.evaluate("pilot_02_honest", "nv-1", "--instance", "task-c")
    assert first["outcome"] == "not_verified"
    assert first["rework"]["consumed_by"] is None
    second = home.evaluate("pilot_02_honest", "nv-2", "--instance", "task-c",
                           "--evidence-dir", EVIDENCE / "pilot_02_honest")
    assert second["rework"]["credited"] == "2"
    assert second["rework"]["consumed_by"] == "nv-2"
    home.run("ledger", "recompute")


def test_without_an_instance_each_attempt_is_its_own(home: Home) -> None:
    one = home.evaluate("pilot_02_honest", "own-1", "--evidence-dir",
                        EVIDENCE / "pilot_02_honest")
    two = home.evaluate("pilot_02_honest", "own-2", "--evidence-dir",
                        EVIDENCE / "pilot_02_honest")
    assert one["rework"]["instance"] == "own-1"
    assert two["rework"]["instance"] == "own-2"
    assert one["rework"]["credited"] == two["rework"]["credited"] == "2"


# -- the rule in the ledger, directly -----------------------------------------------------------
_OBSTACLE = {"kind": "external_tool_failure",
             "indicators": ["delivery", "field_fidelity", "negative_rejection",
                            "status_correctness", "recovery", "regression"],
             "recorded_by": "harness", "description": "the SMTP relay of the sandbox was down",
             "standard_followed": True, "evidence": ["00" * 32]}
VARIANTS: dict[str, Any] = {
    "honest": lambda: inputs_for(PILOT, pilot_values()),
    "partial": lambda: inputs_for(PILOT, pilot_values(delivered=36, fields=150)),
    "critical": lambda: inputs_for(PILOT, pilot_values(), failed=("no_false_success",)),
    "omitted": lambda: inputs_for(PILOT, pilot_values(), omitted=("checks_app_preserved",)),
    "obstacle": lambda: inputs_for(PILOT, {}, obstacles=(_OBSTACLE,)),
}


def _evaluate(store: LedgerStore, attempt_id: str, variant: str, instance: str) -> Signal:
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id=attempt_id, task_version=pinned.version,
                      started_at=T0, deadline=T0 + timedelta(hours=1), instance=instance)
    if variant in ("unverified", "claimed"):
        # Evidence no one stored: not verified (with a claim, claimed_not_verified).
        inputs = VARIANTS["honest"]()
        if variant == "claimed":
            inputs = inputs.model_copy(update={"claims": ("done, verified",)})
    else:
        inputs = with_stored_evidence(store, attempt_id, VARIANTS[variant]())
    return attempts.evaluate(store, pinned, inputs, attempt_id=attempt_id, at=T0)


def _award(store: LedgerStore, attempt_id: str) -> dict[str, Any]:
    return next(e.data for e in store.attempt_events(attempt_id)
                if e.kind == EventKind.AWARD_DECISION.value)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*VARIANTS, "unverified", "claimed"]), min_size=1, max_size=4))
def test_the_credits_of_an_instance_add_up_to_instance_signal(sequence: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore.open(Path(folder) / "ledger.db")
        try:
            signals = [_evaluate(store, f"a-{n}", v, "inst") for n, v in enumerate(sequence)]
            credits = [Decimal(_award(store, f"a-{n}")["rework"]["credited"])
                       for n in range(len(sequence))]
            assert sum(credits, Decimal(0)) == instance_signal(signals)
            consumers = {_award(store, f"a-{n}")["rework"]["consumed_by"]
                         for n in range(len(sequence))} - {None}
            assert len(consumers) <= 1
            report = recompute_ledger(store)
            assert report.ok, report.mismatches
        finally:
            store.close()


@pytest.mark.parametrize("first", ["partial", "critical", "omitted", "claimed"])
def test_any_degraded_first_attempt_then_a_correction_is_less_than_correct_at_once(
    tmp_path: Path, first: str
) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    _evaluate(store, "deg", first, "task-a")
    _evaluate(store, "fix", "honest", "task-a")
    _evaluate(store, "once", "honest", "task-b")
    credited = {a: Decimal(_award(store, a)["rework"]["credited"]) for a in ("deg", "fix", "once")}
    assert credited["fix"] == 0
    assert credited["deg"] + credited["fix"] < credited["once"]
    assert recompute_ledger(store).ok
    store.close()


def test_an_instance_belongs_to_one_task_class(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    _evaluate(store, "p-1", "honest", "shared")
    defect = pin(task_class(DEFECT), started_at=T0)
    before = store.size()
    with pytest.raises(InputError, match="shared"):
        attempts.initiate(store, defect, attempt_id="d-1", task_version=defect.version,
                          started_at=T0, deadline=T0 + timedelta(days=14), instance="shared")
    assert store.size() == before
    store.close()


def test_evaluate_with_another_instance_than_the_initiated_one_is_refused(
    tmp_path: Path,
) -> None:
    """The instance is fixed when the attempt starts (10.4); a trusted caller that names a
    different one is refused before anything is written."""
    store = SqliteStore.open(tmp_path / "ledger.db")
    pinned = pin(task_class(PILOT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="a-1", task_version=pinned.version,
                      started_at=T0, deadline=T0 + timedelta(hours=1), instance="task-a")
    inputs = with_stored_evidence(store, "a-1", VARIANTS["honest"]())
    before = store.size()
    with pytest.raises(InputError, match="task-a"):
        attempts.evaluate(store, pinned, inputs, attempt_id="a-1", at=T0, instance="task-b")
    assert store.size() == before
    attempts.evaluate(store, pinned, inputs, attempt_id="a-1", at=T0, instance="task-a")
    store.close()


def test_recompute_catches_a_correction_credited_twice(tmp_path: Path) -> None:
    """Attack on the record: a rewritten ledger in which the correction is credited as if it
    had consumed the instance.  The chain is consistent (it was rebuilt), the arithmetic not."""
    honest = SqliteStore.open(tmp_path / "honest.db")
    _evaluate(honest, "deg", "partial", "task-a")
    _evaluate(honest, "fix", "honest", "task-a")
    forged = SqliteStore.open(tmp_path / "forged.db")
    for digest in honest.evidence_digests():
        forged.put_evidence(honest.get_evidence(digest))
    for _, body in honest.scan():
        f = json.loads(body)
        data = f["data"]
        if f["kind"] == EventKind.AWARD_DECISION.value and f["attempt"] == "fix":
            data = {**data, "rework": {**data["rework"], "credited": "2", "consumed_by": "fix"}}
        forged.append([NewEvent.make(f["kind"], data, actor=f["actor"], at=f["at"],
                                     attempt=f["attempt"])])
    assert recompute_ledger(honest).ok
    report = recompute_ledger(forged)
    assert not report.ok
    assert any("fix" in m for m in report.mismatches)
    honest.close()
    forged.close()


@pytest.mark.parametrize("outcome", list(Outcome))
def test_which_outcomes_consume_agrees_with_instance_signal(outcome: Outcome) -> None:
    """The ledger names the consuming attempt with ``consumes``; it must be the rule of
    ``signal.rework`` (a probe attempt after it is credited only if it did not consume)."""
    base = calculator(PILOT).compute(AttemptInputs())
    first = base._replace(outcome=outcome, value=Decimal("0.5"))
    probe = base._replace(outcome=Outcome.OBTAINED, value=Decimal(7))
    assert consumes(outcome.value) == (instance_signal([first, probe]) == first.value)
