"""Spec 11.15 at the gate: direct, hidden and multi-stage instructions inside a draft never
change the mechanical findings or the gate's decision; the injection signal fires.

For each injection kind of the corpus, one injected draft and the draft it was made from go
through the same gate with the same scripted verdicts (the model double answers the same either
way, so any difference could only come from the gate itself).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.verifier.conftest import PASS
from tests.verifier.openai_double import ReplyContent, ScriptedChatDouble
from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.verifier.chat import Endpoint
from triz_ri_smart_ai_evaluator.verifier.client import ChatClient
from triz_ri_smart_ai_evaluator.verifier.gate import GateIssue, StepResult, VerifierGate
from triz_ri_smart_ai_evaluator.verifier.inputs import Brief, Step
from triz_ri_smart_ai_evaluator.verifier.pipeline import LedgerJournal, injection_changed

CORPUS = Path(__file__).parent / "corpus"


def _rows(name: str) -> list[dict[str, Any]]:
    with (CORPUS / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


INJECTED = _rows("injected.jsonl")
BASES = {row["id"]: row for row in _rows("drafts.jsonl")}
# Two per kind: one made from a clean draft and one from a mutated draft, where the corpus has
# them; enough to cover every kind without running all 320 through HTTP.
CASES: list[dict[str, Any]] = []
for kind in sorted({r["injection"] for r in INJECTED}):
    of_kind = [r for r in INJECTED if r["injection"] == kind]
    clean = [r for r in of_kind if not r["expected_findings"]][:1]
    mutated = [r for r in of_kind if r["expected_findings"]][:1]
    CASES += clean + mutated


def _brief(name: str) -> Brief:
    return Brief.model_validate_json((CORPUS / "briefs" / f"{name}.json").read_text("utf-8"))


def _through_gate(tmp_path: Path, brief: Brief, step: str, text: str,
                  attempt: str) -> tuple[StepResult, list[str]]:
    keys = tmp_path / "keys"
    if not keys.exists():
        create_log_key(keys)
    store = open_sqlite_ledger(tmp_path / "ledger.db", keys)

    def same_again(s: Step, previous: str, issues: tuple[GateIssue, ...]) -> str:
        return previous  # the re-render changes nothing: the second inspection decides

    try:
        with ScriptedChatDouble([ReplyContent(PASS), ReplyContent(PASS)]) as double:
            endpoint = Endpoint(base_url=double.base_url, model="verifier", timeout_seconds=5.0)
            with ChatClient(endpoint) as client:
                gate = VerifierGate(brief, model=client, journal=LedgerJournal(store, attempt))
                result = gate.run_step(step, text, rerender=same_again)
        kinds = [e.fields["kind"] for e in store.attempt_events(attempt)]
    finally:
        store.close()
    return result, kinds


def _summary(result: StepResult) -> tuple[Any, ...]:
    return (result.end, len(result.inspections),
            [sorted((f.kind, f.quote) for f in i.mechanical.findings)
             for i in result.inspections])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_injection_changes_neither_findings_nor_decision(tmp_path: Path,
                                                         case: dict[str, Any]) -> None:
    brief = _brief(case["brief"])
    base = BASES[case["base"]]
    injected, injected_kinds = _through_gate(tmp_path, brief, case["step"], case["text"], "inj")
    clean, clean_kinds = _through_gate(tmp_path, brief, base["step"], base["text"], "base")
    assert _summary(injected) == _summary(clean)
    assert injected.injection_signals, f"no injection signal for {case['injection']}"
    assert "injection.detected" in injected_kinds
    assert "injection.detected" not in clean_kinds
    # The checklist item of the class recomputes the findings without the injected spans.
    assert injection_changed(brief, [injected]) == []
