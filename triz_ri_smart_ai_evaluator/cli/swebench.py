"""``triz-eval attempt import-predictions`` and ``attempt export-report``: SWE-bench-style
predictions in, SWE-bench's report shape out (issue 16 item 3; docs/swebench.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..integrations import swebench
from ..ledger.log import load_log_signer
from .harness import open_ledger, progress_bar
from .options import (
    DEFAULT_DB,
    DEFAULT_KEYS,
    DEFAULT_RUNS,
    DbOpt,
    DegradedOpt,
    JsonOpt,
    KeysOpt,
    OutOpt,
)

out = Console()
err = Console(stderr=True)

RunIdOpt = Annotated[str, typer.Option("--run-id", help="A name for this evaluation run "
                                       "(SWE-bench's run_id): export-report selects by it.")]
ClassOpt = Annotated[str, typer.Option(
    "--task-class", "-t", help="The patch-task class that grades every prediction.")]
DEFAULT_CLASS = "defect_fix_delayed_confirmation"


def import_predictions_command(
    predictions: Annotated[Path, typer.Argument(
        help="Predictions: .jsonl, or .json as a list or an object keyed by instance_id; "
        "each with instance_id, model_patch, model_name_or_path.")],
    run_id: RunIdOpt,
    task_class: ClassOpt = DEFAULT_CLASS,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    out_dir: OutOpt = DEFAULT_RUNS,
    unsafe_degraded: DegradedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Record every prediction as an attempt of the task class and run its harness.  The whole
    file is checked first; empty patches are recorded (never dropped)."""
    found = swebench.read_predictions(predictions, task_class)
    store = open_ledger(db, keys)
    try:
        bar, update = progress_bar(err)
        with bar:
            done = swebench.import_predictions(
                store, found, task_class=task_class, run_id=run_id, out=out_dir,
                signer=load_log_signer(keys), progress=update, unsafe_degraded=unsafe_degraded)
    finally:
        store.close()
    rows = [{"instance_id": d.instance_id, "attempt_id": d.attempt_id, "status": d.status}
            for d in done]
    if as_json:
        sys.stdout.write(json.dumps({"run_id": run_id, "imported": rows}, indent=2) + "\n")
        return
    table = Table(title=f"run {run_id}: {len(rows)} predictions imported")
    for column in ("instance_id", "attempt_id", "status"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["instance_id"], row["attempt_id"], row["status"])
    out.print(table)
    out.print(f"next: triz-eval attempt export-report --run-id {run_id}")


def export_report_command(
    run_id: RunIdOpt,
    model: Annotated[str | None, typer.Option(
        "--model", help="The model_name_or_path to report (needed when the run has "
        "several; SWE-bench writes one report per model and run).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the report here (default: "
        "<model>.<run-id>.json in the current folder, SWE-bench's name).")] = None,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    as_json: JsonOpt = False,
) -> None:
    """Write SWE-bench's report (schema_version 2) for one imported run, infrastructure
    failures kept apart from the model's own failures."""
    store = open_ledger(db, keys)
    try:
        data = swebench.report(store, run_id, model)
    finally:
        store.close()
    name = str(data["triz"]["model_name_or_path"]).replace("/", "__")
    target = output or Path(f"{name}.{run_id}.json")
    swebench.write_report(data, target)
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    out.print(f"{target}: {data['resolved_instances']} resolved, "
              f"{data['unresolved_instances']} unresolved, "
              f"{data['empty_patch_instances']} empty patches, "
              f"{data['error_instances']} infrastructure errors, "
              f"{len(data['incomplete_ids'])} incomplete, {len(data['withheld_ids'])} withheld "
              f"of {data['submitted_instances']} submitted")
