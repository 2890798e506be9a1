"""Bad input to the ledger commands (issue 3): a corrupt database file, a damaged evidence blob,
a malformed checkpoint note, a wrong key file.

Each case runs ``triz-eval`` in process through the console script's entry function
(``cli.main``, with the ``triz_eval`` fixture; the reference ledger's check runs the installed
script in a subprocess, exactly as a user meets it), and requires: exit code 2 (bad input) or 3
(integrity), never 1 or 70; a single stderr line ``triz-eval: error: ...`` naming the problem;
no traceback; and the database file byte for byte as it was (a command never repairs, rewrites
or destroys what it was given).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CliResult
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import (
    SIG_COSIGNATURE_V1,
    NoteVerifier,
    generate_signer,
)
from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import (
    create_log_key,
    load_vkey,
    open_sqlite_ledger,
    witness_cosign,
)
from triz_ri_smart_ai_evaluator.ledger.witness import WitnessStore

TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
ORIGIN = "bad-input.test.example/log"
AT = "2025-03-01T12:00:00.000000Z"
EVENTS = 120
EVIDENCE_EVERY = 20
PAGE = 4096
Run = Callable[..., CliResult]


# -- the ledger every case starts from -------------------------------------------------------------
@dataclass
class Home:
    """A copy of the reference ledger: database, log keys, witness folder."""

    root: Path

    @property
    def db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def witness(self) -> Path:
        return self.root / "witness"

    def verify_args(self, *extra: str | Path) -> list[str | Path]:
        return ["ledger", "verify", "--db", self.db, "--keys", self.keys,
                "--witness", self.witness, "--witness-vkey", self.witness / "witness.vkey",
                *extra]


def evidence_blob(i: int) -> bytes:
    return (f"evidence {i}: " + "measurement row\n" * 400).encode()  # spills to overflow pages


def build(root: Path) -> None:
    create_log_key(root / "keys", origin=ORIGIN)
    store = open_sqlite_ledger(root / "ledger.db", root / "keys", every_events=20)
    witness = WitnessStore(root / "witness")
    vkey = witness.init("bad-input.test.example/witness")
    (root / "witness" / "witness.vkey").write_text(vkey.vkey() + "\n", encoding="utf-8")
    for i in range(1, EVENTS + 1):
        if i % EVIDENCE_EVERY == 0:
            digest = store.put_evidence(evidence_blob(i))
            event = NewEvent.make("evidence.stored", {"what": f"blob {i}", "digest": digest},
                                  actor="harness", at=AT, attempt=f"att-{i % 3}")
        else:
            event = NewEvent.make("comment.added", {"text": f"event {i} " + "p" * 60},
                                  actor="runner-1", at=AT, attempt=f"att-{i % 3}")
        store.append([event])
        if i == EVENTS // 2:
            store.append([], force_checkpoint=True)
            witness_cosign(store, witness, log_key=_vkey(root), now=1_700_000_000)
    store.append([], force_checkpoint=True)
    witness_cosign(store, witness, log_key=_vkey(root), now=1_700_000_001)
    store.close()
    conn = sqlite3.connect(root / "ledger.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _vkey(root: Path) -> NoteVerifier:
    return load_vkey(root / "keys" / "log.vkey")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bad-input-ref")
    build(root)
    return root


@pytest.fixture
def home(reference: Path, tmp_path: Path) -> Home:
    shutil.copytree(reference, tmp_path / "home")
    return Home(tmp_path / "home")


# -- running the CLI -------------------------------------------------------------------------------
def run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The installed script in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    return subprocess.run([str(TRIZ_EVAL), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def one_line_error(proc: subprocess.CompletedProcess[str] | CliResult, codes: tuple[int, ...],
                   *needles: str) -> str:
    """The checks every case shares; returns the error line."""
    context = f"exit {proc.returncode}; stderr: {proc.stderr!r}"
    assert "Traceback" not in proc.stderr, context
    assert "Traceback" not in proc.stdout, context
    assert proc.returncode in codes, context
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, context
    line = lines[0]
    assert line.startswith("triz-eval: error: "), context
    for needle in needles:
        assert needle.lower() in line.lower(), f"{needle!r} not named: {line}"
    return line



@contextlib.contextmanager
def unchanged(*paths: Path) -> Iterator[None]:
    """The files are byte-identical after the block (a missing file stays missing)."""
    before = {p: p.read_bytes() if p.is_file() else None for p in paths}
    yield
    for p, data in before.items():
        now = p.read_bytes() if p.is_file() else None
        assert now == data, f"{p} was changed by a command that failed"


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)


def noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def test_the_reference_ledger_verifies(home: Home) -> None:
    proc = run_script(*home.verify_args())
    assert proc.returncode == 0, proc.stderr
    assert "2 witnessed checkpoints match" in proc.stdout, proc.stdout


# -- a corrupt database file ---------------------------------------------------------------------
def _read_commands(home: Home) -> dict[str, list[str | Path]]:
    db, keys = home.db, home.keys
    return {
        "verify": home.verify_args(),
        "verify --json": [*home.verify_args(), "--json"],
        "prove": ["ledger", "prove", "--seq", "1", "--db", db],
        "consistency": ["ledger", "consistency", "--old", "1", "--db", db],
        "recompute": ["ledger", "recompute", "--db", db],
        "attempt show": ["attempt", "show", "att-1", "--db", db],
        "witness cosign": ["witness", "cosign", "--dir", home.witness, "--db", db,
                           "--keys", keys],
    }


def _write_commands(home: Home) -> dict[str, list[str | Path]]:
    db, keys = home.db, home.keys
    return {
        "init": ["ledger", "init", "--db", db, "--keys", keys],
        "checkpoint": ["ledger", "checkpoint", "--db", db, "--keys", keys],
        "reconcile": ["ledger", "reconcile", "--db", db, "--keys", keys],
    }


CORRUPTIONS = ["garbage bytes", "garbage after a valid header", "truncated to half",
               "truncated to one page", "header page overwritten"]


def corrupt(home: Home, how: str) -> None:
    db = home.db
    size = db.stat().st_size
    if how == "garbage bytes":
        db.write_bytes(noise(size, 1))
    elif how == "garbage after a valid header":
        overwrite(db, 100, noise(size - 100, 2))
    elif how == "truncated to half":
        with db.open("r+b") as f:
            f.truncate((size // PAGE // 2) * PAGE)
    elif how == "truncated to one page":
        with db.open("r+b") as f:
            f.truncate(PAGE)
    elif how == "header page overwritten":
        overwrite(db, 0, noise(PAGE, 3))
    else:
        raise AssertionError(how)


#: Every command meets the first two; the cheaper corruptions are run through three.
EVERY_COMMAND = ("garbage bytes", "garbage after a valid header")


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_database_is_a_clear_integrity_error_for_every_command(
        home: Home, how: str, triz_eval: Run) -> None:
    corrupt(home, how)
    commands = {**_read_commands(home), **_write_commands(home)}
    if how not in EVERY_COMMAND:
        commands = {k: v for k, v in commands.items() if k in ("verify", "prove", "checkpoint")}

    def one(name: str) -> str | None:
        with unchanged(home.db):
            proc = triz_eval(*commands[name])
        try:
            one_line_error(proc, (3,), str(home.db))
        except AssertionError as e:
            return f"{name}: {e}"
        if "not a readable ledger database" not in proc.stderr and "verify" not in name:
            return f"{name}: does not say the file is not a readable ledger: {proc.stderr!r}"
        return None

    failures = [f for f in map(one, sorted(commands)) if f]  # one at a time: in process
    assert not failures, "\n".join(failures)


def _pages(db: Path) -> dict[int, str]:
    """Which b-tree each page of the file belongs to (SQLite's dbstat table)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {int(page): str(name) for name, page in
                conn.execute("SELECT name, pageno FROM dbstat")}
    finally:
        conn.close()


