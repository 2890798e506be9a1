"""The installed ``triz-eval`` in a subprocess, on a ledger and keys of its own under ``root``:
how the acceptance tests drive the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"


def cli(root: Path, *args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``triz-eval *args`` in ``root`` with ``TRIZ_EVAL_DB``/``TRIZ_EVAL_KEYS`` there."""
    env = {**os.environ, "TRIZ_EVAL_DB": str(root / "ledger.db"),
           "TRIZ_EVAL_KEYS": str(root / "keys"), "COLUMNS": "200"}
    return subprocess.run([str(TRIZ_EVAL), *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=root, timeout=timeout, check=False)
