"""``triz-eval attempt run``: any task class with a registered harness, through the generic
runner (issue 14 item 1); ``triz-eval pilot feedback-form ...``: pilot 02 on a candidate, or on
every bundled example candidate (issue 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import InputError
from ..harnesses import runner
from ..harnesses.protocol import Progress as ProgressFn
from ..harnesses.protocol import RunOptions, RunResult
from ..harnesses.registry import harness_for
from ..ledger.log import DEFAULT_ORIGIN, create_log_key, load_log_signer, open_sqlite_ledger
from ..pilot_02_feedback_form.examples import bundled_candidates
from .options import (
    DEFAULT_DB,
    DEFAULT_KEYS,
    DEFAULT_RUNS,
    DbOpt,
    DegradedOpt,
    JsonOpt,
    KeysOpt,
    OutOpt,
    SizeOpt,
)

PILOT_02 = "pilot_02_feedback_form"

pilot_app = typer.Typer(help="Pilots: trusted evaluation harnesses for concrete task classes.")
feedback_app = typer.Typer(help="Pilot 02, the feedback form (Flask + SMTP), end to end.")
pilot_app.add_typer(feedback_app, name="feedback-form", no_args_is_help=True)

out = Console()
err = Console(stderr=True)

def open_ledger(db: Path, keys: Path) -> Any:
    if not (keys / "log.key").exists():
        create_log_key(keys, origin=DEFAULT_ORIGIN)
        err.print(f"created a log key in {keys}")
    db.parent.mkdir(parents=True, exist_ok=True)
    return open_sqlite_ledger(db, keys)


def progress_bar(console: Console) -> tuple[Progress, ProgressFn]:
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("starting", total=1)

    def update(stage: str, done: int, total: int) -> None:
        bar.update(task, description=stage, completed=done, total=max(total, 1))

    return bar, update


def attempt_run_command(
    task_class: Annotated[str, typer.Option(
        "--task-class", "-t", help="A task class with a registered harness (see the error "
        "for the list).")],
    candidate: Annotated[Path, typer.Option("--candidate", "-c",
                                            help="The candidate, in the form the class "
                                            "takes (for example a unified diff).")],
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    out_dir: OutOpt = DEFAULT_RUNS,
    size: Annotated[int | None, typer.Option(
        "--size", min=1, help="Control-set size (default: the class's minimum).")] = None,
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate one candidate of any task class with a registered harness: fix its digest,
    draw a fresh control set, run it, judge it, record everything in the ledger, publish."""
    harness = harness_for(task_class)
    _run_and_print(harness.task_class, candidate, db, keys, out_dir,
                   harness.min_size if size is None else size, unsafe_degraded, as_json)


@feedback_app.command("run")
def run_command(
    candidate: Annotated[Path, typer.Option("--candidate", "-c",
                                            help="A unified diff against the starting "
                                            "repository, or a directory with a full copy.")],
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    out_dir: OutOpt = DEFAULT_RUNS,
    size: SizeOpt = 100,
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate one candidate: fix its digest, draw a fresh control set, run it in the sandbox
    against the trusted SMTP receiver, score, record everything in the ledger, publish."""
    _run_and_print(PILOT_02, candidate, db, keys, out_dir, size, unsafe_degraded, as_json)


def _run_and_print(task_class: str, candidate: Path, db: Path, keys: Path, out_dir: Path,
                   size: int, unsafe_degraded: bool, as_json: bool) -> None:
    if not candidate.exists():
        raise InputError(f"{candidate}: no such candidate")
    store = open_ledger(db, keys)
    try:
        bar, update = progress_bar(err)
        with bar:
            result = runner.run_class(task_class, candidate, store, out_dir, RunOptions(
                size=size, unsafe_degraded=unsafe_degraded, progress=update,
                signer=load_log_signer(keys)))
    finally:
        store.close()
    if as_json:
        sys.stdout.write(json.dumps({**result.summary, "bundle": str(result.bundle),
                                     "findings": result.findings}, ensure_ascii=False,
                                    indent=2) + "\n")
    else:
        _print_result(result)
    if result.status != "completed":
        raise typer.Exit(3)


def _print_result(result: RunResult) -> None:
    s = result.summary
    if result.status != "completed":
        out.print(f"[bold red]{result.attempt_id}: errored[/] - {s.get('error')}", highlight=False)
        return
    table = Table(title=f"{s.get('task_class', PILOT_02)} run {result.attempt_id}",
                  show_lines=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.metrics.items():
        table.add_row(key, value)
    out.print(table)
    checks = Table(title="Checks (critical layer)")
    checks.add_column("check")
    checks.add_column("state")
    checks.add_column("first detail", overflow="fold")
    for f in result.findings:
        colour = {"passed": "green", "failed": "red"}.get(f["state"], "yellow")
        checks.add_row(f["id"], f"[{colour}]{f['state']}[/]",
                       (f["details"] or [""])[0][:100])
    out.print(checks)
    pilot = (f"scorer_pass={s['scorer_pass']}; "
             f"public_acceptance={s.get('public_acceptance')}; pilot_pass={s['pilot_pass']} "
             f"(pending: {', '.join(s.get('pilot_pass_pending') or []) or 'nothing'}); "
             if "pilot_pass" in s else "")
    out.print(
        f"S = [bold]{s['signal']}[/] ({s['outcome']}); {pilot}isolation={s['isolation']}; "
        f"{s['scenarios']} scenarios in {s['seconds']} s",
        highlight=False,
    )
    if s.get("quarantine"):
        out.print(f"[bold red]quarantined:[/] {', '.join(s['quarantine'])}", highlight=False)
    report = " (open report.html)" if (result.bundle / "report.html").is_file() else ""
    out.print(f"bundle: {result.bundle}{report}", highlight=False)


@feedback_app.command("examples")
def examples_command(
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    out_dir: OutOpt = DEFAULT_RUNS,
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the honest reference candidate and one adversarial candidate per mandatory attack
    of pilot 11; print one row per candidate with the violation the evaluator found."""
    harness = harness_for(PILOT_02)
    store = open_ledger(db, keys)
    rows = []
    try:
        for example in bundled_candidates():
            bar, update = progress_bar(err)
            with bar:
                update(f"{example.name}", 0, 1)
                result = runner.run(harness, example.diff, store, out_dir, RunOptions(
                    unsafe_degraded=unsafe_degraded, progress=update,
                    signer=load_log_signer(keys)))
            rows.append(example.judge(result))
            if not as_json:
                r = rows[-1]
                mark = 'as expected' if r['as_expected'] else 'NOT as expected'
                err.print(f"{r['candidate']}: S={r['signal']} found {r['found']} ({mark})",
                          highlight=False)
    finally:
        store.close()
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    else:
        table = Table(title="Pilot 02 example candidates")
        for col in ("candidate", "S", "expected", "found", "as expected"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r["candidate"], r["signal"], r["expected"], ", ".join(r["found"]),
                          "[green]yes[/]" if r["as_expected"] else "[red]NO[/]")
        out.print(table)
    if not all(r["as_expected"] for r in rows):
        raise typer.Exit(1)
