"""``triz-eval report``: the ledger as one static HTML page (issue 16 item 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .._io import write_atomic
from ..ledger.log import open_sqlite_ledger
from ..report.dashboard import gather, render
from .options import DEFAULT_DB, DEFAULT_KEYS, DbOpt, KeysOpt

err = Console(stderr=True)


def report_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] =
    Path("triz-report.html"),
    title: Annotated[str, typer.Option("--title", help="The page's title.")] =
    "Evaluator ledger",
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
) -> None:
    """Write one static HTML page for the ledger: signals over time with the divergence
    monitor's band, the outcome mix, quarantined awards, red-team campaigns and each attempt's
    breakdown (one file, no server; docs/dashboard.md)."""
    store = open_sqlite_ledger(db, keys)
    try:
        with err.status("reading the ledger"):
            view = gather(store)
    finally:
        store.close()
    page = render(view, title=title)
    write_atomic(out, page.encode("utf-8"))
    err.print(f"{out}: {len(view.attempts)} attempts, {view.size} events, "
              f"{len(page) // 1024} KiB", highlight=False)
