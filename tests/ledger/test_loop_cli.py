"""``triz-eval loop``: the owner's mode decisions through the command line, run in process
(issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._attempt_cli import PILOT, Home


@pytest.fixture
def home(tmp_path: Path) -> Home:
    h = Home(tmp_path)
    h.run("ledger", "init")
    return h


def test_a_fresh_class_has_no_loop_decision(home: Home) -> None:
    doc = json.loads(home.run("loop", "status", "-t", PILOT, "--json").stdout)
    assert doc["mode"] == "training"
    assert doc["cause"] is None


def test_the_owner_limits_a_class_and_the_ledger_keeps_why(home: Home) -> None:
    proc = home.run("loop", "mode", "-t", PILOT, "--mode", "limited", "--reason",
                    "pilot 10: limited training", "--max-included", "5", "--per-seconds", "60")
    assert "limited" in proc.stdout
    doc = json.loads(home.run("loop", "status", "-t", PILOT, "--json").stdout)
    assert (doc["mode"], doc["cause"], doc["max_included"], doc["per_seconds"]) == (
        "limited", "owner", 5, 60)
    assert doc["reason"] == "pilot 10: limited training"
    [event] = [e for e in home.events(f"loop/{PILOT}") if e["kind"] == "class.mode_changed"]
    assert event["actor"] == "owner"
    assert event["data"]["previous"] == "training"
    home.run("ledger", "verify")


@pytest.mark.parametrize(("args", "message"), [
    (["--mode", "paused", "--reason", "x"], "not one of"),
    (["--mode", "shadow", "--reason", "x", "--max-included", "3", "--per-seconds", "9"],
     "limited mode"),
])
def test_a_bad_mode_change_exits_2_in_one_line_and_writes_nothing(
        home: Home, args: list[str], message: str) -> None:
    proc = home.run("loop", "mode", "-t", PILOT, *args, ok=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert home.events(f"loop/{PILOT}") == []


def test_an_unknown_class_is_refused(home: Home) -> None:
    proc = home.run("loop", "status", "-t", "no_such_class", ok=False)
    assert proc.returncode == 2
    assert "no_such_class" in proc.stderr


def _to_shadow(home: Home) -> None:
    home.run("loop", "mode", "-t", PILOT, "--mode", "shadow", "--reason", "pilot 10: shadow")


def test_a_step_up_without_a_passing_campaign_is_refused_and_writes_nothing(home: Home) -> None:
    """spec 12.17, 9.12, 11.23 (docs/procedures.md): shadow -> limited needs a passing red-team
    report for the rules and harness versions in force; without one the step is refused."""
    _to_shadow(home)
    before = home.events(f"loop/{PILOT}")
    proc = home.run("loop", "mode", "-t", PILOT, "--mode", "limited", "--reason", "go",
                    ok=False)
    assert proc.returncode == 2
    assert "no passing audit.report" in proc.stderr
    assert "--override" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert home.events(f"loop/{PILOT}") == before
    assert json.loads(home.run("loop", "status", "-t", PILOT, "--json").stdout)["mode"] == (
        "shadow")


def test_the_owner_may_override_the_gates_and_the_ledger_says_so(home: Home) -> None:
    """spec 9.19: the owner stays in control; an override is recorded with what was unmet."""
    _to_shadow(home)
    home.run("loop", "mode", "-t", PILOT, "--mode", "limited", "--reason", "go",
             "--override", "campaign runs tonight")
    doc = json.loads(home.run("loop", "status", "-t", PILOT, "--json").stdout)
    assert doc["mode"] == "limited"
    assert "gates overridden by the owner: campaign runs tonight" in doc["reason"]
    assert "no passing audit.report" in doc["reason"]


def test_a_step_down_is_never_gated(home: Home) -> None:
    """spec 9.19: restricting or stopping a class never waits for a gate."""
    _to_shadow(home)
    for mode in ("suspended", "shut_down"):
        home.run("loop", "mode", "-t", PILOT, "--mode", mode, "--reason", "stop")
    assert json.loads(home.run("loop", "status", "-t", PILOT, "--json").stdout)["mode"] == (
        "shut_down")
