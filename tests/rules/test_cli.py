"""Happy paths of the ``triz-eval`` CLI, in process with typer's CliRunner.

Spec 3.2 (transparent breakdown: benchmark, verified value, formula, signal), 3.3/11.9 (the input
schema has no field for process characteristics), 4.1 (the rules version is fixed and visible),
5.5/7.2 (a critical violation gives 0), 10.1 (what is stored per attempt).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from triz_ri_smart_ai_evaluator.cli import app
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass
from triz_ri_smart_ai_evaluator.rules.versions import rules_version

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "signal"
PILOT = "pilot_02_feedback_form"
IN_FORCE = "2026-12-05T09:00:00Z"  # pilot 02 rules version 3 in force (ADR 0012)
HEX64 = re.compile(r"[0-9a-f]{64}")
BUNDLED_IDS = {
    "pilot_02_feedback_form",
    "document_step_faithfulness",
    "defect_fix_delayed_confirmation",
}

SIGNAL_KEYS = {
    "task_class",
    "rules_version",
    "functions",
    "model",
    "mode",
    "training_use",
    "formula",
    "base_unit",
    "outcome",
    "reasons",
    "critical_violation",
    "verified",
    "evidence",
    "indicators",
    "checks",
    "blocks",
    "quality_k",
    "perf_overall",
    "claims",
    "obstacles",
    "cost",
    "signal",
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def invoke(runner: CliRunner, *args: str | Path) -> Any:
    """Run the app; wide columns so rich tables do not wrap names; no catalogue override."""
    result = runner.invoke(
        app,
        [str(a) for a in args],
        env={"COLUMNS": "300", "TRIZ_EVAL_CATALOGUE": None},
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def compute_json(runner: CliRunner, example: str) -> dict[str, Any]:
    result = invoke(
        runner,
        "signal",
        "compute",
        "-t",
        PILOT,
        "-i",
        EXAMPLES / example,
        "--started-at",
        IN_FORCE,
        "--json",
    )
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


# -- catalogue --------------------------------------------------------------------------------


def test_catalogue_list_json_lists_the_three_bundled_classes_with_versions(
    runner: CliRunner,
) -> None:
    rows = json.loads(invoke(runner, "catalogue", "list", "--json").stdout)
    assert {row["id"] for row in rows} == BUNDLED_IDS
    assert len(rows) == 3
    classes = load_catalogue()
    for row in rows:
        assert HEX64.fullmatch(row["rules_version"])
        assert row["rules_version"] == rules_version(classes[row["id"]])
        assert row["model"] == classes[row["id"]].formula.model.value
        assert row["confirmation"] == classes[row["id"]].confirmation.kind


def test_catalogue_list_table_names_every_class(runner: CliRunner) -> None:
    output = invoke(runner, "catalogue", "list").stdout
    for class_id in BUNDLED_IDS:
        assert class_id in output


def test_catalogue_show_gives_json_with_the_rules_version(
    runner: CliRunner, pilot_class: TaskClass
) -> None:
    shown = json.loads(invoke(runner, "catalogue", "show", PILOT).stdout)
    assert shown["rules_version"] == rules_version(pilot_class)
    assert shown["task_class"] == pilot_class.model_dump(mode="json")
    assert TaskClass.model_validate(shown["task_class"]) == pilot_class


def test_catalogue_schema_describes_task_class_files(runner: CliRunner) -> None:
    schema = json.loads(invoke(runner, "catalogue", "schema").stdout)
    assert "indicators" in schema["properties"]
    assert {"benchmarks", "checklist", "self_checks", "combination", "formula"} <= set(
        schema["properties"]
    )
    assert "threat_model" in schema["required"]


def _property_names(node: Any) -> set[str]:
    """Every property name anywhere in a JSON Schema, including its $defs."""
    names: set[str] = set()
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            names |= set(props)
        for value in node.values():
            names |= _property_names(value)
    elif isinstance(node, list):
        for value in node:
            names |= _property_names(value)
    return names


def test_attempt_inputs_schema_has_no_process_characteristic_spec_3_3_11_9(
    runner: CliRunner,
) -> None:
    """Length, steps, tool calls and formatting cannot be fed to the signal: no such field."""
    schema = json.loads(invoke(runner, "catalogue", "schema", "--what", "attempt-inputs").stdout)
    names = _property_names(schema)
    assert {"measurements", "checklist", "self_checks", "claims"} <= set(schema["properties"])
    proxy = re.compile(r"length|steps?|tool_?calls?|format|tone|words|tokens|sections", re.I)
    assert sorted(n for n in names if proxy.search(n)) == []


# -- signal -----------------------------------------------------------------------------------


def test_signal_compute_honest_example_gives_2_obtained_with_documented_keys(
    runner: CliRunner, pilot_class: TaskClass
) -> None:
    out = compute_json(runner, "pilot_02_honest.json")
    assert set(out) == SIGNAL_KEYS
    assert {"value", "preliminary", "held", "payable_now", "final"} <= set(out["signal"])
    assert out["signal"]["value"] == "2"
    assert out["signal"]["final"] == "2"
    assert out["signal"]["preliminary"] is None  # immediate confirmation: nothing held
    assert out["outcome"] == "obtained"
    # issue 10: no store was consulted, and the output says so.
    assert out["evidence"] == "unchecked"
    assert out["critical_violation"] is False
    assert out["verified"] is True
    assert out["task_class"] == PILOT
    assert out["rules_version"] == rules_version(pilot_class)
    assert out["model"] == "gate"
    assert out["mode"] == "shadow"
    assert out["training_use"] is False  # shadow mode (pilot 10)
    assert out["base_unit"] == "1"
    assert out["claims"]["counted_as_evidence"] is False
    assert [i["id"] for i in out["indicators"]] == [i.id for i in pilot_class.indicators]
    assert all(i["status"] == "verified" for i in out["indicators"])


def test_signal_compute_false_success_gives_0_quality_violation(runner: CliRunner) -> None:
    """Spec 5.5, 7.2: a verified critical violation gives 0, whatever else was achieved."""
    out = compute_json(runner, "pilot_02_false_success.json")
    assert out["signal"]["value"] == "0"
    assert out["outcome"] == "quality_violation"
    assert out["critical_violation"] is True


def test_signal_compute_plain_output_prints_s_and_outcome(runner: CliRunner) -> None:
    result = invoke(
        runner,
        "signal",
        "compute",
        "-t",
        PILOT,
        "-i",
        EXAMPLES / "pilot_02_honest.json",
        "--started-at",
        IN_FORCE,
    )
    assert "S = 2" in result.stdout
    assert "outcome=obtained" in result.stdout


def test_signal_explain_prints_indicator_names_and_s(
    runner: CliRunner, pilot_class: TaskClass
) -> None:
    """Spec 3.2: the benchmark, verified value, formula and signal are visible."""
    output = invoke(
        runner,
        "signal",
        "explain",
        "-t",
        PILOT,
        "-i",
        EXAMPLES / "pilot_02_honest.json",
        "--started-at",
        IN_FORCE,
    ).stdout
    for indicator in pilot_class.indicators:
        assert indicator.name in output
    assert re.search(r"^\W*S\W+2\W*$", output, re.MULTILINE), output
    assert "formula:" in output


# -- help -------------------------------------------------------------------------------------

COMMANDS = [
    [],
    ["catalogue"],
    ["catalogue", "list"],
    ["catalogue", "show"],
    ["catalogue", "validate"],
    ["catalogue", "schema"],
    ["catalogue", "publish"],
    ["signal"],
    ["signal", "compute"],
    ["signal", "explain"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "triz-eval")
def test_help_of_every_command_exits_0(runner: CliRunner, command: list[str]) -> None:
    result = invoke(runner, *command, "--help")
    assert "Usage" in result.stdout
    assert "--help" in result.stdout


def test_version_option_prints_the_version(runner: CliRunner) -> None:
    from triz_ri_smart_ai_evaluator import __version__

    assert f"triz-eval {__version__}" in invoke(runner, "--version").stdout
