"""The labelled corpus: zero false positives on clean drafts, every mutation caught.

Summary checklist 4 ("calibrate on real drafts before trusting a gate; measure the
false-positive share first") and 7 ("test with the failure class the domain really produces":
citations outside the approved set, the live catch of clauses 9.2 and 9.3).  Labels come from
the generator (``corpus/build_corpus.py``), never from the checker.  Run with ``-s`` to see the
confusion table; ``confusion_table()`` is also there for a CLI.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from tests.verifier.corpus import build_corpus
from triz_ri_smart_ai_evaluator.verifier.input_files import load_brief
from triz_ri_smart_ai_evaluator.verifier.inputs import Brief, Draft
from triz_ri_smart_ai_evaluator.verifier.mechanical import Finding, check_draft

CORPUS = Path(__file__).resolve().parent / "corpus"


@cache
def briefs() -> dict[str, Brief]:
    return {p.stem: load_brief(p) for p in sorted((CORPUS / "briefs").glob("*.json"))}


def _rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (CORPUS / name).read_text("utf-8").splitlines()]


@cache
def drafts() -> tuple[dict[str, object], ...]:
    return tuple(_rows("drafts.jsonl"))


@cache
def injected() -> tuple[dict[str, object], ...]:
    return tuple(_rows("injected.jsonl"))


def _findings(row: dict[str, object]) -> tuple[Finding, ...]:
    draft = Draft(format="triz-draft/1", step=str(row["step"]), text=str(row["text"]))
    return check_draft(briefs()[str(row["brief"])], draft).findings


def confusion_table() -> str:
    """Rows = label, columns = drafts, caught, missed, false positive; as aligned text.

    A mutated draft is *caught* when every expected finding kind is found, *missed* otherwise;
    a *false positive* is a draft with a finding kind beyond the expected ones (for a clean
    draft, any finding).
    """
    table: dict[str, Counter[str]] = {}
    for row in drafts():
        label = str(row["expected"])
        got = Counter(f.kind for f in _findings(row))
        want = Counter(str(k) for k in row["expected_findings"])  # type: ignore[attr-defined]
        c = table.setdefault(label, Counter())
        c["drafts"] += 1
        if want:
            c["caught" if not want - got else "missed"] += 1
        if got - want:
            c["false positive"] += 1
    cols = ["drafts", "caught", "missed", "false positive"]
    width = max(len(k) for k in table) + 2
    lines = [f"{'label':<{width}}" + "".join(f"{c:>16}" for c in cols)]
    for label in sorted(table, key=lambda k: (k != "clean", k)):
        lines.append(f"{label:<{width}}" + "".join(f"{table[label][c]:>16}" for c in cols))
    return "\n".join(lines)


def test_corpus_has_at_least_300_clean_and_300_mutated_drafts():
    labels = Counter(row["expected"] == "clean" for row in drafts())
    assert labels[True] >= 300
    assert labels[False] >= 300
    kinds = {row["expected"] for row in drafts()}
    assert {"wrong_number", "swapped_edition", "annex_renumbered", "changed_word", "negation",
            "price_digits", "url_off_evidence", "invented_citation"} <= kinds
    assert len(briefs()) >= 3


def test_generator_reproduces_the_committed_corpus_byte_for_byte():
    for name, data in build_corpus.build().items():
        assert (CORPUS / name).read_bytes() == data, name


def test_zero_false_positives_on_clean_drafts():
    noisy = [(row["id"], [(f.kind, f.quote) for f in _findings(row)])
             for row in drafts() if row["expected"] == "clean" and _findings(row)]
    assert noisy == []


def test_every_mutated_draft_is_caught_with_exactly_the_expected_findings():
    wrong = []
    for row in drafts():
        if row["expected"] == "clean":
            continue
        kinds = sorted(f.kind for f in _findings(row))
        if kinds != row["expected_findings"]:
            wrong.append((row["id"], row["expected"], kinds))
    assert wrong == []


def test_the_live_catch_clauses_9_2_and_9_3_are_two_invented_citations():
    """Summary, "the live catch": the set approves Annex A controls; 9.2 and 9.3 are invented."""
    brief = briefs()["iso27001-inventory"]
    text = ("The policy follows clauses 9.2 and 9.3 of ISO/IEC 27001:2022 "
            "(internal audit, management review).")
    report = check_draft(brief, Draft(format="triz-draft/1", step="S1", text=text))
    assert [(f.kind, f.quote) for f in report.findings] == [
        ("invented_citation", "clauses 9.2"), ("invented_citation", "9.3")]


def test_print_confusion_table(capsys: pytest.CaptureFixture[str]):
    table = confusion_table()
    with capsys.disabled():
        print("\n" + table)
    assert table.splitlines()[1].startswith("clean")


@pytest.mark.parametrize("kind", sorted(build_corpus.INJECTIONS))
def test_injected_drafts_keep_their_findings_and_raise_the_signal(kind: str):
    """Spec 11.15: an injection changes no finding; the signal of its kind fires inside it."""
    rows = [r for r in injected() if r["injection"] == kind]
    assert len(rows) >= 30
    by_id = {str(r["id"]): r for r in drafts()}
    for row in rows:
        base = by_id[str(row["base"])]
        brief = briefs()[str(row["brief"])]
        report = check_draft(brief, Draft(format="triz-draft/1", step="S1", text=str(row["text"])))
        without = check_draft(brief, Draft(format="triz-draft/1", step="S1",
                                           text=str(base["text"])))
        assert [(f.kind, f.quote, f.detail) for f in report.findings] == [
            (f.kind, f.quote, f.detail) for f in without.findings], row["id"]
        assert sorted(f.kind for f in report.findings) == row["expected_findings"]
        assert row["expected_signal"] in {s.kind for s in report.injection}, row["id"]
        assert without.injection == (), base["id"]