def test_a_valid_file_with_any_one_page_overwritten(reference: Path, tmp_path: Path,
                                                    triz_eval: Run) -> None:
    """Every page in turn overwritten with noise.  A page of the events, evidence or checkpoints
    (or the schema) must give exit 3; any other page (the attempt index, the cached head) may
    verify, since verification never reads it.  Never a crash, never a changed file."""
    pages = _pages(reference / "ledger.db")
    assert {"events", "evidence", "checkpoints", "sqlite_schema"} <= set(pages.values())
    must_fail = {"events", "evidence", "checkpoints", "sqlite_schema"}

    def one(page: int) -> str | None:
        home = Home(tmp_path / f"p{page}")
        shutil.copytree(reference, home.root)
        overwrite(home.db, (page - 1) * PAGE, noise(PAGE, page))
        with unchanged(home.db):
            proc = triz_eval(*home.verify_args())
        what = f"page {page} ({pages[page]})"
        codes = (3,) if pages[page] in must_fail else (0, 3)
        if proc.returncode == 0 and codes == (0, 3):
            return None
        try:
            one_line_error(proc, codes)
        except AssertionError as e:
            return f"{what}: {e}"
        return None

    failures = [f for f in map(one, sorted(pages)) if f]  # one at a time: in process
    assert not failures, f"{len(failures)} of {len(pages)} pages:\n" + "\n".join(failures)


