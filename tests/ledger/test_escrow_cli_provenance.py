"""``triz-eval escrow settle --late`` goes through the provenance register (issue 10).

Spec 10.6 (a late verified value settles the original attempt), 9.15 and 11.21 (only an
authenticated confirmation from a registered, independent source counts), 8.14 (echo) and 11.20.
The command line used to accept any 64-hex "evidence" digest and never consulted the register
the service uses; now the late file carries the trusted source's signed confirmation (the shape
of the service's ``confirmation`` payload), the command submits it to the register over the same
ledger, and every evidence digest must resolve to a stored blob.

Each case runs ``triz-eval`` against a real SQLite ledger, as in test_ledger_bad_input.py: exit 2
or 3, one ``triz-eval: error:`` line, no traceback.  The refusals run in process through the
console script's entry function (``cli.main``, the ``triz_eval`` fixture); the honest paths run
the installed script in a subprocess, exactly as a user meets it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.ledger._attempt_cli import with_stored_evidence
from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.provenance import (
    ComponentKey,
    Origin,
    PolicyAccess,
    ProvenanceRegister,
    SourceRecord,
)
from triz_ri_smart_ai_evaluator.rules import pin

from ..signal.factories import DEFECT, inputs_for, task_class

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
ATTEMPT = "defect-cli-1"
TRACKER = "issue_tracker"
CLAIM = (
    "The defect is fixed: the connection pool no longer leaks, recurrence is impossible and "
    "the issue can be closed as verified by the engineering team after review today."
)
RECURRENCE = {"defect": "D-17", "recurrence_reports": 1, "trace": "OPS-4411",
              "summary": "connection pool leak reappeared on node api-3"}
NO_RECURRENCE = {"defect": "D-17", "recurrence_reports": 0, "observation_days": 14}


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    return subprocess.run([str(TRIZ_EVAL), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


Result = subprocess.CompletedProcess[str] | CliResult


def one_line_error(proc: Result, code: int, *needles: str) -> str:
    context = f"exit {proc.returncode}; stdout: {proc.stdout!r}; stderr: {proc.stderr!r}"
    assert "Traceback" not in proc.stderr + proc.stdout, context
    assert proc.returncode == code, context
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, context
    assert lines[0].startswith("triz-eval: error: "), context
    for needle in needles:
        assert needle.lower() in lines[0].lower(), f"{needle!r} not named: {lines[0]}"
    return lines[0]


@dataclass
class Home:
    """A ledger with a delayed-class attempt in escrow; the tracker's key on disk; how its
    commands run (the installed script, or ``triz_eval`` in process)."""

    root: Path
    cli: Callable[..., Result] = run

    @property
    def db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def tracker_key(self) -> Path:
        return self.root / "issue_tracker.key"

    def write(self, name: str, value: Any) -> Path:
        path = self.root / name
        path.write_text(json.dumps(value), encoding="utf-8")
        return path

    def sign(self, content: Any, *, key: Path | None = None, source: str = TRACKER,
             attempt: str = ATTEMPT) -> dict[str, Any]:
        """The trusted source's side: ``escrow sign-confirmation`` on a content file."""
        content_file = self.write("content.json", content)
        out = self.root / "confirmation.json"
        proc = self.cli("escrow", "sign-confirmation", "--key", key or self.tracker_key,
                        "--source", source, "--attempt", attempt, "--content", content_file,
                        "--out", out)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(out.read_text(encoding="utf-8")))

    def settle(self, late_file: Path) -> Result:
        return self.cli("escrow", "settle", ATTEMPT, "--late", late_file, "--db", self.db,
                        "--keys", self.keys)

    def events(self) -> list[Any]:
        store = open_sqlite_ledger(self.db, read_only=True)
        try:
            return store.attempt_events(ATTEMPT)
        finally:
            store.close()

    def size(self) -> int:
        store = open_sqlite_ledger(self.db, read_only=True)
        try:
            return store.size()
        finally:
            store.close()

    def escrow_kinds(self) -> list[str]:
        return [e.kind for e in self.events() if e.kind.startswith("escrow.")]


