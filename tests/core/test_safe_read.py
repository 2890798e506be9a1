"""The untrusted-input reader (``_safe_read``) and the two file readers built on it: the CLI's
``_io.read_document`` and the verifier's brief and draft loaders (issue 10, classes 4 and 5).

Every refusal is one InputError line naming the file (and the line where it is known); none is
a RecursionError, ValueError or OverflowError escaping as an internal error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from triz_ri_smart_ai_evaluator._io import load_model, read_document
from triz_ri_smart_ai_evaluator._safe_read import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    parse_json,
    parse_yaml,
)
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.signal.inputs import AttemptInputs
from triz_ri_smart_ai_evaluator.verifier.input_files import load_brief, load_draft

REPO = Path(__file__).resolve().parents[2]
BRIEF = REPO / "examples" / "document" / "brief.yaml"
DRAFT = REPO / "examples" / "document" / "draft_faithful.yaml"
DEEP = 100_000


def refused(parse: Any, text: str | bytes, where: str = "in.txt") -> str:
    with pytest.raises(InputError) as info:
        parse(text, where=where)
    message = info.value.message
    assert "\n" not in message, message
    assert message.startswith(where), message
    return message


# -- what is read as before ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [1.5, -2, "x", null, true], "c": {"d": "e"}}',
    '{"s": "[[[[[[ not brackets {{{{ \\" NaN Infinity 99999"}',
    "[" * MAX_DEPTH + "]" * MAX_DEPTH,
    '{"n": ' + "9" * MAX_NUMBER_CHARS + "}",
    '{"a": {"x": 1}, "b": {"x": 2}}',  # the same key in two objects is no duplicate
    '"\\ud800"',
])
def test_valid_json_reads_as_json_loads_reads_it(text: str) -> None:
    assert parse_json(text, where="in.json") == json.loads(text)


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1.5, -2, x, null, true]\nc: {d: e}\n",
    "a: &anchor 1\n",  # an anchor alone expands nothing
    "when: 2026-12-01\n",
    "a: {x: 1}\nb: {x: 2}\n",
    "",
])
def test_valid_yaml_reads_as_safe_load_reads_it(text: str) -> None:
    assert parse_yaml(text, where="in.yaml") == yaml.safe_load(text)


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_not() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(text, where="in.json") == json.loads(text)
    assert parse_yaml(text, where="in.yaml") == yaml.safe_load(text)
    deeper = f"[{text}]"
    assert "nested deeper" in refused(parse_json, deeper, "in.json")
    assert "nested deeper" in refused(parse_yaml, deeper, "in.yaml")


# -- duplicate keys (defect class 4) ---------------------------------------------------------

def test_duplicate_json_key_names_the_key() -> None:
    message = refused(parse_json, '{"state": "failed", "state": "passed"}', "in.json")
    assert message.startswith("in.json: duplicate key 'state'"), message


def test_duplicate_json_key_deep_inside_names_the_key() -> None:
    text = '{"checklist": {"x": {"state": "failed", "source": "h", "state": "passed"}}}'
    assert "duplicate key 'state'" in refused(parse_json, text, "in.json")


def test_duplicate_json_key_with_a_newline_stays_one_line() -> None:
    message = refused(parse_json, '{"a\\nb": 1, "a\\nb": 2}', "in.json")
    assert "'a\\nb'" in message


def test_duplicate_yaml_key_names_line_and_field() -> None:
    text = "checklist:\n  x:\n    state: failed\n    state: passed\n"
    assert refused(parse_yaml, text, "in.yaml") == "in.yaml:4: checklist.x.state: duplicate key"


def test_yaml_keys_equal_once_read_are_duplicates() -> None:
    assert "duplicate key" in refused(parse_yaml, "{1: a, 0x1: b}\n", "in.yaml")
    assert "duplicate key" in refused(parse_yaml, "{true: a, True: b}\n", "in.yaml")


def test_a_merge_key_cannot_be_overridden_silently() -> None:
    assert "duplicate key" in refused(parse_yaml, "<<: {state: failed}\nstate: passed\n",
                                      "in.yaml")


# -- depth, numbers, constants, aliases (defect class 5) -------------------------------------

@pytest.mark.parametrize(("text", "line"), [
    ("[" * DEEP + "]" * DEEP, 1),
    ("[" * DEEP, 1),
    ('{"a":\n' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}", 2),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), 1),
])
def test_deep_json_is_refused_before_parsing(text: str, line: int) -> None:
    message = refused(parse_json, text, "in.json")
    assert message == f"in.json:{line}: nested deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize("text", [
    "a: " + "[" * DEEP + "]" * DEEP + "\n",
    "a:\n" + "- " * DEEP + "x\n",
    "a: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n",
    "a:\n" + "".join("  " * n + "- b:\n" for n in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "- x\n",
])
def test_deep_yaml_is_refused_without_recursing(text: str) -> None:
    assert f"nested deeper than {MAX_DEPTH} levels" in refused(parse_yaml, text, "in.yaml")


@pytest.mark.parametrize("literal", ["9" * 5000, "-" + "9" * 5000, "0." + "1" * 5000,
                                     "1e" + "9" * 200, "9" * (MAX_NUMBER_CHARS + 1)])
def test_a_long_number_literal_is_refused_in_json(literal: str) -> None:
    message = refused(parse_json, '{\n"v": ' + literal + "}", "in.json")
    assert message.startswith("in.json:2: a number of "), message


@pytest.mark.parametrize("literal", ["9" * 5000, "0x" + "f" * 5000, "1." + "1" * 5000])
def test_a_long_number_literal_is_refused_in_yaml(literal: str) -> None:
    message = refused(parse_yaml, "a: 1\nv: " + literal + "\n", "in.yaml")
    assert message.startswith("in.yaml:2: malformed YAML: a number of "), message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant: str) -> None:
    message = refused(parse_json, '{"v": [1,\n' + constant + "]}", "in.json")
    assert message == f"in.json:2: {constant} is not a JSON number"


def test_a_yaml_alias_bomb_is_refused() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 12)]
    message = refused(parse_yaml, "\n".join(levels) + "\n", "in.yaml")
    assert message == "in.yaml:2: malformed YAML: aliases are not allowed"


def test_a_date_the_constructor_cannot_build_is_malformed_yaml() -> None:
    assert "malformed YAML" in refused(parse_yaml, "a: 2020-02-30\n", "in.yaml")


def test_bytes_must_be_utf8() -> None:
    assert refused(parse_json, b'{"a": "\xff"}', "body") == "body: not valid UTF-8 at byte 7"


# -- through the readers ---------------------------------------------------------------------

def test_read_document_refuses_a_duplicate_checklist_item(tmp_path: Path) -> None:
    path = tmp_path / "inputs.json"
    path.write_text('{"checklist": {"x": {"state": "failed", "source": "h"}, '
                    '"x": {"state": "passed", "source": "h"}}}', encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}: duplicate key 'x'"):
        read_document(path)


def test_load_model_refuses_deep_yaml(tmp_path: Path) -> None:
    path = tmp_path / "inputs.yaml"
    path.write_text("claims: " + "[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}:1: malformed YAML: nested deeper"):
        load_model(path, AttemptInputs)


def _brief_json(tmp_path: Path) -> tuple[Path, str]:
    doc = yaml.safe_load(BRIEF.read_text(encoding="utf-8"))
    return tmp_path / "brief.json", json.dumps(doc, indent=2)


def test_a_verifier_brief_with_a_duplicate_judgement_text_is_refused(tmp_path: Path) -> None:
    """The brief is the reference a draft is checked against: a second ``text`` must not
    silently replace the planner's judgement."""
    path, text = _brief_json(tmp_path)
    first = '"id": "J1",\n      "text": '
    assert first in text
    path.write_text(text.replace(first, '"id": "J1",\n      "text": "anything goes",\n'
                                 '      "text": ', 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"^brief\.json: duplicate key 'text'"):
        load_brief(path)


def test_a_verifier_brief_with_a_duplicate_yaml_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "brief.yaml"
    text = BRIEF.read_text(encoding="utf-8")
    path.write_text(text + "task: Something else entirely\n", encoding="utf-8")
    line = len(text.splitlines()) + 1
    with pytest.raises(InputError) as info:
        load_brief(path)
    assert info.value.message == f"brief.yaml:{line}: task: duplicate key"


@pytest.mark.parametrize(("name", "content", "start"), [
    ("brief.json", '{"steps": ' + "[" * DEEP + "]" * DEEP + "}", "brief.json:1: nested"),
    ("brief.yaml", "steps: " + "[" * DEEP + "]" * DEEP + "\n", "brief.yaml:1: malformed YAML"),
    ("brief.json", '{"format": ' + "9" * 5000 + "}", "brief.json:1: a number of 5,000"),
    ("brief.json", '{"format": NaN}', "brief.json:1: NaN is not a JSON number"),
])
def test_hostile_briefs_are_one_line(tmp_path: Path, name: str, content: str,
                                     start: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_brief(path)
    assert info.value.message.startswith(start), info.value.message


def test_a_draft_with_a_duplicate_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "draft.yaml"
    text = DRAFT.read_text(encoding="utf-8")
    path.write_text(text + "text: An invented claim.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"^draft\.yaml:\d+: text: duplicate key$"):
        load_draft(path)


def test_the_examples_still_load() -> None:
    assert load_brief(BRIEF).steps
    assert load_draft(DRAFT).text
