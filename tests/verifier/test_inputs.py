"""Brief and draft loaders: valid files load; every bad input is one InputError line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.verifier.input_files import (
    MAX_FILE_BYTES,
    load_brief,
    load_draft,
)
from triz_ri_smart_ai_evaluator.verifier.inputs import MAX_DRAFT_CHARS, parse_brief

BRIEF = {
    "format": "triz-brief/1",
    "task": "One-page asset inventory policy outline for ISO/IEC 27001:2022 Annex A",
    "judgements": [{"id": "J1", "text": "The policy applies to all information assets."}],
    "steps": [{"id": "S1", "title": "Scope and purpose", "content_spec": "State the scope."}],
    "citations": [
        {"id": "C1", "citation": "ISO/IEC 27001:2022 Annex A 5.9",
         "wording": "An inventory of information and other associated assets, including "
                    "owners, shall be developed and maintained."},
        {"id": "C2", "citation": "ISO/IEC 27001:2022 Annex A 5.10"},
    ],
    "evidence": [{"id": "E1", "url": "https://www.example.com/pricing",
                  "prices": ["EUR 49.00", "$1,299.99"]}],
}


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path
    return _write


def _with(**changes: object) -> dict[str, object]:
    return {**BRIEF, **changes}


def test_a_valid_brief_loads_from_yaml_and_json(write):
    import yaml

    for path in (write("brief.yaml", yaml.safe_dump(BRIEF)), write("b.json", json.dumps(BRIEF))):
        brief = load_brief(path)
        assert str(brief.citations[0].canonical) == "ISO/IEC 27001:2022 Annex A 5.9"
        assert brief.evidence[0].canonical_url == "https://www.example.com/pricing"
        assert brief.step("S1").title == "Scope and purpose"


def test_a_brief_may_have_no_judgements_citations_or_evidence():
    brief = parse_brief(_with(judgements=[], citations=[], evidence=[]), "b.json")
    assert brief.citations == ()
    assert brief.evidence == ()


def test_unknown_step_is_an_input_error():
    brief = parse_brief(BRIEF, "b.json")
    with pytest.raises(InputError, match="'S9' is not a step of the brief"):
        brief.step("S9")


BAD_BRIEFS = [
    (_with(citations=[*BRIEF["citations"], {"id": "C3", "citation": "ISO 27001:2022 A.5.9"}]),
     "citations[2].citation: duplicate of citations[0] (ISO/IEC 27001:2022 Annex A 5.9)"),
    (_with(citations=[{"id": "C1", "citation": "clause 9.2"}]),
     "citations[0].citation: citation names no standard"),
    (_with(citations=[{"id": "C1", "citation": "the inventory rule"}]),
     "citations[0].citation: not a citation"),
    (_with(citations=[{"id": "C1", "citation": "ISO 27001 clauses 9.2 and 9.3"}]),
     "citations[0].citation: more than one citation"),
    (_with(steps=[]), "steps: Tuple should have at least 1 item"),
    (_with(steps=[BRIEF["steps"][0], BRIEF["steps"][0]]), "steps[1].id: duplicate id 'S1'"),
    (_with(task=5), "task: Input should be a valid string"),
    (_with(format="triz-brief/2"), "format: Input should be 'triz-brief/1'"),
    (_with(colour="blue"), "colour: unknown field"),
    (_with(judgements=[{"id": 1, "text": "x"}]), "judgements[0].id: Input should be a valid"),
    (_with(evidence=[{"id": "E1", "url": "ftp://example.com/x"}]),
     "evidence[0].url: must start with http:// or https://"),
    (_with(evidence=[{"id": "E1", "url": "https://x.com", "prices": ["49"]}]),
     "evidence[0].prices[0]: not exactly one price"),
    (_with(evidence=[{"id": "E1", "url": "https://x.com"}, {"id": "E2", "url": "HTTPS://X.COM/"}]),
     "evidence[1].url: duplicate of evidence[0]"),
    (_with(citations=[{"id": "C1", "citation": "GDPR Article 5", "wording": ""}]),
     "citations[0].wording: String should have at least 1 character"),
]


@pytest.mark.parametrize(("doc", "message"), BAD_BRIEFS)
def test_bad_briefs_give_one_line_naming_file_and_field(write, doc: dict[str, object],
                                                         message: str):
    path = write("brief.json", json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_brief(path)
    text = info.value.message
    assert text.startswith(f"brief.json: {message}"), text
    assert "\n" not in text


@pytest.mark.parametrize(("name", "content", "message"), [
    ("brief.yaml", "format: [unclosed\n", "brief.yaml:2: malformed YAML"),
    ("brief.yaml", "- a\n- b\n", "brief.yaml: expected a mapping at the top level, got list"),
    ("brief.yaml", "", "brief.yaml: expected a mapping at the top level, got NoneType"),
    ("brief.json", "{", "brief.json:1: malformed JSON"),
    ("brief.yaml", b"task: \xff\xfe\n", "brief.yaml: not valid UTF-8 at byte 6"),
    ("brief.yaml", "a: &x [1]\nb: *x\n", "brief.yaml:2: malformed YAML: aliases are not allowed"),
    ("brief.toml", "x = 1", "brief.toml: unsupported file type '.toml'"),
])
def test_unreadable_brief_files_give_one_line(write, name: str, content: str | bytes,
                                              message: str):
    with pytest.raises(InputError) as info:
        load_brief(write(name, content))
    assert info.value.message.startswith(message), info.value.message
    assert "\n" not in info.value.message


def test_missing_file_names_the_file(tmp_path: Path):
    with pytest.raises(InputError, match=r"^nope\.yaml: cannot read"):
        load_brief(tmp_path / "nope.yaml")


def test_a_file_over_2_mib_is_refused_before_parsing(write):
    path = write("brief.yaml", "# " + "x" * MAX_FILE_BYTES)
    with pytest.raises(InputError, match=r"^brief\.yaml: file is [\d,]+ bytes, more than"):
        load_brief(path)


def test_a_valid_draft_loads_from_yaml_json_and_plain_text(write):
    doc = {"format": "triz-draft/1", "step": "S1", "text": "Annex A 5.9 applies."}
    assert load_draft(write("d.json", json.dumps(doc))).text == "Annex A 5.9 applies."
    assert load_draft(write("d.yaml", json.dumps(doc)), step="S1").step == "S1"
    assert load_draft(write("d.md", "# Outline\n"), step="S2").step == "S2"
    assert load_draft(write("d.txt", "\ufeffplain"), step="S2").text == "plain"


@pytest.mark.parametrize(("name", "content", "step", "message"), [
    ("d.md", "text", None, "d.md: a plain-text draft needs the step it renders"),
    ("d.md", " \u200b\n\u00a0 ", "S1", "d.md: text: empty (only whitespace after normalisation)"),
    ("d.json", json.dumps({"format": "triz-draft/1", "step": "S1", "text": "  "}), None,
     "d.json: text: empty"),
    ("d.json", json.dumps({"format": "triz-draft/1", "step": "S1", "text": 3}), None,
     "d.json: text: Input should be a valid string"),
    ("d.json", json.dumps({"step": "S1", "text": "x"}), None, "d.json: format: Field required"),
    ("d.json", json.dumps({"format": "triz-draft/1", "step": "S1", "text": "x"}), "S2",
     "d.json: step: the file says 'S1', the caller 'S2'"),
    ("d.json", json.dumps({"format": "triz-draft/1", "step": "S1", "text": "x" * 200_001}),
     None, f"d.json: text: draft text longer than {MAX_DRAFT_CHARS:,} characters"),
    ("d.md", "x" * 200_001, "S1", f"d.md: text: draft text longer than {MAX_DRAFT_CHARS:,}"),
    ("d.md", "x" * (MAX_FILE_BYTES + 1), "S1", "d.md: file is"),
    ("d.yaml", "format: triz-draft/1\nstep: S1\ntext: 'x'\nextra: 1\n", None,
     "d.yaml: extra: unknown field"),
    ("d.pdf", "x", "S1", "d.pdf: unsupported file type"),
])
def test_bad_drafts_give_one_line_naming_the_file(write, name: str, content: str,
                                                  step: str | None, message: str):
    with pytest.raises(InputError) as info:
        load_draft(write(name, content), step=step)
    assert info.value.message.startswith(message), info.value.message
    assert "\n" not in info.value.message


def test_models_are_frozen():
    brief = parse_brief(BRIEF, "b.json")
    with pytest.raises(ValueError, match="frozen"):
        brief.task = "other"  # type: ignore[misc]
