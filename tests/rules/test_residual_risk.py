"""The residual-risk log as catalogue data (spec 11.24, output 12.16; issue 15 item 6)."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError, RuleError
from triz_ri_smart_ai_evaluator.rules import residual_risk
from triz_ri_smart_ai_evaluator.rules.loader import load_catalogue

ROOT = Path(__file__).resolve().parents[2]

GOOD_ENTRY = """\
  - id: {id}
    title: A limit.
    kind: known limitation
    boundary: It stays inside.
    owner: someone
    detected_by: tests/rules/test_residual_risk.py::test_the_bundled_log_loads
    applies_to: [all]
    source: spec 11.24
"""


def _log(*entries: str) -> str:
    return "format: triz-residual-risk/1\nrisks:\n" + "".join(entries)


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_bundled_log_loads() -> None:
    risks = residual_risk.load()
    assert len(risks) >= 10
    assert len({r.id for r in risks}) == len(risks)


def test_every_kind_spec_11_24_names_is_reported() -> None:
    """spec 11.24: known limitations, uncovered attack classes, compromised sets, dependence on
    human verification, conditions of not finally verified results, and the design boundary."""
    assert {r.kind for r in residual_risk.load()} == set(residual_risk.KINDS)


def test_every_named_test_exists_in_the_repository() -> None:
    for risk in residual_risk.load():
        file, name = risk.detected_by.split("::")
        path = ROOT / file
        assert path.is_file(), f"{risk.id}: {file} does not exist"
        assert name in _test_functions(path), f"{risk.id}: {file} has no {name}"


def test_every_named_class_is_in_the_catalogue() -> None:
    classes = set(load_catalogue())
    for risk in residual_risk.load():
        assert risk.applies_to == ("all",) or set(risk.applies_to) <= classes, risk.id


def test_the_design_boundary_record_of_11_24_is_there() -> None:
    record = next(r for r in residual_risk.load() if r.kind == "design boundary")
    text = " ".join(record.title.split())
    assert ("matters of taste that have not been reduced to a verifiable checklist are excluded "
            "from the variable signal") in text.lower()
    assert ("the risk of systematic impoverishment of style and diversity is not measured by "
            "this system and requires separate control outside the reward loop") in text
    assert record.applies_to == ("all",)


@pytest.mark.parametrize("risk_id", ["sandbox-degraded-mode", "verifier-model-layer-uncalibrated",
                                     "citation-ranges-unexpandable",
                                     "self-checks-in-the-same-process",
                                     "divergence-monitor-statistics",
                                     "red-team-budget-is-a-floor"])
def test_the_known_limits_of_this_code_base_are_logged(risk_id: str) -> None:
    assert risk_id in {r.id for r in residual_risk.load()}


def test_json_and_text_forms_carry_every_entry() -> None:
    risks = residual_risk.load()
    dicts = residual_risk.as_dicts()
    assert json.loads(json.dumps(dicts)) == dicts
    assert [d["id"] for d in dicts] == [r.id for r in risks]
    assert set(dicts[0]) == {"id", "title", "kind", "boundary", "owner", "detected_by",
                             "applies_to", "source"}
    lines = residual_risk.text_lines()
    assert len(lines) == len(risks)
    for line, risk in zip(lines, risks, strict=True):
        assert "\n" not in line
        assert line.startswith(f"[{risk.kind}] {risk.id}: ")
        assert risk.detected_by in line
        assert risk.owner in line


def test_applies_reads_all_and_class_lists() -> None:
    by_id = {r.id: r for r in residual_risk.load()}
    assert by_id["design-boundary-taste"].applies("anything")
    assert by_id["self-checks-in-the-same-process"].applies("pilot_02_feedback_form")
    assert not by_id["self-checks-in-the-same-process"].applies("document_step_faithfulness")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace("    owner: someone\n", "")),
                     "risks[0] (one-risk).owner: Field required", id="missing-field"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace("known limitation", "minor")),
                     "risks[0] (one-risk).kind: Input should be", id="unknown-kind"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace(
            "tests/rules/test_residual_risk.py::test_the_bundled_log_loads", "somewhere")),
                     "risks[0] (one-risk).detected_by: String should match", id="not-a-node-id"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk"), GOOD_ENTRY.format(id="one-risk")),
                     "risks[1] (one-risk).id: repeated", id="repeated-id"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace("[all]", "[all, x_class]")),
                     "risks[0] (one-risk).applies_to: 'all' stands alone", id="all-and-more"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace("[all]", "[]")),
                     "risks[0] (one-risk).applies_to: name the classes", id="no-classes"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk") + "    extra: 1\n"),
                     "risks[0] (one-risk).extra: Extra inputs are not permitted", id="extra"),
        pytest.param(_log(GOOD_ENTRY.format(id="one-risk").replace("A limit.", "''")),
                     "risks[0] (one-risk).title: String should have at least 1", id="empty"),
        pytest.param("format: triz-residual-risk/2\nrisks: []\n", "format: 'triz-residual-risk/2'",
                     id="format"),
        pytest.param("format: triz-residual-risk/1\nrisks: []\n", "risks: a non-empty list",
                     id="empty-list"),
        pytest.param("- 1\n", "a mapping of exactly format and risks", id="not-a-mapping"),
    ],
)
def test_a_malformed_log_is_one_line_naming_the_entry_and_field(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "risks.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RuleError) as caught:
        residual_risk.load(path)
    line = caught.value.diagnostics()
    assert message in line
    assert str(path) in line
    assert "\n" not in str(caught.value)


def test_malformed_yaml_and_a_missing_file_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "risks.yaml"
    path.write_text("format: [\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"risks\.yaml"):
        residual_risk.load(path)
    with pytest.raises(RuleError, match="cannot read the residual-risk log"):
        residual_risk.load(tmp_path / "absent.yaml")


def test_catalogue_risks_prints_the_log_as_text_and_json(triz_eval: Callable[..., Any]) -> None:
    text = triz_eval("catalogue", "risks")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0] == f"Residual-risk log (spec 11.24): {len(residual_risk.load())} entries"
    assert lines[1:] == [f"- {line}" for line in residual_risk.text_lines()]
    as_json = triz_eval("catalogue", "risks", "--json")
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == residual_risk.as_dicts()


def test_catalogue_risks_refuses_a_malformed_file_in_one_line(
        triz_eval: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "risks.yaml"
    path.write_text(_log(GOOD_ENTRY.format(id="one-risk").replace("known limitation", "minor")),
                    encoding="utf-8")
    result = triz_eval("catalogue", "risks", "--file", path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "risks[0] (one-risk).kind" in result.stderr
