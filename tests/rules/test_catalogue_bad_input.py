"""Bad task-class files are refused with every problem located by file, line and field.

Each case starts from the text of a valid bundled class (read at test time), makes one small
text edit, and checks that ``parse_task_class`` and ``load_task_class`` raise ``CatalogueError``
whose problem names the field path, the line (computed from the mutated text itself, never from
the code under test) and, where the code gives one, the specification section.

Spec sections: 2.6 (benchmark established in advance), 2.9 (combination of indicators), 2.15
(final confirmation deadline, escrow), 3.8/11.12 (no impression as a measurement), 4.2 (no
benchmark "from the achieved level"), 4.4 (predefined grounds), 4.6 (caps), 5.5 (critical
items), 5.6 (no subjective weights), 5.7 (no common pool), 6.2/6.3 (checklist format, no vague
items), 7.2 (negative value), 8.9 (human checklists with examples), 10.5 (versioning), 11.1
(completeness), 11.2 (controllability), 11.3 (no overall coefficient).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from triz_ri_smart_ai_evaluator.errors import InputError, RuleError
from triz_ri_smart_ai_evaluator.rules.loader import (
    CatalogueError,
    Located,
    load_catalogue,
    load_task_class,
    parse_task_class,
)

# -- helpers -------------------------------------------------------------------------------


def edit(text: str, old: str, new: str) -> str:
    """Replace the single occurrence of ``old``; fail loudly if the fixture text changed."""
    assert text.count(old) == 1, f"expected exactly one {old!r} in the bundled class"
    return text.replace(old, new)


def cut(text: str, start: str, stop: str | None) -> str:
    """Remove the text from the line starting with ``start`` up to (not including) ``stop``."""
    assert text.count(start) == 1, start
    head, rest = text.split(start, 1)
    if stop is None:
        return head
    assert rest.count(stop) == 1, stop
    return head + stop + rest.split(stop, 1)[1]


def line_of(text: str, needle: str) -> int:
    """1-based number of the only line of ``text`` equal to, or else containing, ``needle``."""
    lines = list(enumerate(text.splitlines(), start=1))
    hits = [n for n, line in lines if line.rstrip() == needle]
    hits = hits or [n for n, line in lines if needle in line]
    assert len(hits) == 1, f"{needle!r} is on lines {hits}, expected exactly one"
    return hits[0]


STATUS_METHOD = """    measurement_method: >-
      scenarios whose HTTP status is 2xx for a valid and 4xx for an invalid submission, divided by
      the number of scenarios (pilot 7, basic scorer)
