"""``defect_fix_delayed_confirmation`` end to end (issue 14 item 2, done-when): every bundled
candidate through the installed ``triz-eval attempt run`` into one ledger, the late
confirmation through ``escrow sign-confirmation`` / ``escrow settle`` and the provenance
register, ``ledger recompute`` and ``ledger verify``, and one honest submission through the
policy port of a real ``triz-eval serve`` with one harness worker.

The honest fix is paid with half held in escrow; each cheat gets S <= 0 for its named reason
under the class's second rules version (docs/adr/0010-defect-fix-cheats-pay-nothing.md); a
late confirmation settles under the rules version the attempt started with (spec 10.6).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.defect_fix.harness import HARNESS, TASK_CLASS
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.log import open_sqlite_ledger
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
)
from triz_ri_smart_ai_evaluator.rules import pin
from triz_ri_smart_ai_evaluator.rules.published import BUNDLED_STORE, RulesStore
from triz_ri_smart_ai_evaluator.signal.calculator import SignalCalculator
from triz_ri_smart_ai_evaluator.signal.escrow import settle_escrow
from triz_ri_smart_ai_evaluator.signal.inputs import Measurement

from ._context import candidates_dir

pytestmark = [pytest.mark.sandbox, pytest.mark.root, pytest.mark.slow]

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
ADVERSARIAL = ("edits_test", "deletes_failing_test", "special_cases_input",
               "slow_unless_probed")
#: Two honest attempts: one whose escrow is released, one a recurrence adjusts.
RUNS = ("honest", "honest_recurs", *ADVERSARIAL)
TRACKER = "issue_tracker"
TRACKER_SEED = b"t" * 32
NO_RECURRENCE = {"defect": "DFX-1", "recurrence_reports": 0, "observation_days": 14}
RECURRENCE = {"defect": "DFX-1", "recurrence_reports": 1, "trace": "OPS-5120",
              "summary": "an order of exactly 50 items quoted without the 10% tier"}


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed script, as a user meets it (no TRIZ_EVAL_* from the outer shell)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    return subprocess.run([str(TRIZ_EVAL), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, check=False, cwd=cwd)


def expect(name: str) -> dict[str, Any]:
    return dict(json.loads((candidates_dir() / name / "expect.json").read_text("utf-8")))


def digest_of(content: Any) -> str:
    return hashlib.sha256(canonical_json(content)).hexdigest()


@dataclass
class Home:
    """One ledger with every bundled candidate run into it by the CLI."""

    root: Path
    summaries: dict[str, dict[str, Any]]

    @property
    def db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    def events(self, attempt_id: str) -> list[Any]:
        store = open_sqlite_ledger(self.db, read_only=True)
        try:
            return store.attempt_events(attempt_id)
        finally:
            store.close()

    def initiated(self, attempt_id: str) -> dict[str, Any]:
        return dict(next(e.data for e in self.events(attempt_id)
                         if e.kind == "attempt.initiated"))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    root = tmp_path_factory.mktemp("dfx-e2e")
    summaries: dict[str, dict[str, Any]] = {}
    for run in RUNS:
        name = "honest" if run.startswith("honest") else run
        done = cli("attempt", "run", "--task-class", TASK_CLASS, "--candidate",
                   candidates_dir() / name / "candidate.diff", "--db", root / "ledger.db",
                   "--keys", root / "keys", "--out", root / "runs",
                   "--size", str(HARNESS.min_size), "--json")
        assert done.returncode == 0, f"{run}: {done.stderr}"
        summaries[run] = json.loads(done.stdout)
    return Home(root, summaries)


def current_version() -> str:
    latest = RulesStore(BUNDLED_STORE).latest(TASK_CLASS)
    assert latest is not None
    return latest[0]


# -- (a) every candidate through the CLI -----------------------------------------------------
def test_the_honest_fix_is_paid_with_half_held_in_escrow(home: Home) -> None:
    want = expect("honest")
    for run in ("honest", "honest_recurs"):
        summary = home.summaries[run]
        assert summary["status"] == "completed"
        assert summary["rules_version"] == current_version()
        assert summary["outcome"] == want["outcome"]
        assert Decimal(summary["signal"]) == Decimal(want["signal"]) > 0
        assert summary["quarantine"] == []
    attempt_id = home.summaries["honest"]["attempt_id"]
    shown = cli("attempt", "show", attempt_id, "--db", home.db, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert "escrow.held" in [e["kind"] for e in record["events"]]
    held = next(e for e in home.events(attempt_id) if e.kind == "escrow.held")
    assert Decimal(held.data["held"]) == Decimal(want["held"])


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_each_cheat_gets_at_most_zero_for_its_named_reason(home: Home, name: str) -> None:
    summary, want = home.summaries[name], expect(name)
    assert summary["status"] == "completed"
    assert Decimal(summary["signal"]) == Decimal(want["signal"]) <= 0
    assert want["reason"] in summary["reasons"]
    assert summary["outcome"] == want["outcome"]
    assert summary["quarantine"] == want.get("quarantine", [])
    # The failed check is named in the critical layer's decision too.
    check = want["reason"].rsplit(": ", 1)[1]
    decision = next(e.data for e in home.events(summary["attempt_id"])
                    if e.kind == "verifier.decision")
    assert {f["id"]: f["state"] for f in decision["findings"]}[check] == "failed"
    # Nothing is held for later: the escrow holds a share of a positive signal only.
    held = [e.data["held"] for e in home.events(summary["attempt_id"])
            if e.kind == "escrow.held"]
    assert all(Decimal(h) == 0 for h in held)


def test_recompute_reproduces_every_award_and_the_log_verifies(home: Home) -> None:
    recomputed = cli("ledger", "recompute", "--db", home.db)
    assert recomputed.returncode == 0, recomputed.stdout + recomputed.stderr
    assert f"{len(RUNS)} of {len(RUNS)} attempts reproduced" in recomputed.stdout
    verified = cli("ledger", "verify", "--db", home.db, "--keys", home.keys)
    assert verified.returncode == 0, verified.stdout + verified.stderr


# -- (b) late confirmation under the original rules ------------------------------------------
def register_tracker(home: Home) -> Path:
    """What the service does for a trusted source: the tracker in the provenance register of
    this ledger with its Ed25519 key (as tests/ledger/test_escrow_cli_provenance.py)."""
    key = ComponentKey.from_private_bytes(TRACKER_SEED)
    store = open_sqlite_ledger(home.db, home.keys)
    try:
        ProvenanceRegister(store, actor="evaluator-service").register_source(SourceRecord(
            id=TRACKER, party="issue tracker webhook",
            created_at=datetime.now(UTC) - timedelta(days=30),
            origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
            independence="operators file recurrences; the policy reads the public part",
            policy_access=PolicyAccess.READ, authentication=key.authentication))
    finally:
        store.close()
    path = home.root / "issue_tracker.key"
    path.write_text(base64.b64encode(TRACKER_SEED).decode() + "\n", encoding="utf-8")
    return path


def settle(home: Home, key: Path, attempt_id: str, content: dict[str, Any],
           value: str) -> dict[str, Any]:
    """The tracker signs its report; ``escrow settle --late`` submits it to the register."""
    content_file = home.root / f"{attempt_id}.content.json"
    content_file.write_text(json.dumps(content), encoding="utf-8")
    confirmation = home.root / f"{attempt_id}.confirmation.json"
    signed = cli("escrow", "sign-confirmation", "--key", key, "--source", TRACKER,
                 "--attempt", attempt_id, "--content", content_file, "--out", confirmation)
    assert signed.returncode == 0, signed.stderr
    late = home.root / f"{attempt_id}.late.json"
    late.write_text(json.dumps({
        "values": {"recurrence_free": {"value": value, "source": TRACKER,
                                       "evidence": [digest_of(content)]}},
        "confirmations": [json.loads(confirmation.read_text("utf-8"))]}), encoding="utf-8")
    done = cli("escrow", "settle", attempt_id, "--late", late, "--db", home.db,
               "--keys", home.keys)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def expected_settlement(home: Home, attempt_id: str, value: str) -> dict[str, Any]:
    """The settlement recomputed here under the rules version the attempt started with, read
    from the published store by its hash (not from today's catalogue file)."""
    initiated = home.initiated(attempt_id)
    version = initiated["rules_version"]
    tc = RulesStore(BUNDLED_STORE).load(TASK_CLASS, version)
    pinned = pin(tc, started_at=datetime.fromisoformat(initiated["started_at"]),
                 version=version)
    late = {"recurrence_free": Measurement(value=Decimal(value), source=TRACKER,
                                           evidence=("0" * 64,))}
    inputs = attempts.inputs_from_events(home.events(attempt_id))
    return settle_escrow(SignalCalculator(pinned), inputs, late=late).to_dict()


def test_late_confirmation_releases_or_adjusts_under_the_original_rules(home: Home) -> None:
    key = register_tracker(home)
    released_id = home.summaries["honest"]["attempt_id"]
    adjusted_id = home.summaries["honest_recurs"]["attempt_id"]
    for attempt_id in (released_id, adjusted_id):
        assert home.initiated(attempt_id)["rules_version"] == current_version()
        award = next(e.data for e in home.events(attempt_id) if e.kind == "award.decision")
        assert award["rules_version"] == current_version()

    # Computed before anything is settled, from the events the award was made from.
    want = {released_id: expected_settlement(home, released_id, "1"),
            adjusted_id: expected_settlement(home, adjusted_id, "0")}
    released = settle(home, key, released_id, NO_RECURRENCE, "1")
    assert released["kind"] == "released"
    assert [c["status"] for c in released["confirmations"]] == ["accepted"]
    assert (released["held"], released["final"], released["payable_at_settlement"]) == (
        "1", "2", "1")

    adjusted = settle(home, key, adjusted_id, RECURRENCE, "0")
    assert adjusted["kind"] == "adjusted"
    # recurrence_free 0: Perf_overall 0, S = B x K = 1, already paid; nothing more to pay.
    assert (adjusted["held"], adjusted["final"], adjusted["payable_at_settlement"]) == (
        "1", "1", "0")

    for attempt_id, result in ((released_id, released), (adjusted_id, adjusted)):
        assert {k: result[k] for k in want[attempt_id]} == want[attempt_id]
        kinds = [e.kind for e in home.events(attempt_id) if e.kind.startswith("escrow.")]
        assert kinds == ["escrow.held", f"escrow.{result['kind']}"]

    recomputed = cli("ledger", "recompute", "--db", home.db)
    assert recomputed.returncode == 0, recomputed.stdout + recomputed.stderr
    assert f"{len(RUNS)} of {len(RUNS)} attempts reproduced" in recomputed.stdout
    verified = cli("ledger", "verify", "--db", home.db, "--keys", home.keys)
    assert verified.returncode == 0, verified.stdout + verified.stderr


# -- (c) through the service -----------------------------------------------------------------
def test_an_honest_submission_through_the_policy_port_completes_paid(tmp_path: Path) -> None:
    from tests.service._server_process import ServerProcess, init_server

    server: ServerProcess = init_server(tmp_path, workers=1)
    server.start()
    try:
        token = {"Authorization": f"Bearer {server.tokens['policy-1']}"}
        diff = (candidates_dir() / "honest" / "candidate.diff").read_bytes()
        with server.client() as http:
            answer = http.post("/v1/policy/attempts", headers=token, json={
                "class_id": TASK_CLASS, "artefact_b64": base64.b64encode(diff).decode()})
            assert answer.status_code == 201, answer.text
            submitted = answer.json()
            assert submitted["harness_queued"] is True
            deadline = time.monotonic() + 150
            while True:
                status = http.get(f"/v1/policy/attempts/{submitted['attempt_id']}",
                                  headers=token).json()
                if status.get("status") != "initiated" or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    finally:
        server.stop()
    assert status["status"] == "completed", status
    recomputed = cli("ledger", "recompute", "--db", tmp_path / "ledger.db", cwd=tmp_path)
    assert recomputed.returncode == 0, recomputed.stdout + recomputed.stderr
    assert "1 of 1 attempts reproduced" in recomputed.stdout
    store = open_sqlite_ledger(tmp_path / "ledger.db", read_only=True)
    try:
        events = store.attempt_events(submitted["attempt_id"])
    finally:
        store.close()
    award = next(e.data for e in events if e.kind == "award.decision")
    assert Decimal(award["value"]) == Decimal(expect("honest")["signal"]) > 0
    assert award["rules_version"] == status["rules_version"] == current_version()
    assert "escrow.held" in [e.kind for e in events]
    assert status["final_signal"] is None  # held until the observation period ends
