"""The bundle's human-readable page and its JSON bytes.  Pure, except that the page reads the
residual-risk log from the catalogue (spec 11.24: the known limits are shown in every report)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..harnesses.protocol import Outcome
from ..rules import residual_risk
from ..signal.result import Signal


def json_bytes(doc: Any) -> bytes:
    """Sorted keys, two-space indent, UTF-8, a final newline."""
    return (json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True, default=str)
            + "\n").encode()


def render_report(summary: Mapping[str, Any], outcome: Outcome, signal: Signal) -> str:
    """``report.md``: the signal, the escrow, the metrics and every check."""
    lines = [
        f"# {summary.get('attempt_id')}: {summary.get('task_class')} ({summary.get('defect')})",
        "",
        f"- outcome: {summary.get('outcome')}; S = {signal.value} "
        f"(held in escrow {signal.held}, payable now {signal.payable_now})",
        f"- isolation: {summary.get('isolation')}",
        f"- p95 latency: {summary.get('p95_latency_ms')} ms",
        f"- quarantine: {', '.join(outcome.quarantine) or 'none'}",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in outcome.metrics.items()),
        "",
        "| check | kind | state |",
        "|---|---|---|",
        *(f"| {f['id']} | {f['kind']} | {f['state']} |" for f in outcome.findings),
        "",
        "Reasons: " + ("; ".join(signal.reasons) or "none"),
        "",
        *residual_risk_section(str(summary.get("task_class"))),
    ]
    return "\n".join(lines)


def residual_risk_section(task_class: str) -> list[str]:
    """The lines of the report's residual-risk section: the log's entries for ``task_class``
    and where the whole log is (spec 11.24)."""
    risks = residual_risk.load()
    applying = [r for r in risks if r.applies(task_class)]
    return ["## Residual risks (spec 11.24)", "",
            f"{len(applying)} of the {len(risks)} entries of the residual-risk log apply to "
            "this class; the whole log: `triz-eval catalogue risks`.", "",
            *(f"- {r.text_line()}" for r in applying), ""]
