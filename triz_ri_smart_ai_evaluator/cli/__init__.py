"""The ``triz-eval`` command line: one package, one module per command group.

``catalogue`` and ``signal`` (the pure core) load at once; ``ledger``/``witness``/``attempt``/
``escrow`` (:mod:`.ledger`), ``attempt run`` and ``pilot`` (:mod:`.harness`), ``document`` and
``service``/``serve`` are registered on first use by :func:`main`.  Shared options are in
:mod:`.options`.

Every evaluator error is caught in one place (:func:`main`) and printed as one line; bad input
exits with code 2, integrity failures with 3, external failures with 4.  No traceback reaches
the user unless ``TRIZ_EVAL_DEBUG=1`` is set.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from rich.console import Console

from .. import __version__
from ..errors import EvaluatorError
from .catalogue import catalogue_app
from .signal import signal_app

__all__ = ["app", "main"]

app = typer.Typer(
    help="TRIZ-RI Smart AI Evaluator: verified results in, training signals out.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(catalogue_app, name="catalogue", no_args_is_help=True)
app.add_typer(signal_app, name="signal", no_args_is_help=True)


_REGISTERED: list[bool] = []


def _register_trust_record() -> None:
    """Add the lazily imported command groups, once per process (main() may run many times
    in one process, as the in-process CLI tests do)."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    from .ledger import attempt_app, escrow_app, ledger_app, witness_app  # noqa: PLC0415

    app.add_typer(ledger_app, name="ledger", no_args_is_help=True)
    app.add_typer(witness_app, name="witness", no_args_is_help=True)
    app.add_typer(attempt_app, name="attempt", no_args_is_help=True)
    app.add_typer(escrow_app, name="escrow", no_args_is_help=True)
    from .loop import loop_app  # noqa: PLC0415

    app.add_typer(loop_app, name="loop", no_args_is_help=True)
    from .exploit import exploit_app  # noqa: PLC0415

    app.add_typer(exploit_app, name="exploit", no_args_is_help=True)
    from .harness import attempt_run_command, pilot_app  # noqa: PLC0415

    attempt_app.command("run")(attempt_run_command)
    from .swebench import export_report_command, import_predictions_command  # noqa: PLC0415

    attempt_app.command("import-predictions")(import_predictions_command)
    attempt_app.command("export-report")(export_report_command)
    app.add_typer(pilot_app, name="pilot", no_args_is_help=True)
    from .document import document_app  # noqa: PLC0415

    app.add_typer(document_app, name="document", no_args_is_help=True)
    from .audit import audit_app  # noqa: PLC0415

    app.add_typer(audit_app, name="audit", no_args_is_help=True)
    from .report import report_command  # noqa: PLC0415

    app.command("report")(report_command)
    from .service import serve_command, service_app  # noqa: PLC0415

    app.add_typer(service_app, name="service", no_args_is_help=True)
    app.command("serve")(serve_command)

out = Console()
err = Console(stderr=True, soft_wrap=True)


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        out.print(f"triz-eval {__version__}")
        raise typer.Exit


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
