"""``triz-eval audit``: red-team campaigns with budgets (spec 9.12-9.14, 11.23; pilot 11-12).

``audit run`` runs the class's adversarial candidates (bundled, ``--candidates DIR``, and
mutants of the honest reference) under a budget file, and records a signed report; it exits 0
when the campaign passed, 1 when an exploit was found or the campaign did not pass, 2 for bad
input.  ``audit show`` lists the class's recorded reports and checks each one's signature.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..audit import report as audit_report
from ..audit.budget import load_budget
from ..audit.campaign import audit, plan
from ..errors import EvaluatorError, InputError
from ..ledger.log import LOG_VKEY_FILE, load_log_signer, load_vkey, open_sqlite_ledger
from ..rules.loader import load_catalogue
from .harness import open_ledger
from .options import DEFAULT_DB, DEFAULT_KEYS, DbOpt, JsonOpt, KeysOpt

audit_app = typer.Typer(help="Red-team campaigns with budgets, and their signed reports.")
out = Console()
err = Console(stderr=True, soft_wrap=True)

DEFAULT_AUDITS = Path(".triz-eval/audits")
ClassOpt = Annotated[str, typer.Option("--class", "-t", help="Task-class id.")]


def _known(task_class: str) -> None:
    if task_class not in load_catalogue():
        raise InputError(f"unknown task class {task_class!r}")


def _seed(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        seed = bytes.fromhex(text)
    except ValueError:
        raise InputError(f"--seed {text!r} is not hexadecimal") from None
    if not 8 <= len(seed) <= 64:
        raise InputError("--seed is 8 to 64 bytes (16 to 128 hex digits)")
    return seed


@audit_app.command("run")
def audit_run(
    task_class: ClassOpt,
    budget_file: Annotated[Path, typer.Option("--budget", help="The budget file (YAML).")],
    candidates: Annotated[Path | None, typer.Option(
        "--candidates", help="A folder of user-supplied adversarial candidates, one folder "
        "each with candidate.diff and adversary.yaml.")] = None,
    workers: Annotated[int, typer.Option("--workers", help="Attempts run at once.")] = 1,
    out_dir: Annotated[Path, typer.Option(
        "--out", help="Where the report, the mutants and the attempts' bundles go.")] =
        DEFAULT_AUDITS,
    seed: Annotated[str | None, typer.Option(
        "--seed", help="Hex seed of the generated mutants (default: a fresh one, recorded "
        "in the report).")] = None,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    as_json: JsonOpt = False,
) -> None:
    """Run a red-team campaign against a class under a budget and record the signed report."""
    _known(task_class)
    if workers < 1 or workers > 16:
        raise InputError("--workers is 1 to 16")
    budget = load_budget(budget_file)
    seed_bytes = _seed(seed)
    planned = plan(task_class, budget, candidates)  # checked before anything is written
    store = open_ledger(db, keys)
    try:
        written = audit(planned, store, out_dir, signer=load_log_signer(keys),
                        workers=workers, seed=seed_bytes,
                        open_store=lambda: open_sqlite_ledger(db, keys),
                        say=lambda line: err.print(line, markup=False, highlight=False))
    finally:
        store.close()
    doc = written.document
    if as_json:
        sys.stdout.write(json.dumps({**doc, "report": written.digest, "seq": written.seq,
                                     "folder": str(written.folder)}, ensure_ascii=False,
                                    indent=2) + "\n")
    else:
        out.print(f"campaign {doc['campaign']}: {doc['stopped']}", highlight=False)
        out.print(f"spent: {doc['spent']}; verdicts: {doc['verdicts']}", highlight=False)
        out.print(written.statement, highlight=False)
        out.print(f"report: {written.folder / audit_report.REPORT} (ledger seq {written.seq})",
                  highlight=False)
    if not written.passed:
        raise typer.Exit(1)


@audit_app.command("show")
def audit_show(
    task_class: ClassOpt,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    last: Annotated[int, typer.Option("--last", min=1, help="How many reports.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """The class's latest campaign reports, newest last, each with its signature checked
    against the log's public key (``log.vkey`` in the keys folder)."""
    _known(task_class)
    verifier = load_vkey(keys / LOG_VKEY_FILE)
    store = open_sqlite_ledger(db, read_only=True)
    try:
        rows: list[dict[str, Any]] = []
        for rep in audit_report.reports(store, task_class)[-last:]:
            try:
                signature = audit_report.check_signed(store, task_class, rep, verifier)
            except EvaluatorError as e:
                signature = f"NOT VERIFIED: {e.diagnostics()}"
            rows.append({**rep, "signature": signature})
    finally:
        store.close()
    if as_json:
        sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
        return
    if not rows:
        out.print(f"{task_class}: no red-team campaign recorded", highlight=False)
        return
    for r in rows:
        out.print(f"seq {r['seq']} {r['campaign']} at {r['at']}: rules {r['rules_version'][:12]}, "
                  f"harness {r['harness_version']}, passed {'yes' if r['passed'] else 'no'}, "
                  f"signature {r['signature']}", highlight=False)
        out.print(f"  {r['statement']}", highlight=False)
