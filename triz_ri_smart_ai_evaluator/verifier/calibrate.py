"""Calibrate the model layer on a labelled corpus: how often the verifier role is right.

Seed 002, checklist 4: "calibrate on real drafts before trusting a gate; measure the
false-positive share first" (their calibration: 10 of 12 flags over-literal).  Each labelled
draft is sent to the verifier exactly as the gate sends it (brief, step and draft as delimited
data; one retry after a crash or an unparseable verdict) and its verdict is compared with the
label.  The mechanical layer is not run: this measures the model alone.

A corpus is JSON Lines, one labelled draft a line::

    {"id": "d1", "brief": "brief.yaml", "step": "S2", "draft": "...", "expected": "fail"}

``brief`` is a brief file relative to the corpus file (or, as in ``tests/verifier/corpus``, the
name of ``briefs/<name>.json`` next to it); ``draft`` (or ``text``) is the draft; ``expected`` is
``pass`` or ``fail``.  A row of the mechanical corpus carries ``expected_findings`` instead: it is
expected to fail when one of them is a kind the model judges (:data:`~.verdict.ISSUE_KINDS`), and
to pass otherwise (URLs and prices are the mechanical layer's alone).

The positive class is ``fail`` (a violation flagged): TP a violating draft failed, FP a faithful
draft failed, TN a faithful draft passed, FN a violating draft passed.  A draft with no verdict
after the retry is counted apart, as unparseable or crashed, and in no cell.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._safe_read import parse_json
from ..errors import InputError
from .chat import ChatModel, VerifierCrashed
from .gate import CALLS_PER_INSPECTION, brief_as_data, draft_of, quote_checker, step_as_data
from .input_files import load_brief, read_text
from .inputs import Brief, Step
from .prompt import build_verifier_messages, reply_to_verdict, verify
from .verdict import ISSUE_KINDS, Unparseable

#: Largest corpus file read.
MAX_CORPUS_BYTES = 64 * 1024 * 1024
#: Most labelled drafts in one corpus.
MAX_ROWS = 20_000

Label = Literal["pass", "fail"]
Got = Literal["pass", "fail", "unparseable", "crashed"]


@dataclass(frozen=True, slots=True)
class LabelledDraft:
    """One draft of a step of a brief, with the verdict a careful reviewer expects."""

    id: str
    brief: Brief
    step: Step
    text: str
    expected: Label


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the verifier made of one labelled draft."""

    id: str
    expected: Label
    got: Got
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "expected": self.expected, "got": self.got,
                "reason": self.reason}


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


@dataclass(frozen=True, slots=True)
class Confusion:
    """The confusion table of the model layer over a corpus (positive class: fail)."""

    tp: int
    fp: int
    tn: int
    fn: int
    unparseable: int
    crashed: int

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> Confusion:
        cells = {"tp": 0, "fp": 0, "tn": 0, "fn": 0, "unparseable": 0, "crashed": 0}
        for o in outcomes:
            if o.got in ("unparseable", "crashed"):
                cells[o.got] += 1
            elif o.got == "fail":
                cells["tp" if o.expected == "fail" else "fp"] += 1
            else:
                cells["fn" if o.expected == "fail" else "tn"] += 1
        return cls(**cells)

    @property
    def precision(self) -> float | None:
        """TP / (TP + FP); None with no draft failed."""
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        """TP / (TP + FN); None with no violating draft judged."""
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def false_positive_share(self) -> float | None:
        """FP / (FP + TN): the share of faithful drafts failed (seed 002 measures this first)."""
        return _ratio(self.fp, self.fp + self.tn)

    def to_json(self) -> dict[str, object]:
        return {"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn,
                "unparseable": self.unparseable, "crashed": self.crashed,
                "precision": self.precision, "recall": self.recall,
                "false_positive_share": self.false_positive_share}


# -- the corpus -----------------------------------------------------------------------------------

