"""The typer option aliases the ``triz-eval`` command groups share, each defined once.

An alias fixes the flag, its environment variable and its help text; the default stays with the
command (``db: DbOpt = DEFAULT_DB``), so ``--help`` shows it as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_DB = Path(".triz-eval/ledger.db")
DEFAULT_KEYS = Path(".triz-eval/keys")
DEFAULT_RUNS = Path(".triz-eval/runs")

DbOpt = Annotated[Path, typer.Option("--db", envvar="TRIZ_EVAL_DB", help="Ledger database.")]
KeysOpt = Annotated[
    Path, typer.Option("--keys", envvar="TRIZ_EVAL_KEYS", help="Folder of the log's keys.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
OutOpt = Annotated[
    Path, typer.Option("--out", help="Where publication bundles are written (one per attempt).")
]
CatalogueOpt = Annotated[
    Path,
    typer.Option("--catalogue", help="Task-class file or folder.", envvar="TRIZ_EVAL_CATALOGUE"),
]
StoreOpt = Annotated[
    Path,
    typer.Option(
        "--store",
        help="Published rules versions (default: the bundled store).",
        envvar="TRIZ_EVAL_RULES_STORE",
    ),
]
TaskClassOpt = Annotated[str, typer.Option("--task-class", "-t", help="Task-class id.")]
SizeOpt = Annotated[int, typer.Option("--size", min=100, help="Control-set size (pilot 6: 100+).")]
DegradedOpt = Annotated[
    bool,
    typer.Option(
        "--unsafe-degraded",
        help="Where namespaces or bwrap are unavailable, run without isolation; the attempt "
        "is labelled degraded and its signal is not training-grade.",
    ),
]
