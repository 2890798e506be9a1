"""The ``triz-eval`` command line.

Every evaluator error is caught in one place (:func:`main`) and printed as one line; bad input
exits with code 2, integrity failures with 3, external failures with 4.  No traceback reaches
the user unless ``TRIZ_EVAL_DEBUG=1`` is set.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from ._explain import render
from ._io import load_model
from .errors import EvaluatorError, InputError
from .rules._values import format_exact
from .rules.loader import (
    BUNDLED_CATALOGUE,
    CatalogueError,
    catalogue_files,
    load_catalogue,
    load_task_class,
)
from .rules.published import BUNDLED_STORE, RulesStore, pin_published
from .rules.task_class import TaskClass
from .rules.versions import rules_version
from .signal.calculator import SignalCalculator
from .signal.inputs import AttemptInputs
from .signal.result import Signal

app = typer.Typer(
    help="TRIZ-RI Smart AI Evaluator: verified results in, training signals out.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
catalogue_app = typer.Typer(help="Task classes: list, show, validate, publish, JSON Schema.")
signal_app = typer.Typer(help="Compute a training signal from verified inputs.")
app.add_typer(catalogue_app, name="catalogue", no_args_is_help=True)
app.add_typer(signal_app, name="signal", no_args_is_help=True)


_REGISTERED: list[bool] = []


def _register_trust_record() -> None:
    """Add the lazily imported command groups, once per process (main() may run many times
    in one process, as the in-process CLI tests do)."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    from .cli_ledger import attempt_app, escrow_app, ledger_app, witness_app  # noqa: PLC0415

    app.add_typer(ledger_app, name="ledger", no_args_is_help=True)
    app.add_typer(witness_app, name="witness", no_args_is_help=True)
    app.add_typer(attempt_app, name="attempt", no_args_is_help=True)
    app.add_typer(escrow_app, name="escrow", no_args_is_help=True)
    from .cli_pilot import attempt_run_command, pilot_app  # noqa: PLC0415

    attempt_app.command("run")(attempt_run_command)
    app.add_typer(pilot_app, name="pilot", no_args_is_help=True)
    from .cli_document import document_app  # noqa: PLC0415

    app.add_typer(document_app, name="document", no_args_is_help=True)
    from .cli_service import serve_command, service_app  # noqa: PLC0415

    app.add_typer(service_app, name="service", no_args_is_help=True)
    app.command("serve")(serve_command)

out = Console()
err = Console(stderr=True, soft_wrap=True)

