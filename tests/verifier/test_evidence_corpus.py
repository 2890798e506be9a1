"""The generated evidence corpus: 0 false positives on clean drafts, every alteration caught.

Issue 13 items 5 (prices) and 6 (URLs): per class, ``evidence_corpus.PER_KIND`` clean drafts
whose every price and URL is on the evidence set in a varied shape, and as many drafts with
exactly one amount, currency, multiplier, unit, range end, host, path, query, scheme or port
altered.  Expected outcomes come from the generator, never from the checker.  Run with ``-s`` to
see the table.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pytest

from tests.verifier.evidence_corpus import Case, generate
from triz_ri_smart_ai_evaluator.verifier.inputs import Brief, Draft, parse_brief
from triz_ri_smart_ai_evaluator.verifier.mechanical import Finding, check_draft

KIND = {"price": "price_off_evidence", "url": "url_off_evidence"}


@cache
def cases() -> tuple[Case, ...]:
    return tuple(generate())


def _findings(case: Case) -> tuple[Finding, ...]:
    brief: Brief = parse_brief(case.brief, "generated.json")
    return check_draft(brief, Draft(format="triz-draft/1", step="S1", text=case.text)).findings


def _outcome(case: Case) -> str:
    """caught / missed / false_positive / clean, judged against what the generator altered."""
    findings = _findings(case)
    if case.altered is None:
        return "false_positive" if findings else "clean"
    start, end = case.altered
    on_target = [f for f in findings
                 if f.kind == KIND[case.kind] and start <= f.span[0] and f.span[1] <= end]
    if len(on_target) != len(findings):
        return "false_positive"
    return "caught" if on_target else "missed"


def test_the_generator_is_seeded_and_varied():
    """Issue 13: at least 40 clean and 40 altered drafts per class, several alteration kinds."""
    assert [c.text for c in generate()] == [c.text for c in cases()]
    labels = Counter((c.kind, c.label) for c in cases())
    for kind in KIND:
        assert labels[(kind, "clean")] >= 40
        assert sum(n for (k, label), n in labels.items() if k == kind and label != "clean") >= 40
        assert len({label for (k, label) in labels if k == kind}) >= 6
    assert len({c.text for c in cases()}) == len(cases())


@pytest.mark.parametrize("kind", sorted(KIND))
def test_zero_false_positives_and_every_alteration_caught(kind: str):
    """Issue 13 items 5-6: 0 false positives on clean drafts, 100 % detection on altered ones."""
    table: Counter[tuple[str, str]] = Counter()
    wrong: list[str] = []
    for case in cases():
        if case.kind != kind:
            continue
        outcome = _outcome(case)
        table[(case.label, outcome)] += 1
        if outcome not in {"clean", "caught"}:
            wrong.append(f"{case.label}/{outcome}: {case.text!r} "
                         f"{[(f.kind, f.quote) for f in _findings(case)]} "
                         f"{case.brief['evidence']}")
    print(f"\n{kind}: " + ", ".join(f"{label} {outcome} {n}"
                                    for (label, outcome), n in sorted(table.items())))
    assert not wrong, "\n".join(wrong[:10])
