"""The bundle's human-readable page and its JSON bytes.  Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..harnesses.protocol import Outcome
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
    ]
    return "\n".join(lines)
