"""``triz-eval pilot feedback-form ...``: run the pilot 02 harness on a candidate, or on every
bundled example candidate (issue 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import InputError
from .ledger.log import DEFAULT_ORIGIN, create_log_key, load_log_signer, open_sqlite_ledger
from .pilot_02_feedback_form import harness
from .pilot_02_feedback_form.examples import bundled_candidates

pilot_app = typer.Typer(help="Pilots: trusted evaluation harnesses for concrete task classes.")
feedback_app = typer.Typer(help="Pilot 02, the feedback form (Flask + SMTP), end to end.")
pilot_app.add_typer(feedback_app, name="feedback-form", no_args_is_help=True)

out = Console()
err = Console(stderr=True)

DbOpt = Annotated[Path, typer.Option("--db", envvar="TRIZ_EVAL_DB", help="Ledger database.")]
KeysOpt = Annotated[
    Path, typer.Option("--keys", envvar="TRIZ_EVAL_KEYS", help="Folder of the log's keys.")
]
OutOpt = Annotated[
    Path, typer.Option("--out", help="Where publication bundles are written (one per attempt).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
SizeOpt = Annotated[int, typer.Option("--size", min=100, help="Control-set size (pilot 6: 100+).")]
DegradedOpt = Annotated[
    bool,
    typer.Option(
        "--unsafe-degraded",
        help="Where namespaces or bwrap are unavailable, run without isolation; the attempt "
        "is labelled degraded and its signal is not training-grade.",
    ),
]


def open_ledger(db: Path, keys: Path) -> Any:
    if not (keys / "log.key").exists():
        create_log_key(keys, origin=DEFAULT_ORIGIN)
        err.print(f"created a log key in {keys}")
    db.parent.mkdir(parents=True, exist_ok=True)
    return open_sqlite_ledger(db, keys)


def progress_bar(console: Console) -> tuple[Progress, harness.Progress]:
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("starting", total=1)

    def update(stage: str, done: int, total: int) -> None:
        bar.update(task, description=stage, completed=done, total=max(total, 1))

    return bar, update


@feedback_app.command("run")
def run_command(
    candidate: Annotated[Path, typer.Option("--candidate", "-c",
                                            help="A unified diff against the starting "
                                            "repository, or a directory with a full copy.")],
    db: DbOpt = Path(".triz-eval/ledger.db"),
    keys: KeysOpt = Path(".triz-eval/keys"),
    out_dir: OutOpt = Path(".triz-eval/runs"),
    size: SizeOpt = 100,
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate one candidate: fix its digest, draw a fresh control set, run it in the sandbox
    against the trusted SMTP receiver, score, record everything in the ledger, publish."""
    if not candidate.exists():
        raise InputError(f"{candidate}: no such candidate")
    store = open_ledger(db, keys)
    try:
        bar, update = progress_bar(err)
        with bar:
            result = harness.run(candidate, store, out_dir, harness.RunOptions(
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


def _print_result(result: harness.RunResult) -> None:
    s = result.summary
    if result.status != "completed":
        out.print(f"[bold red]{result.attempt_id}: errored[/] - {s.get('error')}", highlight=False)
        return
    table = Table(title=f"Pilot 02 run {result.attempt_id}", show_lines=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.metrics.items():
        table.add_row(key, value)
    out.print(table)
    checks = Table(title="Critical checks (external layer)")
    checks.add_column("check")
    checks.add_column("state")
    checks.add_column("first detail", overflow="fold")
    for f in result.findings:
        colour = {"passed": "green", "failed": "red"}.get(f["state"], "yellow")
        checks.add_row(f["id"], f"[{colour}]{f['state']}[/]",
                       (f["details"] or [""])[0][:100])
    out.print(checks)
    out.print(
        f"S = [bold]{s['signal']}[/] ({s['outcome']}); scorer_pass={s['scorer_pass']}; "
        f"public_acceptance={s.get('public_acceptance')}; pilot_pass={s['pilot_pass']} "
        f"(pending: {', '.join(s.get('pilot_pass_pending') or []) or 'nothing'}); "
        f"isolation={s['isolation']}; "
        f"{s['scenarios']} scenarios in {s['seconds']} s",
        highlight=False,
    )
    if s.get("quarantine"):
        out.print(f"[bold red]quarantined:[/] {', '.join(s['quarantine'])}", highlight=False)
    out.print(f"bundle: {result.bundle} (open report.html)", highlight=False)


@feedback_app.command("examples")
def examples_command(
    db: DbOpt = Path(".triz-eval/ledger.db"),
    keys: KeysOpt = Path(".triz-eval/keys"),
    out_dir: OutOpt = Path(".triz-eval/runs"),
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the honest reference candidate and one adversarial candidate per mandatory attack
    of pilot 11; print one row per candidate with the violation the evaluator found."""
    store = open_ledger(db, keys)
    rows = []
    try:
        for example in bundled_candidates():
            bar, update = progress_bar(err)
            with bar:
                update(f"{example.name}", 0, 1)
                result = harness.run(example.diff, store, out_dir, harness.RunOptions(
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
