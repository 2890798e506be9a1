"""Acceptance test of spec 11.21 (provenance), through the real CLI.

"A model output repeated through other sources is not accepted as independent confirmation.
Anomalous and unauthenticated feedback is placed in quarantine."  A delayed-confirmation
attempt waits in escrow; the policy's own outputs are fingerprinted in the provenance register
(spec 8.14).  Each late report is signed (or not) on the trusted source's side with
``triz-eval escrow sign-confirmation`` and submitted with ``triz-eval escrow settle --late``,
which puts it through the same register as the service.  The ledger set-up is that of
tests/ledger/test_escrow_cli_provenance.py; the honest report is the control that shows the
path can accept at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.ledger.test_escrow_cli_provenance import (
    ATTEMPT,
    CLAIM,
    NO_RECURRENCE,
    TRACKER,
    Home,
    digest_of,
    late_file,
    make_home,
)
from triz_ri_smart_ai_evaluator.canonical import canonical_json

Run = Callable[..., CliResult]
#: The policy's favourable claim, relayed by the tracker as its report: upper-cased, with a
#: zero-width space inside a word and the sentences reordered (free changes for a copier).
_SENTENCES = CLAIM.split(": ")
ECHOED = (_SENTENCES[1] + ": " + _SENTENCES[0]).upper().replace("POOL", "PO\u200bOL")


def _decision(home: Home) -> dict[str, Any]:
    received = [e for e in home.events() if e.kind == "confirmation.received"]
    assert received, "the register recorded nothing"
    decision = received[-1].data["decision"]
    assert isinstance(decision, dict)
    return decision


def _refused_and_unsettled(home: Home, proc: CliResult, size: int) -> None:
    """The settlement is refused in one line (exit 3), the escrow did not move, and only the
    register's record of the confirmation was written."""
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "provenance register" in lines[0]
    assert home.escrow_kinds() == ["escrow.held"]
    assert home.size() > size


def test_11_21_the_honest_signed_report_is_accepted(tmp_path: Path, triz_eval: Run) -> None:
    """The control: the same path accepts an independent, authenticated report."""
    home = make_home(tmp_path, cli=triz_eval)
    proc = home.settle(late_file(home, [home.sign(NO_RECURRENCE)], value="1",
                                 evidence=[digest_of(NO_RECURRENCE)]))
    assert proc.returncode == 0, proc.stderr
    assert _decision(home)["status"] == "accepted"
    assert home.escrow_kinds() == ["escrow.held", "escrow.released"]


@pytest.mark.parametrize("outputs", [
    pytest.param((canonical_json(NO_RECURRENCE).decode(),), id="report-written-first-by-policy"),
    pytest.param((CLAIM,), id="policy-claim-repeated-in-report"),
])
def test_11_21_a_model_output_repeated_through_a_source_is_not_independent(
        tmp_path: Path, triz_eval: Run, outputs: tuple[str, ...]) -> None:
    """spec 8.14, 11.21: the tracker is registered, the report is correctly signed, and still
    it repeats what the policy wrote - an echo, quarantined, never counted."""
    home = make_home(tmp_path, policy_outputs=outputs, cli=triz_eval)
    report = NO_RECURRENCE if outputs[0] != CLAIM else ECHOED
    size = home.size()
    proc = home.settle(late_file(home, [home.sign(report)], value="1",
                                 evidence=[digest_of(report)]))
    _refused_and_unsettled(home, proc, size)
    decision = _decision(home)
    assert decision["status"] == "quarantined"
    assert "echo" in decision["reasons"]


@pytest.mark.parametrize(("case", "reason"), [
    ("unsigned", "unsigned"),
    ("another_key", "bad_signature"),
    ("tampered", "bad_signature"),
    ("issued_in_the_future", "anomalous_time"),
    ("unregistered_source", "unknown_source"),
])
def test_11_21_unauthenticated_or_anomalous_feedback_is_quarantined(
        tmp_path: Path, triz_eval: Run, case: str, reason: str) -> None:
    home = make_home(tmp_path, register_tracker=case != "unregistered_source", cli=triz_eval)
    if case == "issued_in_the_future":
        content = home.write("content.json", NO_RECURRENCE)
        out = tmp_path / "future.json"
        future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
        signed = triz_eval("escrow", "sign-confirmation", "--key", home.tracker_key,
                           "--source", TRACKER, "--attempt", ATTEMPT, "--content", content,
                           "--issued-at", future, "--out", out)
        assert signed.returncode == 0, signed.stderr
        confirmation = json.loads(out.read_text("utf-8"))
    elif case == "another_key":
        confirmation = home.sign(NO_RECURRENCE, key=tmp_path / "other.key")
    else:
        confirmation = home.sign(NO_RECURRENCE)
        if case == "unsigned":
            confirmation["signature"] = None
        elif case == "tampered":
            confirmation["content"] = {**NO_RECURRENCE, "observation_days": 30}
    size = home.size()
    proc = home.settle(late_file(home, [confirmation], value="1",
                                 evidence=[digest_of(confirmation["content"])]))
    _refused_and_unsettled(home, proc, size)
    decision = _decision(home)
    assert decision["status"] == "quarantined"
    assert reason in decision["reasons"]
    assert reason in proc.stderr
