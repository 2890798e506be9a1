"""Hidden, rotated control sets (spec 9.6, 10.1, 11.16; issue 15): case fingerprints, the
retired set, draws that skip retired cases, and the runner that reveals a set only after the
award and refuses a class that draws a retired case.  Real SQLite ledger, real harness draws."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from triz_ri_smart_ai_evaluator.defect_fix import reference, scoring
from triz_ri_smart_ai_evaluator.defect_fix.harness import HARNESS as DEFECT_FIX
from triz_ri_smart_ai_evaluator.defect_fix.harness import observation as dfx_observation
from triz_ri_smart_ai_evaluator.defect_fix.repo import Changes
from triz_ri_smart_ai_evaluator.defect_fix.traffic import Exchange as DfxExchange
from triz_ri_smart_ai_evaluator.errors import ExternalError, InputError
from triz_ri_smart_ai_evaluator.evaluation import controls, loop
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
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.checks import Decision
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.control_set import (
    case_of,
    draw_control_set,
)
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.control_set import (
    observation as pilot_observation,
)
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.driver import Exchange as P02Exchange
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.harness import HARNESS as PILOT_02

from ._toy import HARNESS, ToySumHarness, candidate, kinds

AT = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def _revealed(store: LedgerStore, task_class: str = HARNESS.task_class) -> list[dict]:
    return [dict(e.data, seq=e.seq) for e in loop.class_events(store, task_class)
            if e.kind == "control.revealed"]


# -- fingerprints and the retired set ---------------------------------------------------------

def test_a_case_fingerprint_is_the_sha256_of_its_canonical_json_whatever_the_key_order():
    one = {"order": {"items": [{"sku": "CUP-12", "quantity": 10}]}, "note": "\u00e9t\u00e9"}
    same = {"note": "\u00e9t\u00e9", "order": {"items": [{"quantity": 10, "sku": "CUP-12"}]}}
    canonical = ('{"note":"\u00e9t\u00e9","order":{"items":[{"quantity":10,"sku":"CUP-12"}]}}'
                 .encode())
    assert controls.fingerprint(one) == controls.fingerprint(same)
    assert controls.fingerprint(one) == hashlib.sha256(canonical).hexdigest()
    assert controls.fingerprint({**one, "note": "ete"}) != controls.fingerprint(one)


def test_fingerprints_of_a_draw_are_stable_and_leave_out_the_runs_own_labels():
    first = DEFECT_FIX.draw_controls(b"f" * 32, 40, frozenset())
    again = DEFECT_FIX.draw_controls(b"f" * 32, 40, frozenset())
    assert first.cases == again.cases
    assert len(first.cases) == first.count == 40
    case = first.state["reproduction"][0]
    # the r000 label is the run's, not the case's: the case is the order alone
    assert first.cases[0] == controls.fingerprint({"order": case["order"]})
    scenario = draw_control_set(b"f" * 32).scenarios[0]
    assert "id" not in case_of(scenario)
    assert "run_token" not in case_of(scenario)


def test_retired_is_every_fingerprint_the_classs_reveals_name_and_no_other_classs(store):
    controls.reveal(store, "toy_sum", "toy-1", b"\x01" * 32, "c1", ["a", "b"], 0, AT)
    controls.reveal(store, "toy_sum", "toy-2", b"\x02" * 32, "c2", ["c"], 3, AT)
    controls.reveal(store, "other_class", "oth-1", b"\x03" * 32, "c3", ["z"], 0, AT)
    assert controls.retired(store, "toy_sum") == frozenset({"a", "b", "c"})
    assert controls.retired(store, "other_class") == frozenset({"z"})
    assert controls.retired(store, "never_run") == frozenset()
    assert _revealed(store)[1]["seed"] == "02" * 32


@pytest.mark.parametrize(("seed", "skipped", "message"), [
    (b"", 0, "revealed with the seed"), (b"\x01", -1, "not a count")])
def test_a_reveal_without_a_seed_or_with_a_negative_skip_count_writes_nothing(
        store, seed, skipped, message):
    with pytest.raises(InputError, match=message):
        controls.reveal(store, "toy_sum", "toy-1", seed, "c", ["a"], skipped, AT)
    assert store.size() == 0


# -- draws that skip retired cases ------------------------------------------------------------

def test_the_toy_draw_skips_retired_pairs_and_draws_on_from_the_same_stream():
    seed = b"t" * 32
    plain = HARNESS.draw_controls(seed, 8, frozenset())
    retired = frozenset(plain.cases[:3])
    skipping = HARNESS.draw_controls(seed, 8, retired)
    # the stream is the same: the first three pairs are passed over, the next ones follow
    assert skipping.state[:5] == plain.state[3:]
    assert skipping.skipped == 3
    assert retired.isdisjoint(skipping.cases)
    assert HARNESS.draw_controls(seed, 8, retired) == skipping  # a pure function


def test_the_defect_fix_draw_never_returns_a_retired_order_and_repeats_for_the_same_inputs():
    seed = b"d" * 32
    plain = DEFECT_FIX.draw_controls(seed, 40, frozenset())
    assert plain.skipped == 0
    retired = frozenset(plain.cases[::2])  # half of them, in both families
    drawn = DEFECT_FIX.draw_controls(seed, 40, retired)
    assert retired.isdisjoint(drawn.cases)
    assert drawn.skipped >= 1
    assert len(drawn.cases) == drawn.count == 40
    assert drawn == DEFECT_FIX.draw_controls(seed, 40, retired)
    # the families keep their shape: every reproduction order still sits on a tier boundary
    assert all(sum(i["quantity"] for i in c["order"]["items"]) in reference.BOUNDARIES
               for c in drawn.state["reproduction"])


def test_the_pilot_02_draw_never_returns_a_retired_scenario_and_repeats_for_the_same_inputs():
    seed = b"p" * 32
    plain = PILOT_02.draw_controls(seed, 100, frozenset())
    assert plain.skipped == 0
    assert len(plain.cases) == plain.count
    retired = frozenset(plain.cases[:40])
    drawn = PILOT_02.draw_controls(seed, 100, retired)
    assert retired.isdisjoint(drawn.cases)
    assert drawn.skipped >= 1
    assert len(drawn.cases) == drawn.count
    assert drawn.data == PILOT_02.draw_controls(seed, 100, retired).data


# -- the runner -------------------------------------------------------------------------------

def test_the_runner_reveals_seed_commitment_and_cases_only_after_the_award(store, tmp_path):
    seed = b"s" * 32
    result = runner.run(HARNESS, candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8, seed=seed))
    assert result.status == "completed"
    events = store.attempt_events(result.attempt_id)
    award = next(e.seq for e in events if e.kind == "award.decision")
    last = max(e.seq for e in events)
    [revealed] = _revealed(store)
    # after the award and after every event of the attempt (its completion included)
    assert revealed["seq"] > award
    assert revealed["seq"] > last
    committed = next(json.loads(store.get_evidence(e.data["digest"])) for e in events
                     if e.kind == "evidence.stored"
                     and e.data["what"] == "control_seed_commitment")
    assert revealed["seed"] == seed.hex()
    assert revealed["commitment"] == committed["commitment"] == runner.seed_commitment(
        HARNESS, seed)
    assert list(revealed["cases"]) == list(HARNESS.draw_controls(seed, 8, frozenset()).cases)
    assert (revealed["attempt"], revealed["skipped"]) == (result.attempt_id, 0)


def test_a_second_run_with_the_same_seed_draws_none_of_the_first_runs_cases(store, tmp_path):
    seed = b"s" * 32
    for _ in range(2):
        runner.run(HARNESS, candidate(tmp_path, "add"), store, tmp_path / "runs",
                   RunOptions(size=8, seed=seed))
    first, second = _revealed(store)
    assert set(first["cases"]).isdisjoint(second["cases"])
    assert second["skipped"] == 8  # the same stream: all eight earlier pairs passed over


@dataclass
class _Stale(ToySumHarness):
    """A class that ignores the retired cases, or names too few fingerprints."""

    short: bool = False

    def draw_controls(self, seed: bytes, size: int, retired: frozenset[str]) -> Controls:
        drawn = super().draw_controls(seed, size, frozenset())
        cases = drawn.cases[:-1] if self.short else drawn.cases
        return Controls(drawn.data, drawn.count, drawn.state, cases, drawn.skipped)


def test_the_runner_refuses_a_class_that_draws_a_retired_case_with_nothing_awarded(
        store, tmp_path):
    seed = b"r" * 32
    first = runner.run(_Stale(), candidate(tmp_path, "add"), store, tmp_path / "runs",
                       RunOptions(size=8, seed=seed))
    assert first.status == "completed"  # nothing was retired yet
    second = runner.run(_Stale(), candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8, seed=seed))
    assert (second.status, second.signal) == ("errored", None)
    assert "an earlier run revealed" in second.summary["error"]
    recorded = kinds(store, second.attempt_id)
    assert "award.decision" not in recorded
    assert "evidence.stored:control_set" not in recorded  # refused before it was stored
    assert recorded[-1] == "attempt.errored"
    assert [r["attempt"] for r in _revealed(store)] == [first.attempt_id]


def test_the_runner_refuses_a_class_whose_fingerprints_do_not_number_its_cases(store, tmp_path):
    result = runner.run(_Stale(short=True), candidate(tmp_path, "add"), store,
                        tmp_path / "runs", RunOptions(size=8))
    assert (result.status, result.signal) == ("errored", None)
    assert "names 7 case fingerprints for 8 cases" in result.summary["error"]
    assert "award.decision" not in kinds(store, result.attempt_id)
    assert _revealed(store) == []


@dataclass
class _Breaks(ToySumHarness):
    """A class whose run breaks after it was handed the control set."""

    def execute(self, ctx: RunContext, prepared: Prepared, drawn: Controls) -> Outcome:
        raise ExternalError("simulated: the sandbox went away mid-run")


def test_a_run_that_breaks_after_the_draw_still_retires_its_cases(store, tmp_path):
    seed = b"b" * 32
    result = runner.run(_Breaks(), candidate(tmp_path, "add"), store, tmp_path / "runs",
                        RunOptions(size=8, seed=seed))
    assert result.status == "errored"
    errored = next(e.seq for e in store.attempt_events(result.attempt_id)
                   if e.kind == "attempt.errored")
    [revealed] = _revealed(store)
    assert revealed["seq"] > errored  # the attempt ended before anything was revealed
    assert controls.retired(store, HARNESS.task_class) == frozenset(
        HARNESS.draw_controls(seed, 8, frozenset()).cases)


# -- the bundled classes' observations --------------------------------------------------------

def _post(sid: str, status: int) -> P02Exchange:
    return P02Exchange(sid, "POST", "/contact", {}, status, {}, "", "t0", "t1", None)


def test_pilot_02_observes_public_tests_against_scored_scenarios_ending_as_the_contract_says():
    scenarios = [{"id": sid, "valid": valid, "run_token": f"tok-{sid}"}
                 for sid, valid in (("ok", True), ("lost", True), ("refused", False),
                                    ("let_in", False), ("twin", True), ("fault", True))]
    plan = {"ok": {}, "lost": {}, "refused": {}, "let_in": {}, "twin": {"twin_of": "ok"},
            "fault": {"smtp_fault": "first_attempt_451"}}
    decided = {"ok": Decision(1, True, True), "lost": Decision(0, True, False),
               "refused": Decision(0, False, False), "let_in": Decision(1, True, True),
               "twin": Decision(0, False, False), "fault": Decision(0, False, False)}
    posts = {"ok": [_post("ok", 200)], "lost": [_post("lost", 200)],
             "refused": [_post("refused", 422)], "let_in": [_post("let_in", 200)],
             "twin": [_post("twin", 500)], "fault": [_post("fault", 500)]}
    public = {"tests/test_a.py::t1": "PASSED", "tests/test_a.py::t2": "FAILED",
              "tests/test_b.py::t3": "NOT RUN"}
    seen = pilot_observation(scenarios, plan, decided, posts, public)
    # twins and temporary SMTP failures are judged elsewhere: four scored, two ended right
    assert seen == Observation(known="1/3", hidden="2/4")
    assert pilot_observation(scenarios, plan, decided, posts, {}) is None


def _recorded(regression: dict[str, str], traffic: list[DfxExchange],
              hidden: dict[str, str]) -> scoring.Recorded:
    return scoring.Recorded(
        changes=Changes((), (), (), (), (), ()), regression=regression,
        hidden_candidate=hidden, hidden_base={}, added_candidate={}, added_base={},
        traffic=traffic, probe=[], reproduction_ids=list(hidden), new_static_findings={},
        recurrence_reports=0, ci_minutes=Decimal(0))


def test_defect_fix_observes_supplied_tests_against_fresh_orders_answered_correctly():
    cases = {"reproduction": [{"id": "r000"}, {"id": "r001"}],
             "ordinary": [{"id": "o000"}, {"id": "o001"}, {"id": "o002"}]}
    traffic = [DfxExchange(case, "ordinary", 200, {}, Decimal(5), case != "o002")
               for case in ("r000", "r001", "o000", "o001", "o002")]
    # r000 fixed (test passes, served right); r001 fails its hidden test; o002 served wrong
    recorded = _recorded({"tests/test_pricing.py::t": "PASSED", "tests/test_app.py::t": "FAILED"},
                         traffic, {"r000": "PASSED", "r001": "FAILED"})
    assert dfx_observation(recorded, cases) == Observation(known="1/2", hidden="3/5")
    assert dfx_observation(_recorded({}, traffic, {}), cases) is None


@pytest.mark.parametrize("harness", [DEFECT_FIX, PILOT_02], ids=["defect_fix", "pilot_02"])
def test_a_draw_that_skips_more_retired_cases_than_the_bound_fails_closed(harness, monkeypatch):
    """spec 9.6: a pool most of whose cases were revealed must be expanded; past the bound the
    draw stops with an error (the runner ends the attempt errored, nothing awarded) instead of
    drawing for ever.  The bound is lowered to 0 here: the first skip is past it."""
    seed = b"x" * 32
    size = harness.min_size
    first = harness.draw_controls(seed, size, frozenset())
    monkeypatch.setattr(controls, "MAX_SKIPS", 0)
    with pytest.raises(ExternalError, match=r"control pool .* is exhausted"):
        harness.draw_controls(seed, size, frozenset(first.cases))
