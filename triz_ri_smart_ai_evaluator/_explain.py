"""Rendering a signal's transparent breakdown (spec 3.2) as rich tables for a person."""

from __future__ import annotations

from decimal import Decimal

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from .rules._values import format_exact
from .signal.result import Signal, Status


def _n(value: Decimal | None) -> str:
    return "-" if value is None else format_exact(value)


def render(console: Console, s: Signal) -> None:
    """Print the breakdown: rules, indicators, checks, blocks and the signal itself."""
    console.print(
        Panel(
            f"[bold]{s.task_class}[/bold]  rules {s.rules_version[:16]}  model {s.model}  "
            f"mode {s.mode}\nfunctions: {', '.join(s.functions)}\nformula: {s.formula}\n"
            f"B = {_n(s.base_unit)}",
            title="Rules",
        )
    )
    ind = Table(title="Indicators (benchmark, verified actual value, source, performance)")
    for col in ("indicator", "role", "benchmark", "verified value", "source", "status", "Perf",
                "cap", "minimum"):
        ind.add_column(col)
    for line in s.indicators:
        status = line.status.value
        style = "" if line.status is Status.VERIFIED else "red"
        ind.add_row(
            line.name, line.role, f"{line.benchmark} (v{line.benchmark_version})",
            _n(line.verified_value), line.source,
            f"[{style}]{status}[/{style}]" if style else status,
            _n(line.performance), _n(line.cap),
            (_n(line.minimum) + (" [red]below[/red]" if line.below_minimum else "")),
        )
    console.print(ind)
    checks = Table(title="Checklist and mandatory self-checks")
    for col in ("item", "kind", "status", "state", "score"):
        checks.add_column(col)
    for c in s.checks:
        bad = c.state in ("failed", "omitted", "unverified")
        state = f"[red]{c.state}[/red]" if bad else c.state
        checks.add_row(c.id, c.kind, c.status.value, state, _n(c.score))
    console.print(checks)
    if s.blocks:
        blocks = Table(title="Non-compensatory blocks")
        for col in ("block", "Perf", "threshold", "value"):
            blocks.add_column(col)
        for b in s.blocks:
            blocks.add_row(b.id, _n(b.performance), _n(b.threshold), _n(b.value))
        console.print(blocks)
    result = Table(title="Signal", show_header=False)
    result.add_column("what")
    result.add_column("value")
    result.add_row("outcome", s.outcome.value)
    for reason in s.reasons:
        result.add_row("reason", reason)
    result.add_row("K", _n(s.quality_k))
    result.add_row("Perf_overall", _n(s.perf_overall))
    result.add_row("S", f"[bold]{_n(s.value)}[/bold]")
    if s.delayed:
        result.add_row("held in escrow", _n(s.held))
        result.add_row("payable now", _n(s.payable_now))
        result.add_row("final", "after the control event or the deadline")
    else:
        result.add_row("final", _n(s.final))
    result.add_row(f"cost C ({s.cost_id or 'none'})", _n(s.cost) if s.cost is not None else
                   "not compared (solution not admissible or not reported)")
    result.add_row("claims (never evidence)", "; ".join(s.claims) or "-")
    result.add_row("obstacles accepted", "; ".join(s.obstacles) or "-")
    result.add_row(
        "evidence",
        "unchecked (no ledger consulted; digests not resolved)"
        if s.evidence_check == "unchecked"
        else s.evidence_check,
    )
    console.print(result)
