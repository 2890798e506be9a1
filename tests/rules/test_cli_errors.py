"""``triz-eval`` on bad input: exit 2, located one-line errors, no traceback.

The refusals run in process through the console script's entry function (``cli.main``, the one
place that turns evaluator errors into lines), with the ``triz_eval`` fixture; the passing
commands, the version and one refusal run the installed script in a subprocess, exactly as a
user meets it.  Spec sections: 2.6 (no benchmark in force), 3.3/11.9 (no field for process
characteristics), 11.12 (no value for an undeclared indicator), 1.14 (evidence digests).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.rules.loader import BUNDLED_CATALOGUE

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
REPO = Path(__file__).resolve().parents[2]
HONEST = REPO / "examples" / "signal" / "pilot_02_honest.json"
PILOT = "pilot_02_feedback_form"
Run = Callable[..., CliResult]
IN_FORCE = "2026-12-04T00:00:00Z"  # after every bundled benchmark's first version


def run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The installed script in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    return subprocess.run(
        [str(TRIZ_EVAL), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def no_traceback(proc: subprocess.CompletedProcess[str] | CliResult) -> None:
    assert "Traceback" not in proc.stdout
    assert "Traceback" not in proc.stderr


def line_of(text: str, needle: str) -> int:
    hits = [n for n, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(hits) == 1, hits
    return hits[0]


def one_error_line(proc: subprocess.CompletedProcess[str] | CliResult) -> str:
    """The single stderr line of a failed command, checked for the common form."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("triz-eval: error: "), lines[0]
    return lines[0]


def test_console_script_is_installed() -> None:
    assert TRIZ_EVAL.is_file(), TRIZ_EVAL


# -- catalogue validate ------------------------------------------------------------------------

PROBLEM_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<field>[^ :]+): (?P<message>.+)$")