"""
DELIVERY_BM = '         justification: "pilot 7: public acceptance requires 100% Delivery"}\n'
REPORTED = "  reported_only: [status_correctness, recovery]\n"
TESTS_REQ = "    requirement: Tests and expected answers are not changed (pilot 7)\n"
TESTS_VERIFICATION = (
    'verification: {kind: hash_comparison, procedure: "hash of the tests before and after the run"}'
)
FIRST_CRITICAL = "    severity: critical\n    effect: critical\n  - id: tests_and_answers_unchanged"


def delivery_v2(ground: str, effective_from: str = "2027-01-01T00:00:00Z") -> Callable[[str], str]:
    """Add a version 2 to the Delivery benchmark, on its own line."""
    line = (
        f"      - {{version: 2, value: 1, effective_from: {effective_from}, ground: {ground},\n"
        '         justification: "a later benchmark"}\n'
    )
    return lambda t: edit(t, DELIVERY_BM, DELIVERY_BM + line)


def add_cap(entry: str) -> Callable[[str], str]:
    return lambda t: edit(t, REPORTED, REPORTED + f"  caps:\n    - {entry}\n")


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Callable[[str], str]
    field: str
    anchor: str | None  # the expected line is the line holding this text ...
    line: int = 1  # ... or this line when anchor is None
    offset: int = 0  # lines after the anchor (where PyYAML detects a broken flow collection)
    spec: str | None = None  # the section the message must cite
    words: tuple[str, ...] = ()  # further words the message must contain
    base: str = "pilot"  # which bundled class the text comes from


CASES = [
    # --- malformed YAML -----------------------------------------------------------------
    Case(
        "yaml_unclosed_bracket",
        lambda t: edit(
            t,
            "multiplied: [delivery, field_fidelity, negative_rejection, regression]",
            "multiplied: [delivery, field_fidelity",
        ),
        "(yaml)",
        # The open flow sequence swallows the next line as part of a plain scalar; the parser
        # stops at the first token a sequence cannot hold: the ':' of the next key.
        anchor="  reported_only:",
        words=("malformed YAML",),
    ),
    Case(
        "yaml_bad_indentation",
        lambda t: edit(t, "  base_unit: 1\n", "   base_unit: 1\n"),
        "(yaml)",
        anchor="   base_unit: 1",
        words=("malformed YAML",),
    ),
    Case(
        "yaml_tab_indentation",
        lambda t: edit(t, "  model: gate\n", "\tmodel: gate\n"),
        "(yaml)",
        anchor="\tmodel: gate",
        words=("malformed YAML",),
    ),
    Case(
        "yaml_two_documents",
        lambda t: t + "---\nid: another_class\n",
        "(yaml)",
        anchor="---",
        words=("malformed YAML",),
    ),
    Case(
        "duplicate_key_nested",
        lambda t: edit(
            t,
            "    unit: proportion of all control scenarios\n",
            "    unit: proportion of all control scenarios\n    unit: scenarios again\n",
        ),
        "indicators[3].unit",
        anchor="    unit: scenarios again",
        words=("duplicate key",),
    ),
    Case(
        "duplicate_key_top_level",
        lambda t: t + "title: A second title\n",
        "title",
        anchor="title: A second title",
        words=("duplicate key",),
    ),
    # --- not a mapping ------------------------------------------------------------------
    Case(
        "top_level_list",
        lambda t: yaml.safe_dump([yaml.safe_load(t)], sort_keys=False),
        "(root)",
        anchor=None,
        words=("mapping",),
    ),
    Case("empty_file", lambda t: "", "(root)", anchor=None, words=("mapping",)),
    Case(
        "comments_only",
        lambda t: "# nothing but a comment\n\n",
        "(root)",
        anchor=None,
        words=("mapping",),
    ),
    Case("top_level_scalar", lambda t: "pilot_02\n", "(root)", anchor=None, words=("mapping",)),
    # --- unknown fields (spec 5.6, 5.7, 11.3) -------------------------------------------
    Case(
        "unknown_top_level_common_pool_spec_5_7",
        lambda t: t + "common_pool: 100\n",
        "common_pool",
        anchor="common_pool: 100",
        words=("unknown field",),
    ),
    Case(
        "unknown_weights_in_combination_spec_5_6",
        lambda t: edit(t, REPORTED, REPORTED + "  weights: {delivery: 2, regression: 1}\n"),
        "combination.weights",
        anchor="  weights: {delivery: 2",
        words=("unknown field",),
    ),
    Case(
        "unknown_team_coefficient_in_formula_spec_11_3",
        lambda t: edit(t, "  base_unit: 1\n", "  base_unit: 1\n  team_coefficient: 1.2\n"),
        "formula.team_coefficient",
        anchor="team_coefficient: 1.2",
        words=("unknown field",),
    ),
    Case(
        "unknown_common_pool_in_formula_spec_5_7",
        lambda t: edit(t, "  base_unit: 1\n", "  base_unit: 1\n  common_pool: 100\n"),
        "formula.common_pool",
        anchor="common_pool: 100",
        words=("unknown field",),
    ),
    Case(
        "unknown_contribution_weight_in_indicator_spec_5_6",
        lambda t: edit(
            t,
            "    unit: proportion of all control scenarios\n",
            "    unit: proportion of all control scenarios\n    contribution_weight: 3\n",
        ),
        "indicators[3].contribution_weight",
        anchor="contribution_weight: 3",
        words=("unknown field",),
    ),
    # --- wrong types --------------------------------------------------------------------
    Case(
        "base_unit_is_a_word",
        lambda t: edit(t, "  base_unit: 1\n", "  base_unit: lots\n"),
        "formula.base_unit",
        anchor="base_unit: lots",
        words=("lots",),
    ),
    Case(
        "title_is_a_list",
        lambda t: edit(
            t,
            "title: Feedback form that delivers every valid message to the trusted mail receiver",
            "title: [Feedback form, mail receiver]",
        ),
        "title",
        anchor="title: [Feedback form, mail receiver]",
        words=("string",),
    ),
    Case(
        "base_unit_is_a_bool",
        lambda t: edit(t, "  base_unit: 1\n", "  base_unit: true\n"),
        "formula.base_unit",
        anchor="base_unit: true",
        words=("boolean",),
    ),
    Case(
        "escrow_share_is_a_bool",
        lambda t: edit(t, "  escrow_share: 0.5\n", "  escrow_share: yes\n"),
        "confirmation.escrow_share",
        anchor="escrow_share: yes",
        words=("boolean",),
        base="delayed",
    ),
    # --- missing required items (spec 11.1, 11.2) ---------------------------------------
    Case(
        "no_threat_model_spec_11_1",
        lambda t: cut(t, "threat_model:\n", None),
        "threat_model",
        anchor="id: pilot_02_feedback_form",  # the document's root mapping starts here
        words=("required field is missing",),
    ),
    Case(
        "no_self_checks_spec_11_1",
        lambda t: cut(t, "self_checks:\n", "combination:\n"),
        "self_checks",
        anchor="id: pilot_02_feedback_form",
        words=("required field is missing",),
    ),
    Case(
        "indicator_without_controllability_spec_11_2",
        lambda t: edit(
            t, "    controllability: the candidate's route chooses the status it returns\n", ""
        ),
        "indicators[3].controllability",
        anchor="  - id: status_correctness",
        words=("required field is missing",),
    ),
    Case(
        "empty_measurement_method_spec_3_8",
        lambda t: edit(t, STATUS_METHOD, '    measurement_method: ""\n'),
        "indicators[3].measurement_method",
        anchor='measurement_method: ""',
    ),
    Case(
        "impression_as_measurement_method_spec_3_8_11_12",
        lambda t: edit(t, STATUS_METHOD, "    measurement_method: evaluator impression\n"),
        "indicators[3].measurement_method",
        anchor="measurement_method: evaluator impression",
        spec="3.8",
        words=("impression",),
    ),
    # --- checklist (spec 6.3, 8.9, 5.5) -------------------------------------------------
    Case(
        "vague_requirement_spec_6_3",
        lambda t: edit(t, TESTS_REQ, "    requirement: The response is professional\n"),
        "checklist[1].requirement",
        anchor="requirement: The response is professional",
        spec="6.3",
        words=("professional",),
    ),
    Case(
        "human_checklist_without_examples_spec_8_9",
        lambda t: edit(
            t,
            TESTS_VERIFICATION,
            'verification: {kind: human_checklist, procedure: "a reviewer reads the diff"}',
        ),
        "checklist[1].verification",
        anchor="kind: human_checklist",
        spec="8.9",
    ),
    Case(
        "human_checklist_without_counterexamples_spec_8_9",
        lambda t: edit(
            t,
            TESTS_VERIFICATION,
            "verification: {kind: human_checklist, procedure: reads the diff, "
            'examples: ["diff touches no test file"]}',
        ),
        "checklist[1].verification",
        anchor="kind: human_checklist",
        spec="8.9",
    ),
    Case(
        "critical_item_with_effect_quality_spec_5_5",
        lambda t: edit(
            t, FIRST_CRITICAL, FIRST_CRITICAL.replace("effect: critical", "effect: quality")
        ),
        "checklist[0]",
        anchor="  - id: secrets_not_disclosed",
        spec="5.5",
    ),
    # --- caps (spec 4.6) ----------------------------------------------------------------
    Case(
        "cap_without_justification_spec_4_6",
        add_cap('{indicator: delivery, maximum: 1, shift_protection: "no carry-over"}'),
        "combination.caps[0].justification",
        anchor="{indicator: delivery, maximum: 1",
        words=("required field is missing",),
    ),
    Case(
        "cap_without_shift_protection_spec_4_6",
        add_cap('{indicator: delivery, maximum: 1, justification: "spec 4.6: not the result"}'),
        "combination.caps[0].shift_protection",
        anchor="{indicator: delivery, maximum: 1",
        words=("required field is missing",),
    ),
    # --- benchmarks (spec 4.2, 4.4, 10.5) -----------------------------------------------
    Case(
        "benchmark_ground_achieved_level_spec_4_2",
        delivery_v2("achieved_level"),
        "benchmarks[0].versions[1].ground",
        anchor="ground: achieved_level",
        spec="4.2",
        words=("achieved level",),
    ),
    Case(
        "benchmark_ground_from_the_achieved_level_spec_4_2",
        delivery_v2('"from the achieved level"'),
        "benchmarks[0].versions[1].ground",
        anchor='ground: "from the achieved level"',
        spec="4.2",
        words=("achieved level",),
    ),
    Case(
        "benchmark_unknown_ground_spec_4_4",
        delivery_v2("moon_phase"),
        "benchmarks[0].versions[1].ground",
        anchor="ground: moon_phase",
        words=("tool_changed",),  # the message lists the predefined grounds
    ),
    Case(
        "benchmark_v2_effective_before_v1_spec_10_5",
        delivery_v2("tool_changed", "2026-10-01T00:00:00Z"),
        "benchmarks[0]",
        anchor="  - indicator: delivery",
        spec="10.5",
    ),
    # --- cross references and combination (spec 2.9, 9.3) ------------------------------
    Case(
        "indicator_from_unknown_source",
        lambda t: edit(t, "    source: http_driver\n", "    source: mystery_box\n"),
        "indicators[3].source",
        anchor="source: mystery_box",
        words=("unknown source", "mystery_box"),
    ),
    Case(
        "indicator_not_placed_in_combination_spec_2_9",
        lambda t: edit(t, REPORTED, "  reported_only: [status_correctness]\n"),
        "indicators[4].id",
        anchor="  - id: recovery",
        spec="2.9",
        words=("recovery",),
    ),
    Case(
        "indicator_placed_twice_spec_2_9",
        lambda t: edit(t, REPORTED, "  reported_only: [status_correctness, recovery, delivery]\n"),
        "indicators[0].id",
        anchor="  - id: delivery",
        spec="2.9",
        words=("delivery", "2 times"),
    ),
    # --- formula and confirmation (spec 7.2, 2.15) --------------------------------------
    Case(
        "positive_negative_value_spec_7_2",
        lambda t: edit(t, "  negative_value: null ", "  negative_value: 0.5 "),
        "formula",
        anchor="formula:",
        spec="7.2",
    ),
    Case(
        "delayed_confirmation_without_escrow_share_spec_2_15",
        lambda t: edit(t, "  escrow_share: 0.5\n", ""),
        "confirmation",
        anchor="confirmation:",
        spec="2.15",
        words=("escrow_share",),
        base="delayed",
    ),
]


def _mutated(case: Case, pilot_text: str, delayed_text: str) -> str:
    return case.mutate(pilot_text if case.base == "pilot" else delayed_text)


def _expected_line(case: Case, text: str) -> int:
    if case.anchor is None:
        return case.line
    return line_of(text, case.anchor) + case.offset


def _check(problems: tuple[Located, ...], case: Case, file: str, line: int) -> None:
    assert len(problems) == 1, [str(p) for p in problems]
    problem = problems[0]
    assert problem.field == case.field, str(problem)
    assert problem.line == line, str(problem)
    assert problem.file == file
    assert str(problem) == f"{file}:{line}: {case.field}: {problem.message}"
    if case.spec is not None:
        assert f"spec {case.spec}" in problem.message, problem.message
    for word in case.words:
        assert word in problem.message, problem.message


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_parse_task_class_locates_the_problem(
    case: Case, pilot_text: str, delayed_text: str
) -> None:
    text = _mutated(case, pilot_text, delayed_text)
    line = _expected_line(case, text)
    with pytest.raises(CatalogueError) as info:
        parse_task_class(text, file="bad.yaml")
    _check(info.value.problems, case, "bad.yaml", line)
    # The exception's own one-line message starts with the first located problem.
    assert str(info.value).startswith(str(info.value.problems[0]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_load_task_class_names_the_file_and_line(
    case: Case, pilot_text: str, delayed_text: str, tmp_path: Path
) -> None:
    text = _mutated(case, pilot_text, delayed_text)
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogueError) as info:
        load_task_class(path)
    _check(info.value.problems, case, str(path), _expected_line(case, text))


# BUG (reported): the integer fields of a rule take a YAML bool as the number 1 (pydantic's lax
# mode), although parse_exact refuses bools for every decimal number of a rule.  These cases
# assert the correct behaviour and fail until the integer fields are made strict.
BOOL_AS_INTEGER = [
    Case(
        "benchmark_version_is_a_bool",
        lambda t: edit(
            t,
            "{version: 1, value: 1, effective_from: 2026-11-01T00:00:00Z, ground: initial,\n"
            + DELIVERY_BM,
            "{version: true, value: 1, effective_from: 2026-11-01T00:00:00Z, ground: initial,\n"
            + DELIVERY_BM,
        ),
        "benchmarks[0].versions[0].version",
        anchor="{version: true,",
    ),
    Case(
        "observation_days_is_a_bool",
        lambda t: edit(t, "  observation_days: 14\n", "  observation_days: true\n"),
        "confirmation.observation_days",
        anchor="observation_days: true",
        base="delayed",
    ),
]


@pytest.mark.parametrize("case", BOOL_AS_INTEGER, ids=lambda c: c.id)
def test_integer_field_refuses_a_bool(case: Case, pilot_text: str, delayed_text: str) -> None:
    """A YAML ``true`` is not the number 1 in a rule (same rule as parse_exact's for decimals)."""
    text = _mutated(case, pilot_text, delayed_text)
    with pytest.raises(CatalogueError) as info:
        parse_task_class(text, file="bad.yaml")
    _check(info.value.problems, case, "bad.yaml", _expected_line(case, text))


def test_catalogue_error_is_a_rule_error_with_exit_code_2(pilot_text: str) -> None:
    """Bad catalogue files are input errors (exit 2), not crashes."""
    with pytest.raises(CatalogueError) as info:
        parse_task_class(pilot_text + "common_pool: 1\n", file="bad.yaml")
    assert isinstance(info.value, RuleError)
    assert isinstance(info.value, InputError)
    assert info.value.exit_code == 2
    assert "\n" not in info.value.diagnostics()


def test_the_unmutated_bundled_text_is_valid(pilot_text: str, delayed_text: str) -> None:
    """Guard for the table above: every case fails because of its edit, not the base text."""
    assert parse_task_class(pilot_text, file="ok.yaml").id == "pilot_02_feedback_form"
    assert parse_task_class(delayed_text, file="ok.yaml").id == "defect_fix_delayed_confirmation"


def test_a_cap_with_justification_and_shift_protection_is_accepted(pilot_text: str) -> None:
    """Spec 4.6: a cap is allowed once it is justified and protected against shifting."""
    text = add_cap(
        '{indicator: delivery, maximum: 1, justification: "spec 4.6", shift_protection: "none"}'
    )(pilot_text)
    tc = parse_task_class(text, file="ok.yaml")
    assert [c.indicator for c in tc.combination.caps] == ["delivery"]


def test_a_benchmark_version_2_on_a_predefined_ground_is_accepted(pilot_text: str) -> None:
    """Spec 4.4: a change on a predefined ground, effective after version 1, is a valid version."""
    tc = parse_task_class(delivery_v2("tool_changed")(pilot_text), file="ok.yaml")
    assert [v.version for v in tc.benchmark("delivery").versions] == [1, 2]


def test_missing_file_is_a_located_catalogue_error(tmp_path: Path) -> None:
    path = tmp_path / "does_not_exist.yaml"
    with pytest.raises(CatalogueError) as info:
        load_task_class(path)
    (problem,) = info.value.problems
    assert (problem.file, problem.line, problem.field) == (str(path), 1, "(file)")
    assert "cannot read" in problem.message
    assert str(problem).startswith(f"{path}:1: (file): ")


def test_every_field_level_problem_in_one_file_is_reported(pilot_text: str) -> None:
    """The author sees every problem in one run, each at its own line and field."""
    text = edit(pilot_text, TESTS_REQ, "    requirement: The response is professional\n")
    text = edit(text, STATUS_METHOD, "    measurement_method: evaluator impression\n")
    text = edit(text, "  base_unit: 1\n", "  base_unit: 1\n  team_coefficient: 1.2\n")
    text = edit(text, REPORTED, REPORTED + "  weights: {delivery: 2}\n")
    text = edit(text, "  mode: shadow ", "  mode: true ")
    expected = {
        ("checklist[1].requirement", line_of(text, "The response is professional")),
        ("indicators[3].measurement_method", line_of(text, "evaluator impression")),
        ("formula.team_coefficient", line_of(text, "team_coefficient: 1.2")),
        ("combination.weights", line_of(text, "weights: {delivery: 2}")),
        ("formula.mode", line_of(text, "  mode: true ")),
    }
    with pytest.raises(CatalogueError) as info:
        parse_task_class(text, file="bad.yaml")
    got = {(p.field, p.line) for p in info.value.problems}
    assert got == expected
    assert "(and 4 more)" in str(info.value)


def test_every_cross_reference_problem_in_one_file_is_reported(pilot_text: str) -> None:
    """Completeness problems (spec 11.1, 2.9) are also collected, not stopped at the first."""
    text = edit(pilot_text, "    source: http_driver\n", "    source: mystery_box\n")
    text = edit(text, REPORTED, "  reported_only: [status_correctness]\n")
    text = edit(
        text,
        "  - {id: smtp_events, produced_by: smtp_receiver,",
        "  - {id: smtp_events, produced_by: nobody,",
    )
    expected = {
        ("indicators[3].source", line_of(text, "source: mystery_box")),
        ("indicators[4].id", line_of(text, "  - id: recovery")),
        ("evidence[1].produced_by", line_of(text, "produced_by: nobody")),
    }
    with pytest.raises(CatalogueError) as info:
        parse_task_class(text, file="bad.yaml")
    got = {(p.field, p.line) for p in info.value.problems}
    assert got == expected


def test_every_duplicate_key_is_reported(pilot_text: str) -> None:
    text = pilot_text + "title: again\n"
    text = edit(text, "  model: gate\n", "  model: gate\n  model: gate\n")
    with pytest.raises(CatalogueError) as info:
        parse_task_class(text, file="bad.yaml")
    first_model = line_of(text, "  base_unit: 1") - 1  # the second "model:" line
    got = {(p.field, p.line, p.message) for p in info.value.problems}
    assert got == {
        ("title", line_of(text, "title: again"), "duplicate key"),
        ("formula.model", first_model, "duplicate key"),
    }


def test_load_catalogue_reports_problems_of_every_file(
    pilot_text: str, delayed_text: str, tmp_path: Path
) -> None:
    """A folder with two bad files and one duplicate id reports all three problems."""
    bad_a = edit(pilot_text, "  base_unit: 1\n", "  base_unit: lots\n")
    bad_b = edit(delayed_text, "  escrow_share: 0.5\n", "")
    (tmp_path / "a.yaml").write_text(bad_a, encoding="utf-8")
    (tmp_path / "b.yaml").write_text(bad_b, encoding="utf-8")
    (tmp_path / "c.yaml").write_text(pilot_text, encoding="utf-8")
    (tmp_path / "d.yaml").write_text(pilot_text, encoding="utf-8")
    with pytest.raises(CatalogueError) as info:
        load_catalogue(tmp_path)
    got = {(Path(p.file).name, p.field) for p in info.value.problems}
    assert got == {("a.yaml", "formula.base_unit"), ("b.yaml", "confirmation"), ("d.yaml", "id")}
