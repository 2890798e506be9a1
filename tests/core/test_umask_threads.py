"""The process umask is shared by every thread (issue 16 item 5: concurrent pilot runs on two
worker threads all ended errored, bwrap "Permission denied" on the stage's ``etc``).  Nothing
may depend on it: the sandbox stage sets its modes itself, and the SQLite ledger makes its
files private without changing the umask another thread relies on."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.sandbox._bwrap import Stage


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_sandbox_stage_is_readable_whatever_the_umask() -> None:
    old = os.umask(0o077)  # what another thread may have set at this moment
    try:
        stage = Stage(uid=65534, harness_host="10.0.0.1")
    finally:
        os.umask(old)
    try:
        for sub in ("mnt", "mnt/py", "mnt/venv", "mnt/app", "etc", "decoy"):
            assert _mode(stage.path / sub) == 0o755, sub
        assert _mode(stage.path / "etc" / "group") == 0o644
    finally:
        stage.remove()


def test_opening_a_ledger_leaves_the_umask_alone(tmp_path: Path) -> None:
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            current = os.umask(0o022)
            os.umask(current)
            seen.append(current)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for n in range(20):
            SqliteStore.open(tmp_path / f"l{n}.db").close()
    finally:
        stop.set()
        watcher.join()
    assert set(seen) <= {0o022}, f"another thread saw umask {sorted(set(seen))}"
    for n in range(20):
        assert _mode(tmp_path / f"l{n}.db") == 0o600
        for suffix in ("-wal", "-shm"):
            side = tmp_path / f"l{n}.db{suffix}"
            if side.exists():
                assert _mode(side) == 0o600