def test_a_missing_database_is_an_input_error_and_is_not_created(home: Home,
                                                                 triz_eval: Run) -> None:
    missing = home.root / "nowhere.db"
    proc = triz_eval("ledger", "verify", "--db", missing, "--keys", home.keys)
    one_line_error(proc, (2,), "no ledger database")
    assert not missing.exists()


def test_a_directory_as_the_database(home: Home, triz_eval: Run) -> None:
    proc = triz_eval("ledger", "verify", "--db", home.keys, "--keys", home.keys)
    one_line_error(proc, (2, 3), str(home.keys))


# -- damaged evidence ----------------------------------------------------------------------------
def _ledger_sql(db: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    """As the file's owner: drop the guards, run the statements."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"
                                    ).fetchall():
            conn.execute(f'DROP TRIGGER "{name}"')
        for statement, params in statements:
            conn.execute(statement, params)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


@pytest.mark.parametrize("cut", ["half", "one byte short", "empty"])
def test_a_truncated_evidence_blob_is_named(home: Home, cut: str, triz_eval: Run) -> None:
    victim = EVIDENCE_EVERY * 2
    blob = evidence_blob(victim)
    digest = hashlib.sha256(blob).hexdigest()
    short = {"half": blob[: len(blob) // 2], "one byte short": blob[:-1], "empty": b""}[cut]
    _ledger_sql(home.db, ("UPDATE evidence SET data = ? WHERE digest = ?", (short, digest)))
    with unchanged(home.db):
        proc = triz_eval(*home.verify_args())
    line = one_line_error(proc, (3,), "evidence", digest[:16])
    assert f"event {victim}" in line, line


def test_a_missing_evidence_blob_is_named(home: Home, triz_eval: Run) -> None:
    victim = EVIDENCE_EVERY * 4
    digest = hashlib.sha256(evidence_blob(victim)).hexdigest()
    _ledger_sql(home.db, ("DELETE FROM evidence WHERE digest = ?", (digest,)))
    with unchanged(home.db):
        proc = triz_eval(*home.verify_args())
    line = one_line_error(proc, (3,), "not stored", digest[:16])
    assert f"event {victim}" in line, line


# -- malformed checkpoint notes ------------------------------------------------------------------
NOTES = {
    "garbage": "not a signed note at all",
    "no signature": "{origin}\n20\n{root}\n",
    "signature line cut": "{origin}\n20\n{root}\n\n\u2014 {origin} AAAA\n",
    "size not a number": "{origin}\ntwenty\n{root}\n\n{sig}",
    "bad base64 root": "{origin}\n20\n!!!not-base64!!!\n\n{sig}",
    "control character": "{origin}\n20\n{root}\x07\n\n{sig}",
    "empty": "",
}


@pytest.mark.parametrize("kind", sorted(NOTES))
def test_a_malformed_checkpoint_note_in_the_database(home: Home, kind: str, triz_eval: Run) -> None:
    conn = sqlite3.connect(home.db)
    size, note = conn.execute("SELECT size, note FROM checkpoints ORDER BY size LIMIT 1"
                              ).fetchone()
    conn.close()
    body, sig = note.split("\n\n", 1)
    origin, _, root = body.split("\n")[:3]
    forged = NOTES[kind].format(origin=origin, root=root, sig=sig)
    _ledger_sql(home.db, ("UPDATE checkpoints SET note = ? WHERE size = ?", (forged, size)))
    with unchanged(home.db):
        proc = triz_eval(*home.verify_args())
    one_line_error(proc, (3,), f"checkpoint at size {size}")


def _history(home: Home) -> Path:
    (path,) = home.witness.glob("logs/*/history.jsonl")
    return path


@pytest.mark.parametrize("kind", ["garbage line", "note garbled", "torn last line",
                                  "note of another size"])
def test_a_malformed_witness_note(home: Home, kind: str, triz_eval: Run) -> None:
    history = _history(home)
    lines = history.read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[0])
    if kind == "garbage line":
        lines[0] = "{not json\n"
    elif kind == "note garbled":
        record["note"] = record["note"].replace("\n\n", "\n", 1)
        lines[0] = json.dumps(record) + "\n"
    elif kind == "torn last line":
        lines[-1] = lines[-1][:-10]
    else:
        record["note"] = record["note"].replace("\n60\n", "\n61\n", 1)
        lines[0] = json.dumps(record) + "\n"
    history.write_text("".join(lines), encoding="utf-8")
    with unchanged(home.db, history):
        proc = triz_eval(*home.verify_args())
    one_line_error(proc, (3,), "witness")


def test_a_corrupt_witness_state_stops_cosigning(home: Home, triz_eval: Run) -> None:
    (state,) = home.witness.glob("logs/*/checkpoint")
    state.write_text("garbage\n", encoding="utf-8")
    with unchanged(home.db, state, _history(home)):
        proc = triz_eval("witness", "cosign", "--dir", home.witness, "--db", home.db,
                         "--keys", home.keys)
    one_line_error(proc, (3,), "witness state", "corrupt")


@pytest.mark.parametrize("kind", ["truncated json", "note garbled", "not an object"])
def test_a_malformed_proof_document(home: Home, kind: str, triz_eval: Run) -> None:
    proc = triz_eval("ledger", "prove", "--seq", "5", "--db", home.db)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    if kind == "truncated json":
        text = text[: len(text) // 2]
    elif kind == "note garbled":
        doc = json.loads(text)
        doc["checkpoint"] = doc["checkpoint"].replace("\n\n", "\n", 1)
        text = json.dumps(doc)
    else:
        text = "[1, 2, 3]"
    proof = home.root / "proof.json"
    proof.write_text(text, encoding="utf-8")
    proc = triz_eval("ledger", "verify-proof", proof, "--keys", home.keys)
    one_line_error(proc, (2, 3), "proof" if kind != "note garbled" else "note")


# -- wrong key files -----------------------------------------------------------------------------
def _other_log_vkey(home: Home) -> Path:
    path = home.root / "other.vkey"
    path.write_text(generate_signer(ORIGIN).verifier.vkey() + "\n", encoding="utf-8")
    return path


def _other_witness_vkey(home: Home) -> Path:
    path = home.root / "other-witness.vkey"
    signer = generate_signer("bad-input.test.example/witness", sig_type=SIG_COSIGNATURE_V1)
    path.write_text(signer.verifier.vkey() + "\n", encoding="utf-8")
    return path


WRONG_LOG_VKEYS: dict[str, tuple[Callable[[Home], Path], int, str]] = {
    # name: (how to make the file, exit code, what the error must name)
    "missing file": (lambda h: h.root / "absent.vkey", 2, "absent.vkey"),
    "garbage text": (lambda h: _write(h, "junk.vkey", b"hello world\n"), 2, "verifier key"),
    "binary": (lambda h: _write(h, "bin.vkey", noise(64, 9)), 2, "bin.vkey"),
    "empty": (lambda h: _write(h, "empty.vkey", b""), 2, "verifier key"),
    "the private key": (lambda h: h.keys / "log.key", 2, "verifier key"),
    "a directory": (lambda h: h.keys, 2, str(Path("keys"))),
    "another log's key": (_other_log_vkey, 3, "checkpoint"),
    "the witness's key": (lambda h: h.witness / "witness.vkey", 3, "checkpoint"),
}


def _write(home: Home, name: str, data: bytes) -> Path:
    path = home.root / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", sorted(WRONG_LOG_VKEYS))
def test_a_wrong_log_key_file_for_verify(home: Home, kind: str, triz_eval: Run) -> None:
    make, code, needle = WRONG_LOG_VKEYS[kind]
    vkey = make(home)
    with unchanged(home.db):
        proc = triz_eval(*home.verify_args("--log-vkey", vkey))
    one_line_error(proc, (code,), needle)


@pytest.mark.parametrize("kind", ["another witness", "the log's key", "garbage"])
def test_a_wrong_witness_key_file_for_verify(home: Home, kind: str, triz_eval: Run) -> None:
    codes: tuple[int, ...]
    if kind == "another witness":
        vkey, codes, needle = _other_witness_vkey(home), (3,), "witness"
    elif kind == "the log's key":  # refused as ambiguous (2) or as not the witness's (3)
        vkey, codes, needle = home.keys / "log.vkey", (2, 3), "key"
    else:
        vkey, codes, needle = _write(home, "w.vkey", b"nonsense\n"), (2,), "verifier key"
    with unchanged(home.db):
        proc = triz_eval(*home.verify_args("--witness-vkey", vkey))
    one_line_error(proc, codes, needle)


@pytest.mark.parametrize("kind", ["garbage", "a public key", "readable by others",
                                  "another log's key", "missing"])
def test_a_wrong_log_private_key_for_signing(home: Home, kind: str, triz_eval: Run) -> None:
    key = home.keys / "log.key"
    if kind == "garbage":
        key.write_text("PRIVATE+KEY+garbage\n", encoding="utf-8")
    elif kind == "a public key":
        key.write_text((home.keys / "log.vkey").read_text(encoding="utf-8"), encoding="utf-8")
    elif kind == "readable by others":
        key.chmod(0o644)
    elif kind == "another log's key":
        key.write_text(generate_signer(ORIGIN).private_key_text() + "\n", encoding="utf-8")
    else:
        key.unlink()
    code = 3 if kind == "another log's key" else 2
    with unchanged(home.db):
        proc = triz_eval("ledger", "checkpoint", "--db", home.db, "--keys", home.keys)
    one_line_error(proc, (code,), "key")


@pytest.mark.parametrize("kind", ["garbage", "truncated", "a log key", "readable by others"])
def test_a_wrong_witness_private_key(home: Home, kind: str, triz_eval: Run) -> None:
    key = home.witness / "witness.key"
    text = key.read_text(encoding="utf-8")
    if kind == "garbage":
        key.write_bytes(noise(40, 4))
    elif kind == "truncated":
        key.write_text(text[: len(text) // 2], encoding="utf-8")
    elif kind == "a log key":
        key.write_text((home.keys / "log.key").read_text(encoding="utf-8"), encoding="utf-8")
    else:
        key.chmod(0o644)
    state = next(home.witness.glob("logs/*/checkpoint"))
    with unchanged(home.db, state, _history(home)):
        proc = triz_eval("witness", "cosign", "--dir", home.witness, "--db", home.db,
                         "--keys", home.keys)
    one_line_error(proc, (2, 3), "witness key")


# -- event fields: ids and instants match in full --------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"),
    [("actor", "runner-1\n"), ("attempt", "att-1\n"), ("at", AT + "\n"),
     ("actor", "runner-1\nforged"), ("attempt", "\natt-1"), ("at", "\n" + AT)],
    ids=["actor-trailing-newline", "attempt-trailing-newline", "at-trailing-newline",
         "actor-embedded-newline", "attempt-leading-newline", "at-leading-newline"],
)
def test_ids_and_instants_with_a_newline_are_refused(field: str, value: str) -> None:
    """Known bug (7): a trailing newline passed the ``$``-anchored patterns and reached the
    canonical body."""
    fields = {"actor": "runner-1", "attempt": "att-1", "at": AT, field: value}
    with pytest.raises(InputError):
        NewEvent.make("comment.added", {"text": "x"}, actor=fields["actor"], at=fields["at"],
                      attempt=fields["attempt"])