CatalogueOpt = Annotated[
    Path,
    typer.Option("--catalogue", help="Task-class file or folder.", envvar="TRIZ_EVAL_CATALOGUE"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def _emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def _find(catalogue: Path, task_class: str) -> TaskClass:
    classes = load_catalogue(catalogue)
    if task_class not in classes:
        raise InputError(f"unknown task class {task_class!r}; known: {', '.join(sorted(classes))}")
    return classes[task_class]


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"triz-eval {__version__}")
        raise typer.Exit


# -- catalogue ------------------------------------------------------------------------
@catalogue_app.command("list")
def catalogue_list(catalogue: CatalogueOpt = BUNDLED_CATALOGUE, as_json: JsonOpt = False) -> None:
    """List the task classes with their rules versions."""
    classes = load_catalogue(catalogue)
    rows = [
        {
            "id": tc.id,
            "title": tc.title,
            "rules_version": rules_version(tc),
            "model": tc.formula.model.value,
            "mode": tc.formula.mode.value,
            "confirmation": tc.confirmation.kind,
        }
        for tc in classes.values()
    ]
    if as_json:
        _emit_json(rows)
        return
    table = Table(title="Task classes")
    for col in ("id", "rules version", "model", "mode", "confirmation", "title"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["id"], r["rules_version"][:12], r["model"], r["mode"], r["confirmation"], r["title"]
        )
    out.print(table)


@catalogue_app.command("show")
def catalogue_show(
    task_class: Annotated[str, typer.Argument(help="Task-class id.")],
    version: Annotated[
        str | None, typer.Option(help="A published rules version (64 hex) instead of the file.")
    ] = None,
    store: Annotated[Path, typer.Option(help="Store of published versions.")] = BUNDLED_STORE,
    catalogue: CatalogueOpt = BUNDLED_CATALOGUE,
) -> None:
    """Print a task class as canonical-order JSON (the current file, or a published version)."""
    tc = RulesStore(store).load(task_class, version) if version else _find(catalogue, task_class)
    _emit_json({"rules_version": rules_version(tc), "task_class": tc.model_dump(mode="json")})


@catalogue_app.command("validate")
def catalogue_validate(
    path: Annotated[Path, typer.Argument(help="File or folder.")] = BUNDLED_CATALOGUE,
    as_json: JsonOpt = False,
) -> None:
    """Check task-class files; report every problem as file:line: field: message (exit 2)."""
    files = catalogue_files(path)
    if not files:
        raise InputError(f"{path}: no task-class files (*.yaml)")
    results: list[dict[str, Any]] = []
    problems = 0
    for file in files:
        try:
            tc = load_task_class(file)
        except CatalogueError as e:
            problems += len(e.problems)
            problem_lines = [str(p) for p in e.problems]
            results.append({"file": str(file), "valid": False, "problems": problem_lines})
            continue
        results.append(
            {"file": str(file), "valid": True, "id": tc.id, "rules_version": rules_version(tc)}
        )
    if as_json:
        _emit_json({"valid": problems == 0, "files": results})
    else:
        for r in results:
            if r["valid"]:
                out.print(f"[green]ok[/green]   {r['file']}  {r['id']}@{r['rules_version'][:12]}")
            else:
                for p in r["problems"]:
                    err.print(p, markup=False, highlight=False)
        verdict = "valid" if problems == 0 else f"{problems} problem(s)"
        (out if problems == 0 else err).print(f"{len(files)} file(s) checked: {verdict}")
    if problems:
        raise typer.Exit(2)


@catalogue_app.command("schema")
def catalogue_schema(
    what: Annotated[
        str, typer.Option(help="task-class or attempt-inputs.", case_sensitive=False)
    ] = "task-class",
) -> None:
    """Print the JSON Schema of task-class files (for editors) or of signal input files."""
    models: dict[str, Any] = {"task-class": TaskClass, "attempt-inputs": AttemptInputs}
    if what not in models:
        raise InputError(f"--what must be one of {', '.join(models)}")
    _emit_json(models[what].model_json_schema())


@catalogue_app.command("publish")
def catalogue_publish(
    path: Annotated[Path, typer.Argument(help="File or folder.")] = BUNDLED_CATALOGUE,
    store: Annotated[Path, typer.Option(help="Store of published versions.")] = BUNDLED_STORE,
) -> None:
    """Publish the current rules versions into a store (content-addressed, never overwritten)."""
    now = datetime.now(UTC)
    for tc in load_catalogue(path).values():
        version, new = RulesStore(store).publish(tc, published_at=now)
        out.print(f"{'published' if new else 'unchanged'}  {tc.id}@{version}")


# -- signal ---------------------------------------------------------------------------
def _compute(
    catalogue: Path, task_class: str, input_file: Path, started_at: str | None, store: Path
) -> Signal:
    tc = _find(catalogue, task_class)
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


TaskClassOpt = Annotated[str, typer.Option("--task-class", "-t", help="Task-class id.")]
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
StoreOpt = Annotated[
    Path,
    typer.Option(
        "--store",
        help="Published rules versions (default: the bundled store).",
        envvar="TRIZ_EVAL_RULES_STORE",
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
        _emit_json(signal.to_dict())
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
    """Show the transparent breakdown of spec 3.2 as tables."""
    render(out, _compute(catalogue, task_class, input_file, started_at, store))


def main() -> None:
    """Entry point: run the CLI and turn every evaluator error into one line."""
    try:
        _register_trust_record()
        # Standalone mode: typer reports usage errors itself (exit 2) and exits via SystemExit.
        app()
    except EvaluatorError as e:
        err.print(f"triz-eval: error: {e.diagnostics()}", markup=False, highlight=False)
        sys.exit(e.exit_code)
    except Exception as e:
        if os.environ.get("TRIZ_EVAL_DEBUG") == "1":
            raise
        err.print(
            f"triz-eval: internal error: {type(e).__name__}: {e} "
            "(set TRIZ_EVAL_DEBUG=1 for details)",
            markup=False,
            highlight=False,
        )
        sys.exit(70)
