"""A witness for the event log: cosign a checkpoint only if it extends what was cosigned before.

:class:`Witness` is the pure decision (no I/O, no clock: the timestamp is an argument).
:class:`WitnessStore` keeps its key and state in a directory and is the only part that touches
files.  A witness is what turns "the log says it is append-only" into something a third party
can rely on (spec 9.2-9.3 trusted log, 10.4 immutability, 1.17 immutable log): a log that
rewrites history or shows two different histories cannot get both versions cosigned.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import ExternalError, InputError, IntegrityError

from .checkpoint import (
    SIG_COSIGNATURE_V1,
    Checkpoint,
    NoteSigner,
    NoteVerifier,
    add_signature,
    generate_signer,
    open_note,
    parse_private_key,
)
from .merkle import verify_consistency


@dataclass(frozen=True)
class Cosigned:
    """The outcome of a successful cosigning: the checkpoint and the note with our signature."""

    checkpoint: Checkpoint
    note: str
    timestamp: int


class Witness:
    """The witness's decision, given its cosigning key (a tlog-cosignature/v1 key)."""

    def __init__(self, cosigner: NoteSigner) -> None:
        if cosigner.sig_type != SIG_COSIGNATURE_V1:
            raise InputError("a witness signs with a cosignature/v1 key (signature type 0x04)")
        self.cosigner = cosigner

    def cosign(
        self,
        *,
        origin: str,
        log_key: NoteVerifier,
        previous: Checkpoint | None,
        note: str,
        proof: Sequence[bytes],
        timestamp: int,
    ) -> Cosigned:
        """Check ``note`` against the last cosigned checkpoint ``previous`` and cosign it.

        Verifies, in order: the log's signature, the origin, that the size did not shrink, that
        an equal size has an equal root, and the consistency proof from ``previous``.  On the
        first checkpoint of a log (``previous`` is None) there is nothing to be consistent with,
        so the proof must be empty.  Raises IntegrityError for the first check that fails.
        """
        body, _ = open_note(note, [log_key])
        checkpoint = Checkpoint.from_body(body)
        if checkpoint.origin != origin:
            raise IntegrityError(
                f"checkpoint origin {checkpoint.origin!r} is not the expected {origin!r}"
            )
        if previous is None:
            if proof:
                raise IntegrityError("first checkpoint of a log must come with an empty proof")
        else:
            if previous.origin != origin:
                raise IntegrityError(
                    f"stored checkpoint is for {previous.origin!r}, not {origin!r}"
                )
            if checkpoint.size < previous.size:
                raise IntegrityError(
                    f"rollback: size {checkpoint.size} is smaller than the cosigned size "
                    f"{previous.size}"
                )
            if checkpoint.size == previous.size and checkpoint.root != previous.root:
                raise IntegrityError(f"split view: two roots at size {checkpoint.size}")
            verify_consistency(
                old_size=previous.size,
                new_size=checkpoint.size,
                old_root=previous.root,
                new_root=checkpoint.root,
                proof=proof,
            )
        cosigned = add_signature(note, self.cosigner, timestamp=timestamp)
        return Cosigned(checkpoint, cosigned, timestamp)


