"""Acceptance test of spec 11.24 (residual-risk log), through the real CLI.

"The system reports known limitations, uncovered classes of attacks, compromised sets,
dependence on human verification and the conditions under which results cannot be considered
finally verified.  The log includes a record of the design boundary ..."  The log is catalogue
data (``catalogue/risks/residual_risk.yaml``); ``triz-eval catalogue risks`` prints it, and the
reports of the harness runs (pilot 02's ``report.html``, defect_fix's ``report.md``) and
``triz-eval signal explain`` show it.  The two harness runs are real sandboxed runs of the
installed script (about 7 s and 17 s on the development machine).
"""

from __future__ import annotations

import ast
import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "triz_ri_smart_ai_evaluator"
TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
FIELDS = {"id", "title", "kind", "boundary", "owner", "detected_by", "applies_to", "source"}
KINDS = {"known limitation", "uncovered attack class", "compromised set",
         "human verification dependency", "not finally verified", "design boundary"}

Run = Callable[..., CliResult]


def _log(triz_eval: Run) -> list[dict[str, Any]]:
    result = triz_eval("catalogue", "risks", "--json")
    assert result.returncode == 0, result.stderr
    entries = json.loads(result.stdout)
    assert isinstance(entries, list)
    return entries


def _run(tmp_path: Path, *args: str | Path) -> dict[str, Any]:
    """The installed script, as a user meets it; its JSON answer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    proc = subprocess.run([str(TRIZ_EVAL), *map(str, args), "--db", tmp_path / "ledger.db",
                           "--keys", tmp_path / "keys", "--out", tmp_path / "runs", "--json"],
                          capture_output=True, text=True, timeout=300, env=env, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert isinstance(answer, dict)
    return answer


def _applying(entries: list[dict[str, Any]], task_class: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["applies_to"] == ["all"] or task_class in e["applies_to"]]


def test_11_24_the_log_reports_every_kind_with_every_field(triz_eval: Run) -> None:
    entries = _log(triz_eval)
    assert {e["kind"] for e in entries} == KINDS
    classes = set(load_catalogue())
    for entry in entries:
        assert set(entry) == FIELDS
        assert all(str(entry[f]).strip() for f in FIELDS - {"applies_to"}), entry["id"]
        assert entry["applies_to"] == ["all"] or set(entry["applies_to"]) <= classes


def test_11_24_every_test_that_would_detect_a_crossing_exists(triz_eval: Run) -> None:
    for entry in _log(triz_eval):
        file, name = entry["detected_by"].split("::")
        path = REPO / file
        assert path.is_file(), f"{entry['id']}: {file} is missing"
        defined = {n.name for n in ast.walk(ast.parse(path.read_text("utf-8")))
                   if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{entry['id']}: {file} defines no {name}"


def test_11_24_the_design_boundary_record(triz_eval: Run) -> None:
    [record] = [e for e in _log(triz_eval) if e["kind"] == "design boundary"]
    title = " ".join(record["title"].split())
    assert title.startswith("Matters of taste that have not been reduced to a verifiable "
                            "checklist are excluded from the variable signal;")
    assert title.endswith("the risk of systematic impoverishment of style and diversity is not "
                          "measured by this system and requires separate control outside the "
                          "reward loop.")
    assert record["applies_to"] == ["all"]


def test_11_24_the_known_limits_of_this_code_base_are_in_the_log(triz_eval: Run) -> None:
    text = " ".join(e["title"] for e in _log(triz_eval))
    for phrase in ("--unsafe-degraded", "no recorded calibration", "Article 15 et seq.",
                   "same Python process", "false alarm", "within budget X"):
        assert phrase in text, phrase


def test_11_24_catalogue_risks_prints_one_line_per_entry(triz_eval: Run) -> None:
    entries = _log(triz_eval)
    result = triz_eval("catalogue", "risks")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"Residual-risk log (spec 11.24): {len(entries)} entries"
    assert len(lines) == 1 + len(entries)
    for line, entry in zip(lines[1:], entries, strict=True):
        assert line.startswith(f"- [{entry['kind']}] {entry['id']}: ")
        assert entry["detected_by"] in line


def test_11_24_signal_explain_points_to_the_log(triz_eval: Run) -> None:
    entries = _log(triz_eval)
    result = triz_eval("signal", "explain", "-t", "pilot_02_feedback_form", "-i",
                       REPO / "examples" / "signal" / "pilot_02_honest.json")
    assert result.returncode == 0, result.stderr
    n = len(_applying(entries, "pilot_02_feedback_form"))
    assert (f"Residual risks (spec 11.24): {n} of the {len(entries)} known limits of this "
            "evaluator apply to pilot_02_feedback_form; see `triz-eval catalogue risks`."
            ) in result.stdout


def test_11_24_the_defect_fix_report_shows_the_log(triz_eval: Run, tmp_path: Path) -> None:
    entries = _applying(_log(triz_eval), "defect_fix_delayed_confirmation")
    answer = _run(tmp_path, "attempt", "run", "--task-class", "defect_fix_delayed_confirmation",
                  "--candidate", PACKAGE / "defect_fix" / "candidates" / "honest" /
                  "candidate.diff")
    report = (tmp_path / "runs" / answer["attempt_id"] / "report.md").read_text("utf-8")
    assert "## Residual risks (spec 11.24)" in report
    listed = re.findall(r"^- \[[a-z ]+\] ([a-z0-9-]+): ", report, flags=re.MULTILINE)
    assert listed == [e["id"] for e in entries]


def test_11_24_the_pilot_02_report_shows_the_log(triz_eval: Run, tmp_path: Path) -> None:
    entries = _applying(_log(triz_eval), "pilot_02_feedback_form")
    answer = _run(tmp_path, "pilot", "feedback-form", "run", "--candidate",
                  PACKAGE / "pilot_02_feedback_form" / "candidates" / "reference" /
                  "candidate.diff")
    page = (tmp_path / "runs" / answer["attempt_id"] / "report.html").read_text("utf-8")
    section = page[page.index("<h2>Residual risks (spec 11.24)</h2>"):]
    assert section.rstrip().endswith("</table></body></html>")
    listed = re.findall(r"<tr><td><code>([a-z0-9-]+)</code></td>", section)
    assert listed == [e["id"] for e in entries]
    shown = html.unescape(section)
    for entry in entries:
        assert entry["boundary"] in shown
        assert entry["title"] in shown
