"""The generated quotation corpus (issue 13 item 3, seed 002): 0 false positives, 100 % detection.

Labels come from the generator (``quote_corpus.py``), never from the checker.  A clean draft
quotes approved wordings faithfully in every shape (wrapped, single smart quotes beside
apostrophes, block quotes before and after their citation, the sentence after the citation); an
altered one changes one word of one quotation and must give exactly one ``altered_citation`` on
the citation the quotation belongs to.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.verifier.quote_corpus import BRIEF, SHAPES, QuoteDraft, generate
from triz_ri_smart_ai_evaluator.verifier.inputs import Draft, parse_brief
from triz_ri_smart_ai_evaluator.verifier.mechanical import check_draft

CORPUS = generate()
THE_BRIEF = parse_brief(BRIEF, "quote_corpus.BRIEF")


def _findings(d: QuoteDraft) -> list[tuple[str, str]]:
    report = check_draft(THE_BRIEF, Draft(format="triz-draft/1", step="S1", text=d.text))
    return [(f.kind, f.quote) for f in report.findings]


def test_the_corpus_is_big_varied_and_seeded():
    labels = Counter(d.label for d in CORPUS)
    assert labels["clean"] >= 40
    assert labels["altered"] >= 40
    for label in ("clean", "altered"):
        shapes = Counter(d.shape for d in CORPUS if d.label == label)
        assert set(shapes) == set(SHAPES)
        assert len({d.entry for d in CORPUS if d.label == label}) == 4
    assert [d.text for d in generate()] == [d.text for d in CORPUS]
    assert len({d.text for d in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("d", [d for d in CORPUS if d.label == "clean"], ids=lambda d: d.id)
def test_a_faithful_quotation_is_never_a_finding(d: QuoteDraft):
    assert _findings(d) == [], d.text


@pytest.mark.parametrize("d", [d for d in CORPUS if d.label == "altered"], ids=lambda d: d.id)
def test_one_changed_word_is_an_altered_citation(d: QuoteDraft):
    found = _findings(d)
    assert [k for k, _ in found] == ["altered_citation"], (found, d.text)
    assert d.number in found[0][1], (found, d.text)
