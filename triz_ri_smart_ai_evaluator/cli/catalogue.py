"""``triz-eval catalogue ...``: task classes - list, show, validate, publish, JSON Schema - and
the residual-risk log (spec 11.24)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..errors import InputError
from ..rules import residual_risk
from ..rules.loader import (
    BUNDLED_CATALOGUE,
    CatalogueError,
    catalogue_files,
    load_catalogue,
    load_task_class,
)
from ..rules.published import BUNDLED_STORE, RulesStore
from ..rules.task_class import TaskClass
from ..rules.versions import rules_version
from ..signal.inputs import AttemptInputs
from .options import CatalogueOpt, JsonOpt

catalogue_app = typer.Typer(help="Task classes: list, show, validate, publish, JSON Schema.")

out = Console()
err = Console(stderr=True, soft_wrap=True)


def emit_json(value: Any) -> None:
    """``value`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def find_task_class(catalogue: Path, task_class: str) -> TaskClass:
    """The task class ``task_class`` of ``catalogue``.  Raises InputError naming the known ones."""
    classes = load_catalogue(catalogue)
    if task_class not in classes:
        raise InputError(f"unknown task class {task_class!r}; known: {', '.join(sorted(classes))}")
    return classes[task_class]


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
        emit_json(rows)
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
    tc = (RulesStore(store).load(task_class, version) if version
          else find_task_class(catalogue, task_class))
    emit_json({"rules_version": rules_version(tc), "task_class": tc.model_dump(mode="json")})


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
        emit_json({"valid": problems == 0, "files": results})
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
    emit_json(models[what].model_json_schema())


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




@catalogue_app.command("risks")
def catalogue_risks(
    path: Annotated[Path, typer.Option("--file", help="A residual-risk log file.")] = (
        residual_risk.BUNDLED_RISKS),
    as_json: JsonOpt = False,
) -> None:
    """Print the residual-risk log (spec 11.24): each known limit with its design boundary,
    owner, the test that would detect it crossing, and the classes it applies to."""
    if as_json:
        emit_json(residual_risk.as_dicts(path))
        return
    lines = residual_risk.text_lines(path)
    # Plain lines, not rich: one entry is one line, however wide the terminal.
    sys.stdout.write(f"Residual-risk log (spec 11.24): {len(lines)} entries\n")
    sys.stdout.writelines(f"- {line}\n" for line in lines)
