"""Acceptance test of spec 11.16 (hidden and rotated controls; 9.6, 10.1, 10.7; issue 15).

The honest reference fix of ``defect_fix_delayed_confirmation`` is run twice through the
installed ``triz-eval attempt run --json`` on one fresh ledger (``TRIZ_EVAL_DB`` and
``TRIZ_EVAL_KEYS`` in a temporary folder), each run with a fresh secret seed.  From the ledger
alone it is then shown that the second control set shares no case with the first (the first
run's cases were revealed after its award and so retired), that each revealed seed re-derives
the commitment the ledger held before the draw and re-draws exactly the revealed cases and the
stored control set, that both runs recorded a known-suite against hidden-control observation,
and that the divergence monitor did not trip for the honest reference.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.defect_fix.harness import HARNESS, SEED_TAG, TASK_CLASS
from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.ledger.events import Event
from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger

from ._cli import cli

HONEST = (Path(__file__).resolve().parents[2] / "triz_ri_smart_ai_evaluator" / "defect_fix"
          / "candidates" / "honest" / "candidate.diff")


@dataclass(frozen=True)
class Ledger:
    """What the two runs left: their summaries and the ledger's events."""

    summaries: tuple[dict[str, Any], ...]
    attempts: dict[str, list[Event]]
    loop_events: list[Event]

    def of_class(self, kind: str) -> list[Event]:
        return [e for e in self.loop_events if e.kind == kind]

    def revealed(self, attempt_id: str) -> Event:
        [found] = [e for e in self.of_class("control.revealed")
                   if e.data["attempt"] == attempt_id]
        return found


def _cli(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return cli(root, *args)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Ledger:
    root = tmp_path_factory.mktemp("hidden-control")
    assert _cli(root, "ledger", "init").returncode == 0
    summaries = []
    for _ in range(2):
        done = _cli(root, "attempt", "run", "--task-class", TASK_CLASS, "--candidate", HONEST,
                    "--out", root / "runs", "--json")
        assert done.returncode == 0, done.stderr
        summaries.append(json.loads(done.stdout))
    store = open_sqlite_ledger(root / "ledger.db", read_only=True)
    try:
        return Ledger(tuple(summaries),
                      {s["attempt_id"]: store.attempt_events(s["attempt_id"])
                       for s in summaries},
                      loop.class_events(store, TASK_CLASS))
    finally:
        store.close()


def test_both_honest_runs_completed_with_a_full_signal(ledger: Ledger) -> None:
    assert [(s["status"], s["signal"]) for s in ledger.summaries] == [("completed", "2")] * 2


def test_the_second_control_set_shares_no_case_with_the_first(ledger: Ledger) -> None:
    first, second = (ledger.revealed(s["attempt_id"]) for s in ledger.summaries)
    assert len(first.data["cases"]) == len(second.data["cases"]) == HARNESS.min_size
    assert set(first.data["cases"]).isdisjoint(second.data["cases"])
    assert first.data["seed"] != second.data["seed"]


def test_a_revealed_set_is_retired_so_even_its_own_seed_cannot_draw_it_again(
        ledger: Ledger) -> None:
    # Fresh secret seeds alone would rarely collide; what rotates the set is the retirement:
    # with the ledger's retired fingerprints, even the first run's own seed draws none of its
    # cases (it passes over the first it meets and draws on from there).
    first = ledger.revealed(ledger.summaries[0]["attempt_id"]).data
    retired = frozenset(case for e in ledger.of_class("control.revealed")
                        for case in e.data["cases"])
    assert retired == frozenset(first["cases"]) | frozenset(
        ledger.revealed(ledger.summaries[1]["attempt_id"]).data["cases"])
    again = HARNESS.draw_controls(bytes.fromhex(first["seed"]), HARNESS.min_size, retired)
    assert retired.isdisjoint(again.cases)
    assert again.skipped >= 1
    assert len(again.cases) == HARNESS.min_size


def test_each_set_is_revealed_only_after_its_award(ledger: Ledger) -> None:
    for summary in ledger.summaries:
        events = ledger.attempts[summary["attempt_id"]]
        award = next(e.seq for e in events if e.kind == "award.decision")
        assert ledger.revealed(summary["attempt_id"]).seq > max(award, *(e.seq for e in events))


def _evidence(events: list[Event], what: str) -> tuple[int, str]:
    return next((e.seq, e.data["digest"]) for e in events
                if e.kind == "evidence.stored" and e.data["what"] == what)


def test_the_revealed_seed_re_derives_the_commitment_and_re_draws_exactly_the_revealed_cases(
        ledger: Ledger) -> None:
    retired_before: frozenset[str] = frozenset()
    for summary in ledger.summaries:
        attempt_id = summary["attempt_id"]
        events = ledger.attempts[attempt_id]
        revealed = ledger.revealed(attempt_id).data
        seed = bytes.fromhex(revealed["seed"])
        # the commitment the ledger held before the set was drawn is sha256(tag || seed)
        committed_at, _ = _evidence(events, "control_seed_commitment")
        drawn_at, set_digest = _evidence(events, "control_set")
        assert committed_at < drawn_at
        assert revealed["commitment"] == hashlib.sha256(SEED_TAG + seed).hexdigest()
        # the seed, with what was retired before the run, re-draws the very set that ran
        again = HARNESS.draw_controls(seed, HARNESS.min_size, retired_before)
        assert list(again.cases) == list(revealed["cases"])
        assert again.skipped == revealed["skipped"]
        assert hashlib.sha256(again.data).hexdigest() == set_digest
        retired_before |= frozenset(revealed["cases"])


def test_the_bundle_publishes_the_seed_and_commitment_the_ledger_reveals(ledger: Ledger) -> None:
    for summary in ledger.summaries:
        bundle = Path(summary["bundle"])
        seed_file = json.loads((bundle / "control_seed.json").read_text("utf-8"))
        revealed = ledger.revealed(summary["attempt_id"]).data
        assert (seed_file["seed"], seed_file["commitment"]) == (revealed["seed"],
                                                                revealed["commitment"])


def test_both_runs_recorded_a_known_suite_against_hidden_control_observation(
        ledger: Ledger) -> None:
    seen = {e.data["attempt"]: e.data for e in ledger.of_class("control.observation")}
    assert set(seen) == {s["attempt_id"] for s in ledger.summaries}
    for observed in seen.values():
        # the honest fix passes every supplied test and every fresh hidden order
        assert observed["known"] == f"{observed['known_cases']}/{observed['known_cases']}"
        assert observed["hidden"] == f"{HARNESS.min_size}/{HARNESS.min_size}"
        assert observed["known_cases"] > 0


def test_the_divergence_monitor_did_not_trip_for_the_honest_reference(ledger: Ledger) -> None:
    checks = ledger.of_class("divergence.checked")
    assert len(checks) == 2  # one check after each observation
    assert all(c.data["tripped"] is False for c in checks)
    assert loop.state_of(ledger.loop_events, TASK_CLASS).mode == "training"
