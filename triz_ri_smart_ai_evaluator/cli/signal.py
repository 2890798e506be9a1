"""``triz-eval signal ...``: compute a training signal from verified inputs (no ledger)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .._explain import render
from .._io import load_model
from ..errors import InputError
from ..rules import residual_risk
from ..rules._values import format_exact
from ..rules.loader import BUNDLED_CATALOGUE
from ..rules.published import BUNDLED_STORE, RulesStore, pin_published
from ..signal.calculator import SignalCalculator
from ..signal.inputs import AttemptInputs
from ..signal.result import Signal
from .catalogue import emit_json, find_task_class
from .options import CatalogueOpt, JsonOpt, StoreOpt, TaskClassOpt

signal_app = typer.Typer(help="Compute a training signal from verified inputs.")

out = Console()


def _compute(
    catalogue: Path, task_class: str, input_file: Path, started_at: str | None, store: Path
) -> Signal:
    tc = find_task_class(catalogue, task_class)
    try:
        start = datetime.fromisoformat(started_at) if started_at else datetime.now(UTC)
    except ValueError as e:
        raise InputError(f"--started-at: {started_at!r} is not an ISO 8601 time") from e
    if start.tzinfo is None:
        raise InputError("--started-at needs a timezone, for example 2026-12-01T10:00:00Z")
    # issue 10, spec 10.5: the rules come from the published store, checked against their
    # hashes, in the version in force when the attempt started; a catalogue file that edits a
    # published version in place exits 3.
    pinned = pin_published(RulesStore(store), tc, started_at=start)
    inputs = load_model(input_file, AttemptInputs)
    try:
        return SignalCalculator(pinned).compute(inputs)
    except InputError as e:
        raise InputError(f"{input_file}: {e.message}") from e


InputOpt = Annotated[
    Path, typer.Option("--input", "-i", help="Verified inputs (JSON or YAML; see docs/signal.md).")
]
StartedOpt = Annotated[
    str | None,
    typer.Option(
        help="When the attempt started (ISO 8601 with zone); pins the rules version and the "
        "benchmarks in force then."
    ),
]


@signal_app.command("compute")
def signal_compute(
    task_class: TaskClassOpt,
    input_file: InputOpt,
    started_at: StartedOpt = None,
    catalogue: CatalogueOpt = BUNDLED_CATALOGUE,
    store: StoreOpt = BUNDLED_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Compute the signal; print S (or the full breakdown with --json).

    No ledger is consulted, so evidence digests are not resolved: the result says
    ``evidence: unchecked``.  Use ``attempt evaluate`` for the trusted record."""
    signal = _compute(catalogue, task_class, input_file, started_at, store)
    if as_json:
        emit_json(signal.to_dict())
    else:
        final = "held in escrow" if signal.final is None else format_exact(signal.final)
        out.print(
            f"S = {format_exact(signal.value)}  outcome={signal.outcome.value}  final={final}  "
            f"evidence={signal.evidence_check}"
        )


@signal_app.command("explain")
def signal_explain(
    task_class: TaskClassOpt,
    input_file: InputOpt,
    started_at: StartedOpt = None,
    catalogue: CatalogueOpt = BUNDLED_CATALOGUE,
    store: StoreOpt = BUNDLED_STORE,
) -> None:
    """Show the transparent breakdown of spec 3.2 as tables, with the residual-risk footer."""
    render(out, _compute(catalogue, task_class, input_file, started_at, store))
    out.print(residual_risk_footer(task_class), markup=False, highlight=False, soft_wrap=True)


def residual_risk_footer(task_class: str) -> str:
    """One line pointing to the residual-risk log (spec 11.24: shown with every report)."""
    risks = residual_risk.load()
    applying = sum(1 for r in risks if r.applies(task_class))
    return (f"Residual risks (spec 11.24): {applying} of the {len(risks)} known limits of this "
            f"evaluator apply to {task_class}; see `triz-eval catalogue risks`.")


