"""The strict verdict parser (spec 8.11, 9.4, 11.15; seed 002 checklist item 5).

Every rule of ``verifier/verdict.py`` has a case here that fails if the rule is removed; the
property tests check that no text and no JSON value makes the parser raise, and that valid
verdicts round-trip.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.verifier.verdict import (
    ISSUE_KINDS,
    MAX_ISSUES,
    MAX_RAW_BYTES,
    VERDICT_SCHEMA,
    DroppedIssue,
    Issue,
    Unparseable,
    Verdict,
    parse_verdict,
)

DRAFT = (
    "Asset inventory policy. Scope follows ISO/IEC 27001:2022 Annex A 5.9. "
    "Internal audit per clause 9.2 and management review per clause 9.3."
)


def in_draft(quote: str) -> bool:
    return quote in DRAFT


def everywhere(quote: str) -> bool:
    return True


def nowhere(quote: str) -> bool:
    return False


def issue(
    kind: str = "invented_citation", quote: str = "clause 9.2", explanation: str = "x"
) -> dict[str, Any]:
    return {"kind": kind, "quote": quote, "explanation": explanation}


def dumps(obj: Any) -> str:
    return json.dumps(obj)


SPEC = "State the inventory requirement with its citation, and the tool chosen."


def in_spec(quote: str) -> bool:
    return quote in SPEC


def parse(raw: str, quote_in_draft: Any = in_draft, quote_in_spec: Any = in_spec
          ) -> Verdict | Unparseable:
    return parse_verdict(raw, quote_in_draft=quote_in_draft, quote_in_spec=quote_in_spec)


def unparseable(raw: str, quote_in_draft: Any = in_draft) -> Unparseable:
    result = parse(raw, quote_in_draft)
    assert isinstance(result, Unparseable), result
    assert result.raw == raw or len(raw) > MAX_RAW_BYTES
    assert result.reason
    assert result.reason.splitlines() == [result.reason]
    return result


PASS = '{"pass": true, "issues": []}'
FAIL = dumps({"pass": False, "issues": [issue()]})


# --- accepted ---------------------------------------------------------------------------------


def test_a_pass_parses() -> None:
    result = parse(PASS)
    assert isinstance(result, Verdict)
    assert result.passed is True
    assert result.issues == ()
    assert result.dropped == ()
    assert result.raw == PASS


def test_a_fail_with_a_quoted_issue_parses() -> None:
    result = parse(FAIL)
    assert isinstance(result, Verdict)
    assert result.passed is False
    assert result.issues == (Issue("invented_citation", "clause 9.2", "x"),)


@pytest.mark.parametrize("kind", ISSUE_KINDS)
def test_each_kind_is_accepted(kind: str) -> None:
    quote = "the tool chosen" if kind == "missing_required_content" else "clause 9.2"
    result = parse(dumps({"pass": False, "issues": [issue(kind=kind, quote=quote)]}))
    assert isinstance(result, Verdict)
    assert result.issues[0].kind == kind


@pytest.mark.parametrize("ws", [" ", "\n", "\t", "\r\n", "  \n\t "])
def test_json_whitespace_around_the_object_is_allowed(ws: str) -> None:
    assert isinstance(parse(ws + PASS + ws), Verdict)


def test_keys_in_any_order_and_an_empty_explanation_are_accepted() -> None:
    raw = (
        '{"issues": [{"explanation": "", "quote": "clause 9.3", "kind": "contradiction"}],'
        ' "pass": false}'
    )
    result = parse(raw)
    assert isinstance(result, Verdict)
    assert result.issues == (Issue("contradiction", "clause 9.3", ""),)


def test_exactly_max_issues_is_accepted() -> None:
    result = parse(dumps({"pass": False, "issues": [issue()] * MAX_ISSUES}))
    assert isinstance(result, Verdict)
    assert len(result.issues) == MAX_ISSUES


# --- the shape around the object ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty answer"),
        ("   \n ", "empty answer"),
        ("Here is my verdict: " + PASS, "text before the JSON object"),
        (PASS + "\nI hope this helps.", "text after the JSON object"),
        ("```json\n" + PASS + "\n```", "code fence"),
        ("```\n" + PASS + "\n```", "code fence"),
        (PASS + "\n```", "text after the JSON object"),
        (PASS + PASS, "more than one JSON value"),
        (PASS + "\n" + FAIL, "more than one JSON value"),
        (PASS + " []", "more than one JSON value"),
        ("[" + PASS + "]", "a JSON array, not an object"),
        ("true", "a JSON boolean, not an object"),
        ("null", "a JSON null, not an object"),
        ("1", "a JSON number, not an object"),
        ('"pass"', "a JSON string, not an object"),
        ("pass", "not JSON"),
        ("{", "not JSON"),
        ('{"pass": true, "issues": [}', "not JSON"),
        ("{'pass': True, 'issues': []}", "not JSON"),
        ('{"pass": true, "issues": [],}', "not JSON"),
        ("\ufeff" + PASS, "text before the JSON object"),
        ("\u00a0" + PASS, "text before the JSON object"),
        ("// verdict\n" + PASS, "text before the JSON object"),
    ],
)
def test_anything_but_one_object_is_unparseable(raw: str, reason: str) -> None:
    assert reason in unparseable(raw).reason


# --- keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"pass": true}', "missing key 'issues'"),
        ('{"issues": []}', "missing key 'pass'"),
        ("{}", "missing key"),
        ('{"pass": true, "issues": [], "score": 10}', "unexpected key 'score'"),
        ('{"pass": true, "issues": [], "Pass": true}', "unexpected key 'Pass'"),
        ('{"PASS": true, "issues": []}', "unexpected key 'PASS'"),
        ('{"passed": true, "issues": []}', "unexpected key 'passed'"),
    ],
)
def test_keys_are_exactly_pass_and_issues(raw: str, reason: str) -> None:
    assert reason in unparseable(raw).reason


@pytest.mark.parametrize(
    "raw",
    [
        '{"pass": false, "pass": true, "issues": []}',
        '{"pass": true, "issues": [], "issues": []}',
        '{"pass": false, "issues": [{"kind": "contradiction", "kind": "invented_citation", '
        '"quote": "clause 9.2", "explanation": ""}]}',
        '{"pass": false, "issues": [{"kind": "contradiction", "quote": "clause 9.2", '
        '"quote": "clause 9.3", "explanation": ""}]}',
        # Escaped spelling of the same key is still the same key.
        '{"pass": true, "\\u0070ass": false, "issues": []}',
    ],
)
def test_duplicate_keys_anywhere_are_unparseable(raw: str) -> None:
    # Parsers disagree on which duplicate wins: "first wins" would read the first case as a fail,
    # "last wins" as a pass.  Neither reading is allowed.
    assert "duplicate key" in unparseable(raw).reason


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_unparseable(constant: str) -> None:
    reason = unparseable(f'{{"pass": {constant}, "issues": []}}').reason
    assert "is not JSON" in reason


# --- types -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["1", "0", '"true"', '"false"', "null", "[]", "{}", "1.0", "[true]"]
)
def test_pass_must_be_a_json_boolean(value: str) -> None:
    reason = unparseable(f'{{"pass": {value}, "issues": []}}').reason
    assert '"pass" is' in reason
    assert "not a boolean" in reason


@pytest.mark.parametrize("value", ["null", '""', "{}", "0", "true", '"[]"'])
def test_issues_must_be_an_array(value: str) -> None:
    assert "not an array" in unparseable(f'{{"pass": true, "issues": {value}}}').reason


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ('"clause 9.2"', "issue 0 is a string, not an object"),
        ("null", "issue 0 is a null, not an object"),
        ("[]", "issue 0 is an array, not an object"),
        ('{"kind": "contradiction", "quote": "clause 9.2"}', "lacks key 'explanation'"),
        ('{"kind": "contradiction", "explanation": ""}', "lacks key 'quote'"),
        ('{"quote": "clause 9.2", "explanation": ""}', "lacks key 'kind'"),
        (
            '{"kind": "contradiction", "quote": "clause 9.2", "explanation": "",'
            ' "severity": "high"}',
            "unexpected key 'severity'",
        ),
        ('{"kind": 1, "quote": "clause 9.2", "explanation": ""}', "'kind' is a number"),
        ('{"kind": "contradiction", "quote": null, "explanation": ""}', "'quote' is a null"),
        ('{"kind": "contradiction", "quote": ["clause 9.2"], "explanation": ""}', "nesting"),
        (
            '{"kind": "contradiction", "quote": "clause 9.2", "explanation": 3}',
            "'explanation' is a number",
        ),
        (
            '{"kind": "style", "quote": "clause 9.2", "explanation": ""}',
            "kind 'style' is not one of",
        ),
        ('{"kind": "Contradiction", "quote": "clause 9.2", "explanation": ""}', "is not one of"),
        ('{"kind": "missing_content", "quote": "clause 9.2", "explanation": ""}', "is not one of"),
        ('{"kind": "contradiction", "quote": "", "explanation": ""}', "the quote is empty"),
        ('{"kind": "contradiction", "quote": " \\n\\t ", "explanation": ""}', "the quote is empty"),
        ('{"kind": "contradiction", "quote": "\\ud800", "explanation": ""}', "unpaired surrogate"),
    ],
)
def test_each_issue_has_exactly_the_schema(item: str, reason: str) -> None:
    raw = f'{{"pass": false, "issues": [{item}]}}'
    assert reason in unparseable(raw, everywhere).reason


def test_one_bad_issue_among_good_ones_makes_the_whole_verdict_unparseable() -> None:
    raw = dumps({"pass": False, "issues": [issue(), issue(kind="tone")]})
    assert "issue 1" in unparseable(raw).reason


# --- agreement of pass with the list -------------------------------------------------------------


def test_pass_true_with_issues_disagrees() -> None:
    # The injection a draft would try: "pass": true carried next to the real findings.
    raw = dumps({"pass": True, "issues": [issue()]})
    assert "disagrees" in unparseable(raw).reason


def test_pass_false_with_no_issues_disagrees() -> None:
    assert "disagrees" in unparseable('{"pass": false, "issues": []}').reason


def test_pass_true_with_issues_disagrees_even_when_no_quote_is_in_the_draft() -> None:
    # Agreement is checked on what the verifier said, before false positives are dropped.
    raw = dumps({"pass": True, "issues": [issue(quote="not in the draft")]})
    assert "disagrees" in unparseable(raw).reason


# --- quotes not in the draft ------------------------------------------------------------------


def test_an_issue_quoting_outside_the_draft_is_dropped_and_recorded() -> None:
    raw = dumps(
        {"pass": False, "issues": [issue(), issue(kind="contradiction", quote="the brief says X")]}
    )
    result = parse(raw)
    assert isinstance(result, Verdict)
    assert result.passed is False
    assert result.issues == (Issue("invented_citation", "clause 9.2", "x"),)
    assert result.dropped == (
        DroppedIssue(
            Issue("contradiction", "the brief says X", "x"), "quote not found verbatim in the draft"
        ),
    )


def test_quote_in_draft_is_asked_about_each_quote() -> None:
    asked: list[str] = []

    def spy(quote: str) -> bool:
        asked.append(quote)
        return True

    raw = dumps({"pass": False, "issues": [issue(quote="a"), issue(quote="b")]})
    assert isinstance(parse(raw, spy), Verdict)
    assert asked == ["a", "b"]


def test_a_fail_whose_every_quote_is_outside_the_draft_is_malformed() -> None:
    raw = dumps({"pass": False, "issues": [issue(quote="x"), issue(quote="y")]})
    reason = unparseable(raw, nowhere).reason
    assert "fail with no issue quoting the draft" in reason


def test_dropping_never_turns_a_fail_into_a_pass() -> None:
    raw = dumps({"pass": False, "issues": [issue()]})
    result = parse(raw, nowhere)
    assert not (isinstance(result, Verdict) and result.passed)


# --- size and depth -------------------------------------------------------------------------------


def test_more_than_max_issues_is_unparseable() -> None:
    raw = dumps({"pass": False, "issues": [issue()] * (MAX_ISSUES + 1)})
    assert f"more than {MAX_ISSUES}" in unparseable(raw).reason


def test_an_answer_over_64_kib_is_unparseable_even_if_valid() -> None:
    long = "x" * MAX_RAW_BYTES
    raw = dumps({"pass": False, "issues": [issue(quote="clause 9.2", explanation=long)]})
    result = parse(raw, everywhere)
    assert isinstance(result, Unparseable)
    assert f"larger than {MAX_RAW_BYTES} bytes" in result.reason
    assert len(result.raw) == MAX_RAW_BYTES


def test_the_size_limit_counts_utf8_bytes_not_characters() -> None:
    # 30,000 three-byte characters: under the limit in characters, over it in bytes.
    raw = dumps({"pass": False, "issues": [issue(explanation="\u20ac" * 30_000)]}).replace(
        "\\u20ac", "\u20ac"
    )
    assert len(raw) < MAX_RAW_BYTES < len(raw.encode("utf-8"))
    assert "larger than" in unparseable(raw, everywhere).reason


def test_an_answer_just_under_the_limit_is_accepted() -> None:
    base = dumps({"pass": False, "issues": [issue(explanation="")]})
    raw = base.replace(
        '"explanation": ""', '"explanation": "' + "y" * (MAX_RAW_BYTES - len(base)) + '"'
    )
    assert len(raw.encode("utf-8")) == MAX_RAW_BYTES
    assert isinstance(parse(raw), Verdict)


@pytest.mark.parametrize(
    "raw",
    [
        '{"pass": true, "issues": [{"kind": {"x": 1}}]}',
        '{"pass": true, "issues": [[[]]]}',
        "[" * 10_000 + "]" * 10_000,
        "{" * 20_000,
        "}" * 5 + "{" * 5,
        '{"pass": true, "issues": []}' + "]" * 5 + "[" * 5,
    ],
)
def test_nesting_deeper_than_the_schema_is_unparseable(raw: str) -> None:
    assert "nesting deeper than the schema" in unparseable(raw).reason


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    quote = "[[[{{{"
    draft_has = lambda q: q == quote  # noqa: E731
    raw = dumps({"pass": False, "issues": [issue(quote=quote, explanation='}}}]]] \\" [[')]})
    assert isinstance(parse(raw, draft_has), Verdict)


def test_a_huge_integer_does_not_escape_the_parser() -> None:
    # int() refuses more than 4,300 digits; numbers are never converted, so this is only a type
    # error and not a crash.
    raw = '{"pass": ' + "9" * 10_000 + ', "issues": []}'
    assert "not a boolean" in unparseable(raw).reason


def test_non_text_input_is_unparseable() -> None:
    result = parse_verdict(b"{}", quote_in_draft=everywhere)  # type: ignore[arg-type]
    assert isinstance(result, Unparseable)


# --- the value objects ---------------------------------------------------------------------------


def test_a_verdict_that_disagrees_cannot_be_constructed() -> None:
    with pytest.raises(ValueError, match="no issues"):
        Verdict(passed=True, issues=(Issue("contradiction", "q", ""),), dropped=(), raw="")
    with pytest.raises(ValueError, match="at least one issue"):
        Verdict(passed=False, issues=(), dropped=(), raw="")


def test_an_invalid_issue_cannot_be_constructed() -> None:
    with pytest.raises(ValueError, match="unknown issue kind"):
        Issue("tone", "q", "")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="blank quote"):
        Issue("contradiction", "  ", "")


def test_an_unparseable_reason_is_one_line() -> None:
    with pytest.raises(ValueError, match="one non-empty line"):
        Unparseable("two\nlines", "")
    with pytest.raises(ValueError, match="one non-empty line"):
        Unparseable("", "")


def test_reasons_quoting_the_answer_stay_on_one_line() -> None:
    raw = '{"pass": true, "issues": [], "a\\nb\\u2028c": 1}'
    reason = unparseable(raw).reason
    assert "unexpected key" in reason


def test_to_json_of_a_verdict() -> None:
    raw = dumps({"pass": False, "issues": [issue(), issue(quote="elsewhere")]})
    result = parse(raw)
    assert isinstance(result, Verdict)
    assert result.to_json() == {
        "outcome": "verdict",
        "pass": False,
        "issues": [issue()],
        "dropped": [
            {"issue": issue(quote="elsewhere"), "reason": "quote not found verbatim in the draft"}
        ],
        "raw": raw,
    }
    json.dumps(result.to_json())


def test_to_json_of_an_unparseable_escapes_unpaired_surrogates() -> None:
    result = unparseable("\ud800 not json")
    record = result.to_json()
    assert record["outcome"] == "unparseable"
    assert record["reason"] == result.reason
    assert isinstance(record["raw"], str)
    record["raw"].encode("utf-8")


def test_the_schema_describes_the_parsed_shape() -> None:
    assert VERDICT_SCHEMA["required"] == ["pass", "issues"]
    assert VERDICT_SCHEMA["additionalProperties"] is False
    assert VERDICT_SCHEMA["properties"]["pass"] == {"type": "boolean"}
    items = VERDICT_SCHEMA["properties"]["issues"]["items"]
    assert items["additionalProperties"] is False
    assert set(items["required"]) == {"kind", "quote", "explanation"}
    assert items["properties"]["kind"]["enum"] == list(ISSUE_KINDS)
    json.dumps(VERDICT_SCHEMA)


# --- properties ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["pass", "issues", "kind", "quote", "explanation", "x"])
            | st.text(max_size=5),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_never_raises_on_any_text(raw: str) -> None:
    result = parse_verdict(raw, quote_in_draft=everywhere)
    assert isinstance(result, Verdict | Unparseable)
    if isinstance(result, Unparseable):
        assert result.reason.splitlines() == [result.reason]


@settings(max_examples=400, deadline=None)
@given(json_values, st.sampled_from([in_draft, everywhere, nowhere]))
def test_never_raises_on_any_json_value(value: Any, quote_in_draft: Any) -> None:
    result = parse_verdict(json.dumps(value), quote_in_draft=quote_in_draft)
    assert isinstance(result, Verdict | Unparseable)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "pass": st.booleans(),
            "issues": st.lists(
                st.fixed_dictionaries(
                    {
                        "kind": st.sampled_from(ISSUE_KINDS) | st.text(max_size=5),
                        "quote": st.text(max_size=10),
                        "explanation": st.text(max_size=10),
                    }
                ),
                max_size=3,
            ),
        }
    )
)
def test_never_raises_on_near_verdicts(value: Any) -> None:
    result = parse_verdict(json.dumps(value), quote_in_draft=everywhere)
    assert isinstance(result, Verdict | Unparseable)
    if isinstance(result, Verdict):
        assert result.passed is value["pass"]


quotes = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() != "")
issues_strategy = st.lists(
    st.builds(
        lambda kind, quote, explanation: {"kind": kind, "quote": quote, "explanation": explanation},
        st.sampled_from(ISSUE_KINDS),
        quotes,
        st.text(max_size=30),
    ),
    min_size=1,
    max_size=MAX_ISSUES,
)


@settings(max_examples=200, deadline=None)
@given(issues_strategy, st.booleans(), st.sampled_from(["", " ", "\n", "\t\r\n"]))
def test_valid_verdicts_round_trip(listed: list[dict[str, str]], ascii_only: bool, ws: str) -> None:
    # Quotes are generated freely (any unicode) - filter out unpaired surrogates, which the
    # parser rejects by design.
    for item in listed:
        for text in item.values():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return
    raw = ws + json.dumps({"pass": False, "issues": listed}, ensure_ascii=ascii_only) + ws
    result = parse_verdict(raw, quote_in_draft=everywhere, quote_in_spec=everywhere)
    assert isinstance(result, Verdict)
    assert result.raw == raw
    assert result.dropped == ()
    assert [i.to_json() for i in result.issues] == listed
    again = parse_verdict(
        json.dumps({"pass": result.passed, "issues": [i.to_json() for i in result.issues]}),
        quote_in_draft=everywhere,
        quote_in_spec=everywhere,
    )
    assert isinstance(again, Verdict)
    assert again.issues == result.issues


def test_a_pass_round_trips() -> None:
    result = parse(PASS)
    assert isinstance(result, Verdict)
    assert json.loads(PASS) == {
        "pass": result.passed,
        "issues": [i.to_json() for i in result.issues],
    }


# --- missing required content (issue 13 item 7, seed 002: the step's own contract) --------------


def omission(quote: str) -> str:
    return dumps({"pass": False, "issues": [issue(kind="missing_required_content", quote=quote)]})


def test_an_omission_quoting_the_step_spec_is_kept() -> None:
    result = parse(omission("and the tool chosen"))
    assert isinstance(result, Verdict)
    assert result.passed is False
    assert result.issues == (Issue("missing_required_content", "and the tool chosen", "x"),)


def test_an_omission_quoting_only_the_draft_is_dropped_and_a_lone_one_is_unparseable() -> None:
    # The quote of an omission is checked against the step's content spec, not the draft.
    assert "fail with no issue" in unparseable(omission("clause 9.2")).reason


def test_other_kinds_are_not_checked_against_the_step_spec() -> None:
    raw = dumps({"pass": False, "issues": [issue(kind="contradiction", quote="the tool chosen")]})
    assert "fail with no issue" in unparseable(raw).reason


def test_an_omission_beside_a_draft_issue_is_dropped_alone_when_not_in_the_spec() -> None:
    raw = dumps({"pass": False, "issues": [
        issue(), issue(kind="missing_required_content", quote="a retention schedule")]})
    result = parse(raw)
    assert isinstance(result, Verdict)
    assert [i.kind for i in result.issues] == ["invented_citation"]
    assert [d.reason for d in result.dropped] == [
        "quote not found verbatim in the step's content spec"]


def test_without_a_spec_checker_an_omission_cannot_be_verified() -> None:
    result = parse_verdict(omission("the tool chosen"), quote_in_draft=everywhere)
    assert isinstance(result, Unparseable)