def digest_of(content: Any) -> str:
    return hashlib.sha256(canonical_json(content)).hexdigest()


def late_file(home: Home, confirmations: list[dict[str, Any]], *, value: str,
              evidence: list[str]) -> Path:
    return home.write("late.json", {
        "values": {"recurrence_free": {"value": value, "source": TRACKER, "evidence": evidence}},
        "confirmations": confirmations,
    })


def make_home(root: Path, *, register_tracker: bool = True,
              policy_outputs: tuple[str, ...] = (CLAIM,),
              cli: Callable[..., Result] = run) -> Home:
    """What the evaluator service would have written: the attempt and its escrow, the tracker
    registered as a source with its Ed25519 key (service/runtime.py registers trusted
    principals the same way), the policy's outputs fingerprinted."""
    home = Home(root, cli)
    create_log_key(home.keys, origin="escrow-cli.test.example/log")
    # Two days ago, or when the class's current rules took effect if that is later.
    started = max(datetime.now(UTC) - timedelta(days=2), task_class(DEFECT).effective_from)
    store = open_sqlite_ledger(home.db, home.keys)
    try:
        pinned = pin(task_class(DEFECT), started_at=started)
        attempts.initiate(store, pinned, attempt_id=ATTEMPT, task_version="1",
                          started_at=started, deadline=started + timedelta(days=14))
        values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
                  "recurrence_free": "1"}
        inputs = with_stored_evidence(store, ATTEMPT, inputs_for(DEFECT, values))
        attempts.evaluate(store, pinned, inputs, attempt_id=ATTEMPT, at=started)
        register = ProvenanceRegister(store, actor="evaluator-service")
        key = ComponentKey.from_private_bytes(b"k" * 32)
        if register_tracker:
            register.register_source(SourceRecord(
                id=TRACKER, party="issue tracker webhook", created_at=started - timedelta(days=30),
                origin=Origin.INDEPENDENT_OPERATIONAL, synthetic=False,
                independence="operators file recurrences; the policy reads the public part",
                policy_access=PolicyAccess.READ, authentication=key.authentication))
        for text in policy_outputs:
            register.record_policy_output(ATTEMPT, text)
    finally:
        store.close()
    home.tracker_key.write_text(base64.b64encode(b"k" * 32).decode() + "\n", encoding="utf-8")
    (root / "other.key").write_text(base64.b64encode(b"o" * 32).decode() + "\n",
                                    encoding="utf-8")
    return home


@pytest.fixture
def home(tmp_path: Path, triz_eval: Callable[..., CliResult]) -> Home:
    """The commands in process."""
    return make_home(tmp_path, cli=triz_eval)


@pytest.fixture
def script_home(tmp_path: Path) -> Home:
    """The commands through the installed script."""
    return make_home(tmp_path)


# -- the honest paths ------------------------------------------------------------------------
@pytest.mark.slow  # the installed script in subprocesses
def test_the_honest_path_settles_through_the_register(script_home: Home) -> None:
    """11.20: the tracker's signed "no recurrence" report, accepted by the register, releases
    the held share under the attempt's original rules."""
    confirmation = script_home.sign(NO_RECURRENCE)
    proc = script_home.settle(late_file(script_home, [confirmation], value="1",
                                        evidence=[digest_of(NO_RECURRENCE)]))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["kind"] == "released"
    assert [c["status"] for c in result["confirmations"]] == ["accepted"]
    assert script_home.escrow_kinds() == ["escrow.held", "escrow.released"]
    kinds = [e.kind for e in script_home.events()]
    assert "confirmation.received" in kinds


