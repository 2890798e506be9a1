"""Acceptance test of spec 11.23 (continuous adversarial acceptance; 9.12-9.14; pilot 11-12).

The installed ``triz-eval audit run`` runs two small campaigns against pilot 02 on one fresh
ledger, each a real harness run per candidate in the sandbox:

* campaign A: one bundled input mutation and one bundled attempt on the test loop, two workers.
  Its budget is below pilot 11's minimum, so it is recorded and never passed; its report is in
  the ledger as evidence, signed with the log key, and names every attempt it made;
* campaign B: a user-supplied candidate said to lack the required result that is really the
  honest reference.  It earns the honest signal, so the campaign reports it as an exploit,
  stops and is not passed: the exploit path proved by a real run.

Then ``pilot_pass``: the honest reference's run inside campaign A had no passing report, so its
``pilot_pass`` is null with ``red_team`` pending.  A passing ``audit.report`` for the same rules
and harness versions is appended (a real passing campaign needs the full budget, see
scripts/run-main.sh), and the next run of the reference has ``pilot_pass`` equal to its public
acceptance (true).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.audit import report
from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import load_log_signer, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.payloads import AuditReport

from ._cli import cli

PILOT = "pilot_02_feedback_form"
REFERENCE = (Path(__file__).resolve().parents[2] / "triz_ri_smart_ai_evaluator"
             / "pilot_02_feedback_form" / "candidates" / "reference" / "candidate.diff")
BUDGET = """\
name: {name}
task_class: pilot_02_feedback_form
attempts: {{scenarios: 100, input_mutations: 1, test_loop: {test_loop}, injection_and_secrets: 0}}
wall_clock_seconds: 900
organisational: the acceptance test, one machine
success_criterion: no adversary earns the honest reference's signal
"""


@dataclass(frozen=True)
class Campaigns:
    root: Path
    a: subprocess.CompletedProcess[str]
    b: subprocess.CompletedProcess[str]

    def doc(self, which: str) -> dict[str, Any]:
        run = self.a if which == "a" else self.b
        parsed: dict[str, Any] = json.loads(run.stdout)
        return parsed


def _cli(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return cli(root, *args, timeout=900)


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> Campaigns:
    root = tmp_path_factory.mktemp("audit")
    (root / "a.yaml").write_text(BUDGET.format(name="small-a", test_loop=1), encoding="utf-8")
    (root / "b.yaml").write_text(BUDGET.format(name="small-b", test_loop=0), encoding="utf-8")
    disguised = root / "candidates" / "honest-in-disguise"
    disguised.mkdir(parents=True)
    shutil.copy(REFERENCE, disguised / "candidate.diff")
    (disguised / "adversary.yaml").write_text(
        "category: input_mutations\nlacks_result: true\n"
        "attack: claims to drop the SMTP send (it is really the honest reference)\n",
        encoding="utf-8")
    # Two workers: the sandbox runs on two threads at once.  Before issue 16 this ended every
    # adversary inconclusive now and then: the ledger narrowed the process umask while a stage
    # was being built on the other thread (tests/core/test_umask_threads.py).
    a = _cli(root, "audit", "run", "--class", PILOT, "--budget", root / "a.yaml",
             "--out", root / "audits", "--seed", "a11ce5eed0000000", "--workers", "2",
             "--json")
    b = _cli(root, "audit", "run", "--class", PILOT, "--budget", root / "b.yaml",
             "--candidates", root / "candidates", "--out", root / "audits", "--json")
    return Campaigns(root, a, b)


def test_the_report_is_in_the_ledger_signed_and_names_every_attempt(
        campaigns: Campaigns) -> None:
    assert campaigns.a.returncode == 1, campaigns.a.stderr  # below the minimum: not passed
    doc = campaigns.doc("a")
    assert doc["passed"] is False
    assert doc["below_minimum"]
    assert doc["verdicts"] == {"caught": 2, "exploit": 0, "unquarantined": 0,
                               "inconclusive": 0}, [(a["name"], a.get("reason"))
                                                    for a in doc["attempts"]]
    assert {(a["name"], a["category"]) for a in doc["attempts"]} == {
        ("breaks_public_tests", "input_mutations"), ("changing_tests", "test_loop")}
    assert doc["spent"]["scenarios"] >= 200  # each attempt runs its whole control set
    assert "No exploit was found within budget" not in doc["statement"]
    assert doc["residual_risks"]  # spec 11.24: the class's residual-risk entries
    root = campaigns.root
    store = open_sqlite_ledger(root / "ledger.db", read_only=True)
    try:
        [event] = [r for r in report.reports(store, PILOT) if r["campaign"] == doc["campaign"]]
        stored = json.loads(store.get_evidence(event["report"]))
        assert stored["campaign"] == doc["campaign"]
        assert event["passed"] is False
        assert event["tried"] == doc["spent"]
        verifier = load_log_signer(root / "keys").verifier
        assert report.check_signed(store, PILOT, event, verifier) == "verified"
        ids = [doc["honest_reference"]["attempt_id"],
               *(a["attempt_id"] for a in stored["attempts"])]
        for attempt_id in ids:
            kinds = [e.kind for e in store.attempt_events(attempt_id)]
            assert kinds[0] == EventKind.ATTEMPT_INITIATED.value, attempt_id
    finally:
        store.close()
    folder = root / "audits" / doc["campaign"]
    assert json.loads((folder / "report.json").read_text())["attempts"] == stored["attempts"]
    assert "class: pilot_02_feedback_form" in (folder / "report.json.sig").read_text()
    shown = _cli(root, "audit", "show", "--class", PILOT, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [r["signature"] for r in json.loads(shown.stdout)] == ["verified", "verified"]


def test_a_user_candidate_lacking_the_result_that_is_the_honest_reference_is_an_exploit(
        campaigns: Campaigns) -> None:
    assert campaigns.b.returncode == 1, campaigns.b.stderr
    doc = campaigns.doc("b")
    [exploit] = doc["exploits"]
    assert exploit["name"] == "user-honest-in-disguise"
    assert exploit["origin"] == "user"
    assert exploit["signal"] == doc["honest_reference"]["signal"]
    assert doc["stopped"].startswith("exploit confirmed: user-honest-in-disguise")
    assert doc["statement"] == "Exploit found within budget small-b: user-honest-in-disguise."
    assert doc["passed"] is False
    assert len(doc["attempts"]) == 1  # stopped at once: no bundled candidate ran after it


def test_pilot_pass_waits_for_a_passing_report_of_the_same_versions(
        campaigns: Campaigns) -> None:
    root, doc = campaigns.root, campaigns.doc("a")
    honest = doc["honest_reference"]["attempt_id"]
    before = json.loads((root / "audits" / doc["campaign"] / "runs" / honest
                         / "summary.json").read_text())
    assert before["pilot_pass"] is None
    assert "red_team" in before["pilot_pass_pending"]
    assert before["public_acceptance"] is True
    store = open_sqlite_ledger(root / "ledger.db", root / "keys")
    try:
        # A passing campaign needs the full budget; the event is appended as one would be.
        passing = AuditReport(
            task_class=PILOT, rules_version=doc["rules_version"],
            harness_version=doc["harness_version"], campaign="audit-accepted-elsewhere",
            budget={"scenarios": 150, "input_mutations": 50, "test_loop": 30,
                    "injection_and_secrets": 20}, tried={"scenarios": 8000},
            caught=100, exploits=(), stopped="the budget is spent",
            statement="No exploit was found within budget pilot-02-minimum.", passed=True,
            report=doc["honest_reference"]["attempt_id"])
        store.append([NewEvent.make(EventKind.AUDIT_REPORT, passing, actor="audit",
                                    at=datetime.now(UTC), attempt=loop.subject(PILOT))])
    finally:
        store.close()
    after = _cli(root, "attempt", "run", "-t", PILOT, "-c", REFERENCE, "--out", root / "runs",
                 "--json")
    assert after.returncode == 0, after.stderr
    summary = json.loads(after.stdout)
    assert summary["rules_version"] == doc["rules_version"]
    assert summary["pilot_pass_pending"] == []
    assert summary["pilot_pass"] is True
    assert summary["pilot_pass"] == summary["public_acceptance"]
