"""``triz-eval document ...``: the blind verifier gate of seed 002 (issue 5).

``run`` takes a task through planner, executor and gate into the ledger; ``verify`` checks one
draft against a brief (the mechanical layer always, the model layer when an endpoint is given);
``calibrate`` measures the model layer on a labelled corpus (issue 13, seed 002 checklist 4).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .._io import read_document
from ..errors import ExternalError, InputError
from ..verifier.calibrate import Confusion, calibrate, load_corpus, report_json
from ..verifier.chat import ChatModel, Endpoint
from ..verifier.client import ChatClient
from ..verifier.gate import Inspection, VerifierGate, mechanical_issues
from ..verifier.input_files import load_brief, load_draft
from ..verifier.mechanical import MechanicalReport, check_draft
from ..verifier.pipeline import DocumentRun, load_task, run_document
from ..verifier.report import publish
from .harness import open_ledger, progress_bar
from .options import DEFAULT_DB, DEFAULT_KEYS, DbOpt, JsonOpt, KeysOpt

document_app = typer.Typer(help="The blind verifier gate for multi-step document generation.")
out = Console()
err = Console(stderr=True)


@document_app.command("run")
def run_command(
    task: Annotated[Path, typer.Option("--task", "-t", help="Task file (YAML or JSON): the "
                                       "task, a brief or a planner, and the role endpoints.")],
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    out_dir: Annotated[Path, typer.Option("--out", help="Where run folders are written.")] = (
        Path(".triz-eval/documents")),
    source: Annotated[list[Path] | None, typer.Option(
        "--source", help="A file for the executor only (an upload or a retrieved source; "
        "repeatable). The verifier never sees it.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run planner, executor and verifier step by step; record every draft, verdict,
    re-render, caveat and halt in the ledger; write run.json and an HTML report.

    Exit 0 when the run finished, 3 when it halted or errored."""
    loaded = load_task(task, extra_sources=source or ())
    clients: dict[str, ChatClient] = {role: ChatClient(endpoint)
                                      for role, endpoint in loaded.endpoints.items()}
    models: dict[str, ChatModel] = dict(clients)
    store = open_ledger(db, keys)
    try:
        bar, update = progress_bar(err)
        with bar:
            result = run_document(loaded, store, models, progress=update)
    finally:
        store.close()
        for client in clients.values():
            client.close()
    folder = publish(result, out_dir)
    if as_json:
        sys.stdout.write(json.dumps({**result.to_json(), "folder": str(folder)},
                                    ensure_ascii=False, indent=2) + "\n")
    else:
        _print_run(result, folder)
    if result.halted or result.error:
        raise typer.Exit(3)


def _print_run(run: DocumentRun, folder: Path) -> None:
    table = Table(title=f"Document run {run.attempt_id}")
    for col in ("step", "end", "inspections", "issues at the end"):
        table.add_column(col, overflow="fold")
    for step in run.steps:
        final = step.final
        issues = "" if final is None else ", ".join(sorted({i.kind for i in final.issues()}))
        colour = {"released": "green", "released_with_caveat": "yellow"}.get(step.end, "red")
        table.add_row(step.step, f"[{colour}]{step.end}[/]", str(len(step.inspections)),
                      issues or "-")
    out.print(table)
    for key, value in run.values.items():
        out.print(f"{key} = {value}", highlight=False)
    for key, value in run.checks.items():
        out.print(f"{key}: {value}", highlight=False)
    if run.error:
        out.print(f"[bold red]errored:[/] {run.error}", highlight=False)
    elif run.halted:
        out.print(f"[bold red]halted:[/] {run.halted}", highlight=False)
    if run.signal is not None:
        out.print(f"S = [bold]{run.signal.value}[/] ({run.signal.outcome.value})",
                  highlight=False)
    out.print(f"report: {folder / 'report.html'}", highlight=False)