@pytest.mark.slow  # the installed script in subprocesses
def test_a_signed_recurrence_adjusts_the_escrow_down(script_home: Home) -> None:
    confirmation = script_home.sign(RECURRENCE)
    proc = script_home.settle(late_file(script_home, [confirmation], value="0",
                                        evidence=[digest_of(RECURRENCE)]))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["kind"] == "adjusted"
    assert result["echo_collision"] == []
    assert script_home.escrow_kinds() == ["escrow.held", "escrow.adjusted"]


@pytest.mark.slow  # the installed script in subprocesses
def test_a_recurrence_the_policy_wrote_first_still_settles_and_the_collision_is_recorded(
    tmp_path: Path,
) -> None:
    """8.14 vs a trusted negative: the policy pre-wrote the report's JSON; the tracker's genuine
    signed report is still applied downward, and the collision is on record."""
    home = make_home(tmp_path, policy_outputs=(CLAIM, canonical_json(RECURRENCE).decode()))
    confirmation = home.sign(RECURRENCE)
    proc = home.settle(late_file(home, [confirmation], value="0",
                                 evidence=[digest_of(RECURRENCE)]))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["kind"] == "adjusted"
    assert result["confirmations"][0]["echo_collision"] is True
    assert [c["indicator"] for c in result["echo_collision"]] == ["recurrence_free"]
    shown = run("attempt", "show", ATTEMPT, "--db", home.db, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["escrow"][-1]["echo_collision"][0]["source"] == TRACKER


def test_a_policy_echoed_favourable_report_does_not_settle(
    tmp_path: Path, triz_eval: Callable[..., CliResult],
) -> None:
    home = make_home(tmp_path, policy_outputs=(canonical_json(NO_RECURRENCE).decode(),),
                     cli=triz_eval)
    confirmation = home.sign(NO_RECURRENCE)
    proc = home.settle(late_file(home, [confirmation], value="1",
                                 evidence=[digest_of(NO_RECURRENCE)]))
    one_line_error(proc, 3, "provenance register")
    assert home.escrow_kinds() == ["escrow.held"]


# -- what is refused -------------------------------------------------------------------------
def test_a_made_up_evidence_digest_is_refused_and_nothing_is_written(home: Home) -> None:
    """The old hole: any 64 hex digits passed as evidence.  Now every digest must resolve to a
    stored blob (or to the content of a confirmation in the file); the refusal names it and
    leaves the ledger byte for byte as it was."""
    made_up = hashlib.sha256(b"nothing was ever stored under this").hexdigest()
    confirmation = home.sign(NO_RECURRENCE)
    late = late_file(home, [confirmation], value="1", evidence=[made_up])
    size, data = home.size(), home.db.read_bytes()
    proc = home.settle(late)
    one_line_error(proc, 3, made_up)
    assert home.size() == size
    assert home.db.read_bytes() == data
    assert home.escrow_kinds() == ["escrow.held"]


def test_a_made_up_digest_next_to_a_genuine_one_is_refused_too(home: Home) -> None:
    made_up = "ab" * 32
    confirmation = home.sign(NO_RECURRENCE)
    late = late_file(home, [confirmation], value="1",
                     evidence=[digest_of(NO_RECURRENCE), made_up])
    size = home.size()
    one_line_error(home.settle(late), 3, made_up)
    assert home.size() == size


@pytest.mark.parametrize("case", ["bad_signature", "another_sources_key", "unsigned",
                                  "tampered_content"])
def test_a_confirmation_that_does_not_authenticate_settles_nothing(home: Home, case: str) -> None:
    """8.15, 11.21: the register records it (quarantined) and the escrow does not move."""
    if case == "bad_signature":
        confirmation = home.sign(NO_RECURRENCE)
        confirmation["signature"] = home.sign(RECURRENCE)["signature"]
    elif case == "another_sources_key":
        confirmation = home.sign(NO_RECURRENCE, key=home.root / "other.key")
    elif case == "unsigned":
        confirmation = {**home.sign(NO_RECURRENCE), "signature": None}
    else:
        confirmation = {**home.sign(NO_RECURRENCE), "content": {**NO_RECURRENCE,
                                                                "observation_days": 15}}
    content = confirmation["content"]
    proc = home.settle(late_file(home, [confirmation], value="1", evidence=[digest_of(content)]))
    one_line_error(proc, 3, "provenance register")
    assert home.escrow_kinds() == ["escrow.held"]
    received = [e for e in home.events() if e.kind == "confirmation.received"]
    assert received[-1].data["decision"]["status"] == "quarantined"


def test_a_confirmation_from_a_source_not_registered_settles_nothing(
    tmp_path: Path, triz_eval: Callable[..., CliResult],
) -> None:
    home = make_home(tmp_path, register_tracker=False, cli=triz_eval)
    confirmation = home.sign(NO_RECURRENCE)
    proc = home.settle(late_file(home, [confirmation], value="1",
                                 evidence=[digest_of(NO_RECURRENCE)]))
    line = one_line_error(proc, 3, "provenance register")
    assert "unknown_source" in line
    assert home.escrow_kinds() == ["escrow.held"]


def test_a_confirmation_from_another_source_than_the_declared_one_settles_nothing(
    home: Home,
) -> None:
    confirmation = home.sign(NO_RECURRENCE, source="perf_monitor")
    late = home.write("late.json", {
        "values": {"recurrence_free": {"value": "1", "source": "perf_monitor",
                                       "evidence": [digest_of(NO_RECURRENCE)]}},
        "confirmations": [confirmation]})
    one_line_error(home.settle(late), 3, "issue_tracker")
    assert home.escrow_kinds() == ["escrow.held"]


@pytest.mark.parametrize("document", [
    {"recurrence_free": {"value": "1", "source": TRACKER, "evidence": ["ab" * 32]}},
    {"values": {"recurrence_free": {"value": "1", "source": TRACKER,
                                    "evidence": ["ab" * 32]}}},
    {"values": {}, "confirmations": [], "extra": 1},
    {"values": {"recurrence_free": {"value": []}}, "confirmations": [{}]},
], ids=["old_shape_without_confirmation", "no_confirmations", "unknown_key", "malformed"])
def test_a_late_file_without_a_signed_confirmation_is_bad_input(home: Home,
                                                                document: Any) -> None:
    size, data = home.size(), home.db.read_bytes()
    one_line_error(home.settle(home.write("late.json", document)), 2)
    assert home.size() == size
    assert home.db.read_bytes() == data


def test_a_confirmation_for_another_attempt_is_bad_input(home: Home) -> None:
    confirmation = home.sign(NO_RECURRENCE, attempt="some-other-attempt")
    size = home.size()
    proc = home.settle(late_file(home, [confirmation], value="1",
                                 evidence=[digest_of(NO_RECURRENCE)]))
    one_line_error(proc, 2, "some-other-attempt")
    assert home.size() == size


# -- the trusted source's side ---------------------------------------------------------------
@pytest.mark.slow  # the installed script in subprocesses
def test_sign_confirmation_is_documented_and_verifies(home: Home) -> None:
    helped = run("escrow", "sign-confirmation", "--help")
    assert helped.returncode == 0
    for option in ("--key", "--source", "--attempt", "--content", "--issued-at", "--out"):
        assert option in helped.stdout
    confirmation = home.sign(RECURRENCE)
    assert set(confirmation) == {"source", "attempt", "content", "issued_at", "signature"}
    assert confirmation["content"] == RECURRENCE
    settle_help = run("escrow", "settle", "--help")
    assert "confirmations" in settle_help.stdout


def test_sign_confirmation_with_a_bad_key_file_is_bad_input(home: Home) -> None:
    bad = home.write("bad.key", "not a key")
    content = home.write("c.json", NO_RECURRENCE)
    proc = home.cli("escrow", "sign-confirmation", "--key", bad, "--source", TRACKER,
                    "--attempt", ATTEMPT, "--content", content)
    one_line_error(proc, 2, "bad.key")
