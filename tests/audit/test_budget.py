"""The budget file and the class minimum (spec 9.13, 11.23; pilot 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.audit.budget import (
    Budget,
    load_budget,
    minimum_for,
    shortfall,
)
from triz_ri_smart_ai_evaluator.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audit" / "pilot_02_minimum.yaml"
GOOD = """\
name: small
task_class: pilot_02_feedback_form
attempts: {scenarios: 100, input_mutations: 2, test_loop: 1, injection_and_secrets: 1}
wall_clock_seconds: 600
organisational: one developer, one afternoon
success_criterion: no adversary reaches the honest signal
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "budget.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_example_budget_is_pilot_11_minimum_and_meets_it() -> None:
    budget = load_budget(EXAMPLE)
    assert budget.attempts.as_dict() == {"scenarios": 150, "input_mutations": 50,
                                         "test_loop": 30, "injection_and_secrets": 20}
    assert shortfall(budget, minimum_for("pilot_02_feedback_form")) == []


def test_pilot_02_minimum_is_the_pilot_11_numbers() -> None:
    minimum = minimum_for("pilot_02_feedback_form")
    assert minimum.attempts.as_dict() == {"scenarios": 150, "input_mutations": 50,
                                          "test_loop": 30, "injection_and_secrets": 20}
    assert "pilot 11" in minimum.source


def test_budget_below_minimum_names_each_short_category(tmp_path: Path) -> None:
    budget = load_budget(_write(tmp_path, GOOD))
    short = shortfall(budget, minimum_for("pilot_02_feedback_form"))
    assert [s.split()[0] for s in short] == ["scenarios", "input_mutations", "test_loop",
                                             "injection_and_secrets"]
    assert short[1].startswith("input_mutations 2 < 50")


@pytest.mark.parametrize(("change", "message"), [
    (("test_loop: 1", "test_loop: -1"), "attempts.test_loop: Input should be greater than or "
                                        "equal to 0"),
    (("test_loop: 1", "test_loop: '1'"), "attempts.test_loop: Input should be a valid integer"),
    (("wall_clock_seconds: 600", "wall_clock_seconds: 0"), "wall_clock_seconds: Input should "
                                                           "be greater than or equal to 1"),
    (("success_criterion: no adversary reaches the honest signal\n", ""),
     "success_criterion: Field required"),
    (("organisational: one developer, one afternoon", "organisational: '  '"),
     "organisational: String should have at least 1 character"),
    (("name: small", "name: small\nbonus: 1"), "bonus: unknown field"),
    (("injection_and_secrets: 1}", "injection_and_secrets: 1, manual: 3}"),
     "attempts.manual: unknown field"),
    (("name: small", "name: ../x"), "name: String should match pattern"),
])
def test_bad_budget_is_one_line_naming_the_field(tmp_path: Path, change: tuple[str, str],
                                                  message: str) -> None:
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(InputError) as caught:
        load_budget(path)
    text = caught.value.diagnostics()
    assert "\n" not in text
    assert text.startswith(f"{path}: {message}")


def test_missing_budget_file_and_duplicate_key_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such budget file"):
        load_budget(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="duplicate"):
        load_budget(_write(tmp_path, GOOD + "name: again\n"))


def test_class_without_minimum_is_refused() -> None:
    with pytest.raises(InputError, match="declares no red-team minimum"):
        minimum_for("document_step_faithfulness")


def test_describe_names_the_budget_and_every_count(tmp_path: Path) -> None:
    budget: Budget = load_budget(_write(tmp_path, GOOD))
    assert budget.describe() == (
        "small (100 automated scenarios, 2 input mutations, 1 attempts to change the test "
        "loop, 1 attacks on prompt injection and secrets; at most 600 s of wall clock)")