class _NoJournal:
    """``document verify`` checks one draft and records nothing."""

    def store(self, what: str, data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def transition(self, step: str, state: str, data: dict[str, Any]) -> None:
        """Nothing is recorded."""

    def injection(self, step: str, data: dict[str, Any]) -> None:
        """Nothing is recorded (the signal is printed)."""


@document_app.command("verify")
def verify_command(
    brief: Annotated[Path, typer.Option("--brief", "-b", help="The brief (YAML or JSON).")],
    draft: Annotated[Path, typer.Option("--draft", "-d", help="The draft: a triz-draft/1 "
                                        "YAML/JSON file, or a .md/.txt file with --step.")],
    step: Annotated[str | None, typer.Option("--step", help="The brief step of a plain-text "
                                             "draft.")] = None,
    verifier: Annotated[Path | None, typer.Option(
        "--verifier", help="Endpoint file (YAML/JSON: base_url, model, api_key_env, ...) of "
        "the verifier model; without it only the mechanical layer runs.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check one draft against its brief.  Exit 0 when it passes, 1 when anything was found,
    2 for bad input, 4 when the verifier model gave no verdict after its one retry."""
    the_brief = load_brief(brief)
    the_draft = load_draft(draft, step=step)
    the_brief.step(the_draft.step)
    if verifier is None:
        report = check_draft(the_brief, the_draft)
        _print_verify(report, None, as_json)
        if not report.passed:
            raise typer.Exit(1)
        return
    endpoint = Endpoint.from_mapping(_mapping(verifier))
    with ChatClient(endpoint) as client:
        gate = VerifierGate(the_brief, model=client, journal=_NoJournal())
        inspection = gate.inspect(the_draft.step, the_draft.text)
    _print_verify(inspection.mechanical, inspection, as_json)
    if not inspection.complete:
        reasons = "; ".join(c.reason or c.outcome for c in inspection.calls)
        raise ExternalError(f"the verifier gave no verdict after one retry ({reasons})")
    if not inspection.passed:
        raise typer.Exit(1)


def _mapping(path: Path) -> dict[str, Any]:
    doc = read_document(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping of endpoint fields")
    return doc


def _print_verify(report: MechanicalReport, inspection: Inspection | None, as_json: bool) -> None:
    if as_json:
        doc = inspection.to_json() if inspection is not None else {
            "passed": report.passed, "mechanical": report.to_json(),
            "model_layer": "not run (no --verifier)"}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return
    issues = inspection.issues() if inspection is not None else mechanical_issues(report)
    table = Table(title="Findings")
    for col in ("layer", "kind", "quote", "detail"):
        table.add_column(col, overflow="fold")
    for issue in issues:
        table.add_row(issue.layer, issue.kind, issue.quote, issue.explanation)
    if issues:
        out.print(table)
    for signal in report.injection:
        out.print(f"[yellow]injection signal[/] ({signal.kind}): {signal.quote[:80]!r} "
                  "- recorded, never changes the decision", highlight=False)
    for stripped in report.normalisation.stripped:
        out.print(f"normalisation stripped: {stripped.to_json()}", highlight=False)
    passed = report.passed if inspection is None else inspection.passed
    layer = "" if inspection is not None else " (mechanical layer only: no --verifier)"
    out.print(("[green]PASS[/]" if passed else "[red]FAIL[/]") + layer, highlight=False)


@document_app.command("calibrate")
def calibrate_command(
    corpus: Annotated[Path, typer.Option("--corpus", "-c", help="Labelled corpus (JSON Lines: "
                                         "brief, step, draft, expected pass|fail).")],
    verifier: Annotated[Path | None, typer.Option(
        "--verifier", help="Endpoint file (YAML/JSON: base_url, model, api_key_env, ...) of "
        "the verifier model, as for document verify.")] = None,
    task: Annotated[Path | None, typer.Option(
        "--task", "-t", help="A document run task file: its roles.verifier endpoint is "
        "used.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the verifier model on every labelled draft and print the confusion table
    (positive class: fail): TP, FP, TN, FN, precision, recall, the false-positive share, and
    the drafts with no verdict after the one retry.  Exit 0 with the table, 2 for bad input."""
    rows = load_corpus(corpus)
    if task is not None and verifier is None:
        endpoint = load_task(task).endpoints["verifier"]
    elif verifier is not None and task is None:
        endpoint = Endpoint.from_mapping(_mapping(verifier))
    else:
        raise InputError("give exactly one of --verifier ENDPOINT and --task TASK")
    bar, update = progress_bar(err)
    with ChatClient(endpoint) as client, bar:
        table, outcomes = calibrate(client, rows,
                                    progress=lambda done, total: update("drafts", done, total))
    if as_json:
        sys.stdout.write(report_json(table, outcomes) + "\n")
        return
    _print_confusion(table, len(outcomes))


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _print_confusion(table: Confusion, drafts: int) -> None:
    grid = Table(title=f"Verifier calibration over {drafts} labelled drafts (positive: fail)")
    for col in ("", "verdict fail", "verdict pass"):
        grid.add_column(col)
    grid.add_row("expected fail", f"TP {table.tp}", f"FN {table.fn}")
    grid.add_row("expected pass", f"FP {table.fp}", f"TN {table.tn}")
    out.print(grid)
    out.print(f"precision = {_share(table.precision)}  recall = {_share(table.recall)}  "
              f"false-positive share = {_share(table.false_positive_share)}", highlight=False)
    out.print(f"unparseable = {table.unparseable}  crashed = {table.crashed}", highlight=False)