def _expected(row: dict[str, object], where: str) -> Label:
    label = row.get("expected")
    if label in ("pass", "fail"):
        return "pass" if label == "pass" else "fail"
    findings = row.get("expected_findings")
    if isinstance(findings, list) and all(isinstance(f, str) for f in findings):
        return "fail" if any(f in ISSUE_KINDS for f in findings) else "pass"
    raise InputError(f"{where}: expected: must be \"pass\" or \"fail\" (or give "
                     "expected_findings)")


def _string(row: dict[str, object], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: {key}: missing or not a string")
    return value


def _brief_path(corpus: Path, name: str) -> Path:
    direct = corpus.parent / name
    if direct.suffix.lower() in (".yaml", ".yml", ".json") and direct.is_file():
        return direct
    return corpus.parent / "briefs" / f"{name}.json"


def load_corpus(path: Path) -> list[LabelledDraft]:
    """Read a labelled corpus (JSON Lines, see the module docstring).  Raises InputError naming
    the file and line."""
    text = read_text(path, limit=MAX_CORPUS_BYTES)
    briefs: dict[Path, Brief] = {}
    rows: list[LabelledDraft] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        if len(rows) == MAX_ROWS:
            raise InputError(f"{where}: more than {MAX_ROWS:,} labelled drafts")
        row = parse_json(line, where=where)
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected a JSON object")
        brief_name, step_id = _string(row, "brief", where), _string(row, "step", where)
        draft = _string(row, "text" if "text" in row and "draft" not in row else "draft", where)
        brief_file = _brief_path(path, brief_name)
        if brief_file not in briefs:
            try:
                briefs[brief_file] = load_brief(brief_file)
            except InputError as e:
                raise InputError(f"{where}: brief: {e.diagnostics()}") from e
        brief = briefs[brief_file]
        try:
            step = brief.step(step_id)
            draft_of(step, draft)
        except InputError as e:
            raise InputError(f"{where}: {e.diagnostics()}") from e
        row_id = row.get("id")
        rows.append(LabelledDraft(str(row_id) if row_id is not None else str(number), brief,
                                  step, draft, _expected(row, where)))
    if not rows:
        raise InputError(f"{path.name}: no labelled drafts")
    return rows


# -- the model layer ------------------------------------------------------------------------------

def judge(model: ChatModel, row: LabelledDraft) -> Outcome:
    """The verifier's verdict on one draft, as the gate asks for it (one retry).  Never raises
    for what the endpoint does."""
    reason: str | None = None
    got: Got = "crashed"
    step_text = step_as_data(row.step)
    for _ in range(CALLS_PER_INSPECTION):
        pack = build_verifier_messages(brief_as_data(row.brief), step_text, row.text)
        try:
            reply = verify(model, pack)
        except VerifierCrashed as e:
            got, reason = "crashed", e.diagnostics()
            continue
        verdict = reply_to_verdict(reply, quote_in_draft=quote_checker(row.text,
                                                                       pack.draft_as_sent),
                                   quote_in_spec=quote_checker(row.step.content_spec))
        if isinstance(verdict, Unparseable):
            got, reason = "unparseable", verdict.reason
            continue
        return Outcome(row.id, row.expected, "pass" if verdict.passed else "fail")
    return Outcome(row.id, row.expected, got, reason)


def calibrate(model: ChatModel, rows: Sequence[LabelledDraft], *,
              progress: Callable[[int, int], None] | None = None
              ) -> tuple[Confusion, tuple[Outcome, ...]]:
    """Judge every labelled draft in order; the confusion table and each outcome."""
    outcomes = []
    for done, row in enumerate(rows):
        if progress is not None:
            progress(done, len(rows))
        outcomes.append(judge(model, row))
    if progress is not None:
        progress(len(rows), len(rows))
    return Confusion.of(outcomes), tuple(outcomes)


def report_json(confusion: Confusion, outcomes: Sequence[Outcome]) -> str:
    """The table and the misjudged drafts as JSON text."""
    wrong = [o.to_json() for o in outcomes if o.got != o.expected]
    return json.dumps({"drafts": len(outcomes), **confusion.to_json(), "misjudged": wrong},
                      ensure_ascii=False, indent=2)
