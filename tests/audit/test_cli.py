"""``triz-eval audit`` refusals: bad input is one line, exit 2, and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import CliResult

BUDGET = """\
name: small
task_class: pilot_02_feedback_form
attempts: {scenarios: 0, input_mutations: 1, test_loop: 0, injection_and_secrets: 0}
wall_clock_seconds: 600
organisational: the test suite
success_criterion: nothing reaches the honest signal
"""


@pytest.mark.parametrize(("budget", "extra", "message"), [
    (BUDGET.replace("wall_clock_seconds: 600", "wall_clock_seconds: -5"), [],
     "wall_clock_seconds: Input should be greater than or equal to 1"),
    (BUDGET.replace("pilot_02_feedback_form", "defect_fix_delayed_confirmation"), [],
     "is for defect_fix_delayed_confirmation, not pilot_02_feedback_form"),
    (BUDGET, ["--seed", "xyz"], "--seed 'xyz' is not hexadecimal"),
    (BUDGET, ["--seed", "00"], "--seed is 8 to 64 bytes"),
    (BUDGET, ["--workers", "0"], "--workers is 1 to 16"),
    (BUDGET, ["--candidates", "no-such-folder"], "not a folder of candidates"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
        triz_eval: Callable[..., CliResult], tmp_path: Path, budget: str, extra: list[str],
        message: str) -> None:
    (tmp_path / "budget.yaml").write_text(budget, encoding="utf-8")
    result = triz_eval("audit", "run", "--class", "pilot_02_feedback_form", "--budget",
                       tmp_path / "budget.yaml", "--db", tmp_path / "db" / "ledger.db",
                       "--keys", tmp_path / "keys", "--out", tmp_path / "out", *extra,
                       cwd=tmp_path)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert not (tmp_path / "db").exists()
    assert not (tmp_path / "out").exists()


def test_unknown_class_is_refused(triz_eval: Callable[..., CliResult], tmp_path: Path) -> None:
    (tmp_path / "budget.yaml").write_text(BUDGET, encoding="utf-8")
    result = triz_eval("audit", "run", "--class", "no_such_class", "--budget",
                       tmp_path / "budget.yaml", "--db", tmp_path / "ledger.db", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown task class 'no_such_class'" in result.stderr
    assert not (tmp_path / "ledger.db").exists()
