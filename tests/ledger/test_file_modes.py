"""Issue 11 item 7: the ledger's files are the owner's alone, and ``ledger verify`` trusts only
the witness's public key it is given."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.ledger.checkpoint import generate_signer
from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy

AT = "2025-03-01T12:00:00.000000Z"
TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"


Result = subprocess.CompletedProcess[str] | CliResult


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(TRIZ_EVAL), *map(str, args)], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def in_process(triz_eval: Callable[..., CliResult]) -> Callable[..., CliResult]:
    """``run`` in process (``cli.main``), in this environment as the subprocess inherits it."""

    def run_main(*args: str | Path) -> CliResult:
        return triz_eval(*args, env=dict(os.environ))

    return run_main


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_database_wal_and_shm_are_created_0600_under_a_permissive_umask(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    old = os.umask(0o022)
    try:
        signer = generate_signer("modes.test/log")
        store = SqliteStore.open(db, policy=CheckpointPolicy(signer, signer.name))
        store.append([NewEvent.make("comment.added", {"text": "event 1"}, actor="a", at=AT)])
        files = [p for p in tmp_path.iterdir() if p.name.startswith("ledger.db")]
        assert {p.name for p in files} >= {"ledger.db", "ledger.db-wal", "ledger.db-shm"}
        assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
        store.close()
    finally:
        os.umask(old)
    assert os.umask(old) == old  # the process umask is left as it was


def test_an_existing_0644_database_is_made_0600_on_open(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    SqliteStore.open(db).close()
    db.chmod(0o644)
    SqliteStore.open(db).close()
    assert _mode(db) == 0o600


def _home(tmp_path: Path, run: Callable[..., Result] = run) -> tuple[Path, Path, Path]:
    db, keys, witness = tmp_path / "ledger.db", tmp_path / "keys", tmp_path / "witness"
    assert run("ledger", "init", "--db", db, "--keys", keys).returncode == 0
    assert run("witness", "init", "--dir", witness).returncode == 0
    return db, keys, witness


@pytest.mark.parametrize(("flags", "needle"), [
    (["--witness", "{witness}"], "--witness-vkey"),
    (["--witness-vkey", "{witness}/witness.vkey"], "--witness"),
])
def test_verify_refuses_a_witness_without_its_public_key_and_a_key_without_a_witness(
        tmp_path: Path, flags: list[str], needle: str,
        in_process: Callable[..., CliResult]) -> None:
    db, keys, witness = _home(tmp_path, in_process)
    args = [f.format(witness=witness) for f in flags]
    result = in_process("ledger", "verify", "--db", db, "--keys", keys, *args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_verify_with_the_witness_key_says_how_much_the_witness_covers(tmp_path: Path) -> None:
    db, keys, witness = _home(tmp_path)
    result = run("ledger", "verify", "--db", db, "--keys", keys, "--witness", witness,
                 "--witness-vkey", witness / "witness.vkey")
    assert result.returncode == 0, result.stderr
    assert "the witness covers 0 events, 0 after its last cosignature" in " ".join(
        result.stdout.split())


@pytest.mark.parametrize(("payload", "needle"), [
    ({"start": 2**63 - 1}, "start"),
    ({"start": 2**64}, "start"),
    ({"start": 2**62, "limit": 1000}, None),
    ({"start": 1, "limit": 2**63}, "limit"),
])
def test_an_auditor_read_far_past_the_end_is_a_one_line_refusal(
        tmp_path: Path, payload: dict[str, int], needle: str | None) -> None:
    from tests.access.conftest import world as make_world
    from triz_ri_smart_ai_evaluator.access import Role
    from triz_ri_smart_ai_evaluator.errors import InputError

    worlds = make_world.__wrapped__(tmp_path)  # type: ignore[attr-defined]
    world = next(worlds)
    try:
        port = world.trusted(Role.AUDITOR)
        if needle is None:
            assert port.request("ledger", "read", payload)["events"] == []
        else:
            with pytest.raises(InputError, match=needle):
                port.request("ledger", "read", payload)
    finally:
        next(worlds, None)
