"""``triz-eval`` run in this process, for helpers that are not fixtures.

Starting the installed script costs an interpreter and the package's imports (0.5 s alone, a
few seconds on a loaded CI machine) per call; the CLI tests make hundreds of calls.  This runs
the console script's entry function (``cli.main``) instead, as ``tests/conftest.py``'s
``triz_eval`` fixture does, with the environment, working directory and ``sys.argv`` of the run
set for its duration and restored afterwards, and its output captured.  It returns a
``subprocess.CompletedProcess`` so callers written for ``subprocess.run`` keep working.

What depends on being a separate process (the exit code of the real script, a traceback that
must not reach the user, signals) keeps a real subprocess test next to these.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

#: What a plain interpreter does not print (its default warning filters).
_SILENT_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)

#: One run at a time: runs share the environment, the working directory and the streams.
_ONE_AT_A_TIME = threading.Lock()


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None, cwd: Path | str | None) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv = sys.argv
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def call_main(stderr: TextIO) -> int:
    """Call ``cli.main()`` as the console script would: the exit code it ends with (``sys.exit``
    text printed to ``stderr``, exit 1), and on ``stderr`` the warnings a plain interpreter
    would print and the log records of warning level.  The caller sets argv, the environment
    and the streams."""
    from triz_ri_smart_ai_evaluator.cli import main

    code: object = 0
    handler = logging.StreamHandler(stderr)
    handler.setLevel(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        logging.getLogger().addHandler(handler)
        try:
            main()
        except SystemExit as e:
            code = e.code
        finally:
            logging.getLogger().removeHandler(handler)
    for w in caught:
        if not issubclass(w.category, _SILENT_WARNINGS):
            stderr.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    if isinstance(code, str):  # sys.exit("text"): the interpreter prints it, exit 1
        stderr.write(code + "\n")
        code = 1
    assert code is None or isinstance(code, int), code
    return code or 0


def invoke(args: Sequence[object], env: Mapping[str, str] | None,
           cwd: Path | str | None) -> int:
    """``triz-eval ARGS`` on the current streams, with ``env`` (the whole environment, as for
    ``subprocess.run``) and ``cwd`` set for the run and restored afterwards; its exit code."""
    with _ONE_AT_A_TIME, _environment(env, cwd):
        sys.argv = ["triz-eval", *map(str, args)]
        return call_main(sys.stderr)


def run_cli(*args: object, env: Mapping[str, str] | None = None,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """``triz-eval ARGS`` in this process: exit code, stdout and stderr, as ``subprocess.run``
    with ``capture_output=True, text=True`` would give them."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(args, env, cwd)
    return subprocess.CompletedProcess(["triz-eval", *map(str, args)], code, out.getvalue(),
                                       err.getvalue())