_KEY_FILE = "witness.key"
_LOCK_FILE = "lock"
_LATEST = "checkpoint"
_HISTORY = "history.jsonl"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, *, replace: bool) -> None:
    """Write through a private temporary file in the same directory, then publish it atomically.

    With ``replace`` the file is swapped in by os.replace; without it os.link refuses to clobber
    an existing file (a witness key must never be silently replaced).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(path.parent)


def _append(path: Path, record: bytes) -> None:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        end = os.fstat(fd).st_size
        # Appending after a torn last line would glue two records into one corrupt line.
        if end and os.pread(fd, 1, end - 1) != b"\n":
            raise IntegrityError(
                f"witness history {path} ends in an incomplete line; left untouched"
            )
        view = memoryview(record)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


class WitnessStore:
    """A witness's directory: ``witness.key`` (mode 0600) and, per log origin, a directory
    ``logs/<sha256(origin)>/`` with the latest cosigned note and an append-only history.

    The latest note is re-verified with the witness's own key whenever it is read, so a corrupt
    or edited state file stops the witness with an IntegrityError instead of being trusted or
    overwritten.  OS failures raise ExternalError.
    """

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    @property
    def key_path(self) -> Path:
        """Where the witness private key lives."""
        return self.directory / _KEY_FILE

    def init(self, name: str) -> NoteVerifier:
        """Create the directory and a new witness key; return its public key.

        Raises InputError if a key already exists (it is never overwritten).
        """
        signer = generate_signer(name, sig_type=SIG_COSIGNATURE_V1)
        data = (signer.private_key_text() + "\n").encode()
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_file(self.key_path, data, replace=False)
        except FileExistsError:
            raise InputError(
                f"witness key {self.key_path} already exists; not replacing it"
            ) from None
        except OSError as e:
            raise ExternalError(f"cannot create witness key {self.key_path}: {e}") from e
        return signer.verifier

    def signer(self) -> NoteSigner:
        """Load the witness key.

        Raises InputError if it is missing or readable by others; IntegrityError if corrupt.
        """
        path = self.key_path
        try:
            mode = path.stat().st_mode
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise InputError(f"witness key not found: {path} (create it with init)") from None
        except UnicodeDecodeError:
            raise IntegrityError(f"witness key {path} is corrupt: not UTF-8 text") from None
        except OSError as e:
            raise ExternalError(f"cannot read witness key {path}: {e}") from e
        if mode & 0o077:
            raise InputError(
                f"witness key {path} is accessible to other users "
                f"(mode {stat.S_IMODE(mode):o}); run chmod 600"
            )
        if not text.endswith("\n"):
            raise IntegrityError(f"witness key {path} is corrupt: truncated")
        try:
            signer = parse_private_key(text[:-1])
        except InputError as e:
            raise IntegrityError(f"witness key {path} is corrupt: {e.message}") from None
        if signer.sig_type != SIG_COSIGNATURE_V1:
            raise IntegrityError(f"witness key {path} is not a cosignature/v1 key")
        return signer

    def _log_dir(self, origin: str) -> Path:
        # Origins are free text (often URLs with '/'); hashing gives a safe, fixed file name.
        return self.directory / "logs" / hashlib.sha256(origin.encode()).hexdigest()

    def latest(self, origin: str) -> Checkpoint | None:
        """The last checkpoint cosigned for ``origin``, or None if there is none.

        Raises IntegrityError if the state file is corrupt or not signed by this witness.
        """
        return self._latest(origin, self.signer())

    def _latest(self, origin: str, signer: NoteSigner) -> Checkpoint | None:
        path = self._log_dir(origin) / _LATEST
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ExternalError(f"cannot read witness state {path}: {e}") from e
        try:
            body, _ = open_note(data, [signer.verifier])
            checkpoint = Checkpoint.from_body(body)
        except IntegrityError as e:
            raise IntegrityError(
                f"witness state {path} is corrupt ({e.message}); left untouched"
            ) from None
        if checkpoint.origin != origin:
            raise IntegrityError(f"witness state {path} holds origin {checkpoint.origin!r}")
        return checkpoint

    def history(self, origin: str) -> list[tuple[int, str]]:
        """Every note cosigned for ``origin``, oldest first, as (timestamp, note).

        Raises IntegrityError if a history line is corrupt.
        """
        path = self._log_dir(origin) / _HISTORY
        try:
            lines = path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        except OSError as e:
            raise ExternalError(f"cannot read witness history {path}: {e}") from e
        if lines.pop() != b"":
            raise IntegrityError(f"witness history {path} is corrupt: last line is incomplete")
        entries = []
        for n, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                entry = (int(record["timestamp"]), str(record["note"]))
            except (ValueError, KeyError, TypeError):
                raise IntegrityError(f"witness history {path} line {n} is corrupt") from None
            entries.append(entry)
        return entries

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # One cosigning at a time per directory: two concurrent requests must not both pass the
        # "same size, same root" check against the same stored state.
        try:
            fd = os.open(self.directory / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise ExternalError(f"cannot open witness lock in {self.directory}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def cosign(
        self,
        *,
        origin: str,
        log_key: NoteVerifier,
        note: str,
        proof: Sequence[bytes],
        timestamp: int,
    ) -> str:
        """Run :meth:`Witness.cosign` against the stored state and record the result.

        The history line is appended before the latest checkpoint is replaced, so a crash
        between the two leaves a history that is a superset of what was published.  Raises
        IntegrityError (refused or corrupt state), InputError (key problems), ExternalError.
        """
        signer = self.signer()
        with self._locked():
            previous = self._latest(origin, signer)
            if previous is not None:
                # The witness follows one log key per origin: the one that signed what it
                # cosigned before.  Another key with the log's name is refused here, not only
                # later by verify (defence in depth).
                stored = (self._log_dir(origin) / _LATEST).read_bytes()
                try:
                    open_note(stored, [log_key])
                except IntegrityError as e:
                    raise IntegrityError(
                        f"the log key offered for {origin!r} is not the key this witness "
                        "follows; refusing to cosign"
                    ) from e
            result = Witness(signer).cosign(
                origin=origin,
                log_key=log_key,
                previous=previous,
                note=note,
                proof=proof,
                timestamp=timestamp,
            )
            log_dir = self._log_dir(origin)
            record = canonical_json({"note": result.note, "timestamp": str(timestamp)}) + b"\n"
            try:
                log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                _append(log_dir / _HISTORY, record)
                _write_file(log_dir / _LATEST, result.note.encode(), replace=True)
            except OSError as e:
                raise ExternalError(f"cannot record cosigned checkpoint in {log_dir}: {e}") from e
        return result.note