def _problems(stderr: str) -> list[re.Match[str]]:
    """Every ``FILE:LINE: FIELD: message`` line of stderr; the only other line is the summary."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no diagnostics on stderr"
    *problem_lines, summary = lines
    assert re.fullmatch(r"\d+ file\(s\) checked: \d+ problem\(s\)", summary), summary
    matches = [PROBLEM_LINE.match(line) for line in problem_lines]
    assert all(matches), problem_lines
    return [m for m in matches if m is not None]


def test_validate_malformed_yaml_exits_2_with_located_line(
    pilot_text: str, tmp_path: Path, triz_eval: Run
) -> None:
    text = pilot_text.replace("  model: gate\n", "\tmodel: gate\n", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    proc = triz_eval("catalogue", "validate", bad)
    no_traceback(proc)
    assert proc.returncode == 2
    (problem,) = _problems(proc.stderr)
    assert problem["file"] == str(bad)
    assert int(problem["line"]) == line_of(text, "\tmodel: gate")
    assert problem["field"] == "(yaml)"


def test_validate_reports_every_problem_as_file_line_field_message(
    pilot_text: str, tmp_path: Path, triz_eval: Run
) -> None:
    """Spec 5.6 (weights), 11.3 (team coefficient) and 6.3 (vague item) in one file."""
    text = pilot_text.replace(
        "  reported_only: [status_correctness, recovery]\n",
        "  reported_only: [status_correctness, recovery]\n  weights: {delivery: 2}\n",
    )
    text = text.replace("  base_unit: 1\n", "  base_unit: 1\n  team_coefficient: 1.2\n")
    text = text.replace(
        "    requirement: Tests and expected answers are not changed (pilot 7)\n",
        "    requirement: The response is professional\n",
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    proc = triz_eval("catalogue", "validate", bad)
    no_traceback(proc)
    assert proc.returncode == 2
    got = {(m["file"], int(m["line"]), m["field"]) for m in _problems(proc.stderr)}
    assert got == {
        (str(bad), line_of(text, "weights: {delivery: 2}"), "combination.weights"),
        (str(bad), line_of(text, "team_coefficient: 1.2"), "formula.team_coefficient"),
        (str(bad), line_of(text, "The response is professional"), "checklist[1].requirement"),
    }
    assert "spec 6.3" in proc.stderr


def test_validate_folder_with_one_bad_file_exits_2(
    pilot_text: str, delayed_text: str, tmp_path: Path, triz_eval: Run
) -> None:
    (tmp_path / "good.yaml").write_text(pilot_text, encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(delayed_text.replace("  escrow_share: 0.5\n", ""), encoding="utf-8")
    proc = triz_eval("catalogue", "validate", tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2
    (problem,) = _problems(proc.stderr)
    assert (problem["file"], problem["field"]) == (str(bad), "confirmation")
    assert "spec 2.15" in problem["message"]


def test_validate_empty_file_exits_2(tmp_path: Path, triz_eval: Run) -> None:
    bad = tmp_path / "empty.yaml"
    bad.write_text("", encoding="utf-8")
    proc = triz_eval("catalogue", "validate", bad)
    no_traceback(proc)
    assert proc.returncode == 2
    (problem,) = _problems(proc.stderr)
    assert (problem["file"], problem["line"], problem["field"]) == (str(bad), "1", "(root)")


def test_validate_missing_file_exits_2_naming_it(tmp_path: Path, triz_eval: Run) -> None:
    missing = tmp_path / "missing.yaml"
    proc = triz_eval("catalogue", "validate", missing)
    no_traceback(proc)
    assert proc.returncode == 2
    assert str(missing) in one_error_line(proc)


def test_validate_json_on_bad_file_is_json_listing_problems(
    pilot_text: str, tmp_path: Path, triz_eval: Run
) -> None:
    bad = tmp_path / "bad.yaml"
    text = pilot_text + "common_pool: 100\n"
    bad.write_text(text, encoding="utf-8")
    proc = triz_eval("catalogue", "validate", "--json", bad)
    no_traceback(proc)
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    assert report["valid"] is False
    (entry,) = report["files"]
    assert entry["file"] == str(bad)
    assert entry["valid"] is False
    assert entry["problems"] == [
        f"{bad}:{line_of(text, 'common_pool: 100')}: common_pool: "
        "unknown field (not part of the task-class schema)"
    ]


def test_validate_bundled_catalogue_exits_0() -> None:
    proc = run_script("catalogue", "validate")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "3 file(s) checked: valid" in proc.stdout


def test_validate_bundled_catalogue_json_parses() -> None:
    proc = run_script("catalogue", "validate", "--json", BUNDLED_CATALOGUE)
    no_traceback(proc)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["valid"] is True
    assert len(report["files"]) == 3
    assert all(re.fullmatch(r"[0-9a-f]{64}", f["rules_version"]) for f in report["files"])


def test_catalogue_list_json_parses() -> None:
    proc = run_script("catalogue", "list", "--json")
    no_traceback(proc)
    assert proc.returncode == 0
    assert {row["id"] for row in json.loads(proc.stdout)} == {
        "pilot_02_feedback_form",
        "document_step_faithfulness",
        "defect_fix_delayed_confirmation",
    }


# -- signal compute ----------------------------------------------------------------------------


def _honest() -> dict[str, object]:
    data = json.loads(HONEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_signal_compute_honest_example_json_parses() -> None:
    """Guard for the cases below: the unmodified example computes (exit 0, JSON)."""
    proc = run_script(
        "signal", "compute", "-t", PILOT, "-i", HONEST, "--started-at", IN_FORCE, "--json"
    )
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["signal"]["value"] == "2"


def test_signal_compute_malformed_json_exits_2_naming_file_and_line(
    tmp_path: Path, triz_eval: Run
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "measurements": {\n    "delivery": \n', encoding="utf-8")
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"{bad}:" in line
    assert "malformed JSON" in line


def test_signal_compute_process_characteristic_field_exits_2_spec_3_3_11_9(
    tmp_path: Path,
    triz_eval: Run,
) -> None:
    """Spec 3.3, 11.9: response length is no input of the signal, so it has no field."""
    data = _honest()
    data["response_length"] = 12000
    bad = _write(tmp_path, "length.json", data)
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert str(bad) in line
    assert "response_length" in line
    assert "unknown field" in line


def test_signal_compute_measurement_for_undeclared_indicator_exits_2_naming_file(
    tmp_path: Path,
    triz_eval: Run,
) -> None:
    """Spec 11.12: a value for an indicator the class does not declare cannot count.

    Currently FAILS (reported bug): the message names the task class but not the input file.
    """
    data = _honest()
    measurements = data["measurements"]
    assert isinstance(measurements, dict)
    measurements["confident_tone"] = {
        "value": "1",
        "source": "harness",
        "evidence": ["a" * 64],
    }
    bad = _write(tmp_path, "undeclared.json", data)
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "confident_tone" in line
    assert str(bad) in line


@pytest.mark.parametrize(
    "digest",
    ["a" * 63, "g" * 64, "551bec3530e262a85564befb4437b61f18383e87651", "not-a-digest"],
    ids=["63_hex", "non_hex", "truncated", "word"],
)
def test_signal_compute_bad_evidence_digest_exits_2_naming_file(
    digest: str, tmp_path: Path, triz_eval: Run
) -> None:
    data = _honest()
    measurements = data["measurements"]
    assert isinstance(measurements, dict)
    measurements["delivery"]["evidence"] = [digest]
    bad = _write(tmp_path, "digest.json", data)
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert str(bad) in line
    assert "measurements.delivery.evidence" in line


def test_signal_compute_missing_input_file_exits_2_naming_it(
    tmp_path: Path, triz_eval: Run
) -> None:
    missing = tmp_path / "nowhere.json"
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", missing, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    assert str(missing) in one_error_line(proc)


def test_signal_compute_started_at_without_timezone_exits_2(triz_eval: Run) -> None:
    proc = triz_eval(
        "signal", "compute", "-t", PILOT, "-i", HONEST, "--started-at", "2026-12-01T10:00"
    )
    no_traceback(proc)
    assert proc.returncode == 2
    assert "timezone" in one_error_line(proc)


def test_signal_compute_started_at_not_a_time_exits_2(triz_eval: Run) -> None:
    proc = triz_eval("signal", "compute", "-t", PILOT, "-i", HONEST, "--started-at", "yesterday")
    no_traceback(proc)
    assert proc.returncode == 2
    assert "yesterday" in one_error_line(proc)


def test_signal_compute_unknown_task_class_exits_2(triz_eval: Run) -> None:
    proc = triz_eval(
        "signal", "compute", "-t", "no_such_class", "-i", HONEST, "--started-at", IN_FORCE
    )
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "no_such_class" in line
    assert PILOT in line  # the known classes are listed


def test_signal_compute_before_any_benchmark_exits_2_citing_spec_2_6(triz_eval: Run) -> None:
    """Spec 2.6: the benchmark is established in advance; none was in force on 2026-01-01."""
    proc = triz_eval(
        "signal", "compute", "-t", PILOT, "-i", HONEST, "--started-at", "2026-01-01T00:00:00Z"
    )
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "spec 2.6" in line
    assert "2026-11-01" in line  # when the first benchmark takes effect


def test_signal_explain_on_bad_input_exits_2_without_traceback(
    tmp_path: Path, triz_eval: Run
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    proc = triz_eval("signal", "explain", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    assert str(bad) in one_error_line(proc)


# -- the installed script, in a subprocess -----------------------------------------------------


def test_the_installed_script_prints_its_version() -> None:
    proc = run_script("--version")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"triz-eval \S+\n", proc.stdout), proc.stdout


def test_the_installed_script_reports_a_bad_input_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "measurements": {\n    "delivery": \n', encoding="utf-8")
    proc = run_script("signal", "compute", "-t", PILOT, "-i", bad, "--started-at", IN_FORCE)
    no_traceback(proc)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"{bad}:" in line
    assert "malformed JSON" in line
