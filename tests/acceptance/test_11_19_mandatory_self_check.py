"""Acceptance test of spec 11.19 (mandatory self-checking), through the real CLI.

"A solution that omitted a mandatory check does not gain a cost advantage over a solution that
complied with the standard."  Spec 9.18 and 3.7: costs are compared only after every mandatory
quality requirement is met, so an omitted self-check makes the attempt inadmissible (S = 0, its
cost not comparable) however cheap it was.  The inputs are the bundled pilot 02 example
(``examples/signal/pilot_02_honest.json``) varied in the test's folder; the ledger path runs
``attempt evaluate`` with the example's evidence on a real signed SQLite ledger.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "signal" / "pilot_02_honest.json"
EVIDENCE = REPO / "examples" / "signal" / "evidence" / "pilot_02_honest"
PILOT = "pilot_02_feedback_form"
SELF_CHECKS = [c.id for c in load_catalogue()[PILOT].self_checks]
CHEAP, DEAR = "0.5", "900"  # sandbox seconds: the omitter is far cheaper than the complier

Run = Callable[..., CliResult]


def _variant(tmp_path: Path, name: str, *, cost: str, omit: str | None = None,
             drop: bool = False) -> Path:
    """The honest example with ``omit`` not performed (or its entry dropped) and ``cost``."""
    doc = json.loads(EXAMPLE.read_text("utf-8"))
    doc["costs"]["sandbox_seconds"] = cost
    if omit is not None:
        if drop:
            del doc["self_checks"][omit]
        else:
            doc["self_checks"][omit]["performed"] = False
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc), "utf-8")
    return path


def _compute(triz_eval: Run, path: Path) -> dict[str, Any]:
    result = triz_eval("signal", "compute", "-t", PILOT, "-i", path, "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert isinstance(answer, dict)
    return answer


def test_the_class_declares_mandatory_self_checks() -> None:
    assert len(SELF_CHECKS) == 8  # pilot 9 asks for eight


@pytest.mark.parametrize("drop", [False, True], ids=["performed-false", "entry-missing"])
@pytest.mark.parametrize("check", SELF_CHECKS)
def test_11_19_an_omitted_self_check_gains_no_cost_advantage(
        triz_eval: Run, tmp_path: Path, check: str, drop: bool) -> None:
    skipped = _compute(triz_eval, _variant(tmp_path, "skipped", cost=CHEAP, omit=check,
                                           drop=drop))
    complied = _compute(triz_eval, _variant(tmp_path, "complied", cost=DEAR))
    assert complied["outcome"] == "obtained"
    assert complied["cost"] == {"id": "sandbox_seconds", "value": DEAR, "comparable": True}
    assert skipped["outcome"] == "quality_violation"
    assert f"mandatory self-check omitted: {check}" in skipped["reasons"]
    # Its cheaper cost is not even compared (spec 3.7), and it earns nothing.
    assert skipped["cost"] == {"id": "sandbox_seconds", "value": None, "comparable": False}
    assert skipped["signal"]["value"] == "0"
    assert float(skipped["signal"]["value"]) < float(complied["signal"]["value"])


def test_11_19_the_omitter_pays_nothing_in_the_ledger_either(
        triz_eval: Run, tmp_path: Path) -> None:
    """The trusted path: ``attempt evaluate`` records both awards; the omitter's is S = 0 and
    not used for training, and ``ledger recompute`` agrees."""
    env = {**os.environ, "TRIZ_EVAL_DB": str(tmp_path / "ledger.db"),
           "TRIZ_EVAL_KEYS": str(tmp_path / "keys"), "COLUMNS": "300"}
    assert triz_eval("ledger", "init", env=env, cwd=tmp_path).returncode == 0
    answers = {}
    for name, path in (("skipped", _variant(tmp_path, "skipped", cost=CHEAP,
                                            omit="checks_smtp_unavailable")),
                       ("complied", _variant(tmp_path, "complied", cost=DEAR))):
        result = triz_eval("attempt", "evaluate", "-t", PILOT, "-i", path, "--attempt-id", name,
                           "--evidence-dir", EVIDENCE, "--json", env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        answers[name] = json.loads(result.stdout)
    assert answers["complied"]["evidence"] == "resolved"
    assert answers["complied"]["signal"]["value"] == "2"
    assert answers["skipped"]["outcome"] == "quality_violation"
    assert answers["skipped"]["signal"]["value"] == "0"
    assert answers["skipped"]["cost"]["comparable"] is False
    assert triz_eval("ledger", "recompute", env=env, cwd=tmp_path).returncode == 0
