"""The ledger as its users see it: keys, appends, proofs, witness cosigning and verification.

This is the I/O edge around the pure parts (events, sequencer, Merkle tree, checkpoints): it reads
key files and the clock and talks to a storage backend.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, IntegrityError
from .checkpoint import (
    Checkpoint,
    NoteSigner,
    NoteVerifier,
    generate_signer,
    open_note,
    parse_private_key,
    parse_vkey,
)
from .events import GENESIS_PREV
from .merkle import (
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from .sqlite_store import SqliteStore
from .store import CheckpointPolicy, LedgerStore
from .verify import (
    Anchor,
    Links,
    Report,
    anchors_from_notes,
    check_anchor_roots,
    check_evidence,
    check_links,
    finish,
    merged_root,
)
from .witness import WitnessStore

DEFAULT_ORIGIN = "triz-eval.local/ledger"
LOG_KEY_FILE = "log.key"
LOG_VKEY_FILE = "log.vkey"


def create_log_key(key_dir: Path, *, origin: str = DEFAULT_ORIGIN) -> NoteVerifier:
    """Create the log's Ed25519 key in ``key_dir`` (private key mode 0600, never overwritten)."""
    signer = generate_signer(origin)
    key_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    private = key_dir / LOG_KEY_FILE
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InputError(f"{private} already exists; not replacing a log key") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(signer.private_key_text() + "\n")
    (key_dir / LOG_VKEY_FILE).write_text(signer.verifier.vkey() + "\n", encoding="utf-8")
    return signer.verifier


def load_log_signer(key_dir: Path) -> NoteSigner:
    """Load the log's private key.  Raises InputError if missing or readable by others."""
    path = key_dir / LOG_KEY_FILE
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise InputError(f"log key not found: {path} (create it with 'ledger init')") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read log key {path}: {e}") from e
    if mode & 0o077:
        raise InputError(f"log key {path} is accessible to other users; run chmod 600")
    return parse_private_key(text)


def load_vkey(path: Path) -> NoteVerifier:
    """Load a public verifier key (``name+keyid+base64``).  Raises InputError."""
    try:
        return parse_vkey(path.read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read public key {path}: {e}") from e


def open_sqlite_ledger(
    db: Path,
    key_dir: Path | None = None,
    *,
    every_events: int = 1000,
    every_seconds: float = 10.0,
    read_only: bool = False,
    unsafe_resign_head: bool = False,
) -> SqliteStore:
    """Open a SQLite ledger; with ``key_dir`` it signs checkpoints with the log key, and
    refuses a tail that does not match its signed head (see :meth:`SqliteStore.open`)."""
    policy = None
    if key_dir is not None:
        signer = load_log_signer(key_dir)
        policy = CheckpointPolicy(signer, signer.name, every_events, every_seconds, time.time)
    return SqliteStore.open(db, policy=policy, read_only=read_only, create=not read_only,
                            unsafe_resign_head=unsafe_resign_head)


def leaf_hashes(store: LedgerStore) -> list[bytes]:
    return [leaf_hash(body) for _, body in store.scan()]


def _note_at(store: LedgerStore, size: int) -> str | None:
    return next((note for cp_size, note in store.checkpoints() if cp_size == size), None)


def prove_inclusion(store: LedgerStore, seq: int, size: int | None = None) -> dict[str, object]:
    """An RFC 6962 inclusion proof of event ``seq``.  By default against the latest signed
    checkpoint, whose note is included so an outsider can check the root's signature."""
    leaves = leaf_hashes(store)
    checkpoints = store.checkpoints()
    if size is None:
        size = checkpoints[-1][0] if checkpoints else len(leaves)
    if not 1 <= seq <= size <= len(leaves):
        raise InputError(f"need 1 <= seq ({seq}) <= size ({size}) <= log size ({len(leaves)})")
    proof = inclusion_proof(leaves, seq - 1, size)
    return {
        "type": "inclusion",
        "seq": seq,
        "leaf_index": seq - 1,
        "tree_size": size,
        "leaf_hash": leaves[seq - 1].hex(),
        "root": root_from_leaf_hashes(leaves[:size]).hex(),
        "proof": [h.hex() for h in proof],
        "checkpoint": _note_at(store, size),
    }


def prove_consistency(store: LedgerStore, old: int, new: int | None = None) -> dict[str, object]:
    """An RFC 6962 consistency proof from size ``old`` to size ``new`` (default: the latest
    signed checkpoint), with the checkpoint notes at both sizes where they exist."""
    leaves = leaf_hashes(store)
    checkpoints = store.checkpoints()
    if new is None:
        new = checkpoints[-1][0] if checkpoints else len(leaves)
    if not 0 <= old <= new <= len(leaves):
        raise InputError(f"need 0 <= old ({old}) <= new ({new}) <= log size ({len(leaves)})")
    return {
        "type": "consistency",
        "old_size": old,
        "new_size": new,
        "old_root": root_from_leaf_hashes(leaves[:old]).hex(),
        "new_root": root_from_leaf_hashes(leaves[:new]).hex(),
        "proof": [h.hex() for h in consistency_proof(leaves, old, new)],
        "old_checkpoint": _note_at(store, old),
        "new_checkpoint": _note_at(store, new),
    }


def verify_proof(document: dict[str, Any], *, log_key: NoteVerifier) -> str:
    """Verify a proof document from ``prove_inclusion`` / ``prove_consistency`` as an outsider:
    the roots must come from checkpoints signed by the log, and the proof must hold.  Returns a
    one-line description; raises IntegrityError (or InputError for a malformed document)."""

    def signed_root(note: object, size: int) -> bytes:
        if not isinstance(note, str):
            raise IntegrityError(f"no signed checkpoint at size {size} in the proof document")
        body, _ = open_note(note, [log_key])
        cp = Checkpoint.from_body(body)
        if cp.size != size:
            raise IntegrityError(f"checkpoint is for size {cp.size}, proof for {size}")
        return cp.root

    try:
        kind = document["type"]
        proof = [bytes.fromhex(h) for h in document["proof"]]
        if kind == "inclusion":
            size = int(document["tree_size"])
            verify_inclusion(
                leaf_hash=bytes.fromhex(document["leaf_hash"]),
                index=int(document["leaf_index"]),
                size=size,
                proof=proof,
                root=signed_root(document["checkpoint"], size),
            )
            return f"event {document['seq']} is included in the signed tree of size {size}"
        if kind == "consistency":
            old, new = int(document["old_size"]), int(document["new_size"])
            old_root = (
                bytes.fromhex(root_from_leaf_hashes([]).hex())
                if old == 0
                else signed_root(document["old_checkpoint"], old)
            )
            verify_consistency(
                old_size=old,
                new_size=new,
                old_root=old_root,
                new_root=signed_root(document["new_checkpoint"], new),
                proof=proof,
            )
            return f"the signed tree of size {new} extends the signed tree of size {old}"
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed proof document ({e})") from e
    raise InputError(f"unknown proof type {document.get('type')!r}")


def witness_cosign(
    store: LedgerStore, witness: WitnessStore, *, log_key: NoteVerifier, now: float | None = None
) -> tuple[int, str]:
    """Ask the witness to cosign the ledger's latest checkpoint.

    The ledger supplies the consistency proof from the witness's last cosigned size; the witness
    checks it itself and refuses anything inconsistent (split view, rollback, bad proof).
    Returns (size, cosigned note).  Raises IntegrityError when the witness refuses.
    """
    checkpoints = store.checkpoints()
    if not checkpoints:
        raise InputError("the ledger has no signed checkpoint yet")
    size, note = checkpoints[-1]
    body, _ = open_note(note, [log_key])
    origin = Checkpoint.from_body(body).origin
    previous = witness.latest(origin)
    proof: Sequence[bytes] = ()
    if previous is not None and previous.size != size:
        if previous.size > size:
            raise IntegrityError(
                f"rollback: the witness cosigned size {previous.size}, the ledger offers {size}"
            )
        proof = consistency_proof(leaf_hashes(store), previous.size, size)
    stamp = int(time.time() if now is None else now)
    return size, witness.cosign(
        origin=origin, log_key=log_key, note=note, proof=proof, timestamp=stamp
    )


def check_ledger(
    store: LedgerStore,
    *,
    log_key: NoteVerifier,
    witness_notes: Sequence[str] = (),
    witness_key: NoteVerifier | None = None,
    check_evidence: bool = True,
    workers: int | None = None,
) -> Report:
    """Check chain, roots, the log's checkpoints and the witness's cosigned checkpoints.

    Returns the :class:`Report` (its failures are data, not exceptions); raises InputError
    when witness checkpoints come without the witness's key."""
    report = Report()
    origin = log_key.name
    anchors = anchors_from_notes(
        store.checkpoints(), origin=origin, verifiers=[log_key], by="log", report=report
    )
    if witness_key is not None:
        report.witnessed_size = 0
    if witness_notes:
        if witness_key is None:
            raise InputError("witness checkpoints given without the witness's public key")
        notes = []
        for note in witness_notes:
            try:
                body, _ = open_note(note, [log_key, witness_key])
                notes.append((Checkpoint.from_body(body).size, note))
            except IntegrityError as e:
                report.fail("witness checkpoint", f"does not verify ({e.diagnostics()})")
        witnessed = anchors_from_notes(
            notes, origin=origin, verifiers=[log_key, witness_key], by="witness", report=report
        )
        report.witnessed_size = max((a.size for a in witnessed), default=0)
        anchors += witnessed
    evidence: dict[str, bytes | None] | None = None
    if check_evidence:
        evidence = {}
        for digest in store.evidence_digests():
            try:
                evidence[digest] = store.get_evidence(digest)
            except IntegrityError:
                evidence[digest] = None
    size = store.size()
    workers = min(workers if workers is not None else (os.cpu_count() or 1), 8)
    if isinstance(store, SqliteStore) and workers > 1 and size >= PARALLEL_FROM:
        _check_in_parallel(store.path, size, workers, anchors, report, evidence)
    else:
        finish(check_links(store.scan_indexed()), anchors, report, evidence=evidence)
    return report


#: Below this many events one process verifies faster than starting workers.
PARALLEL_FROM = 50_000


def _links_worker(job: tuple[str, int, int, frozenset[int]]) -> Links:
    path, start, end, sizes = job
    store = SqliteStore.open(Path(path), read_only=True)
    try:
        return check_links(
            store.scan_indexed(start, end),
            first_seq=start,
            prev=GENESIS_PREV if start == 1 else None,
            snapshot_at=sizes,
        )
    finally:
        store.close()


def _check_in_parallel(
    path: Path,
    size: int,
    workers: int,
    anchors: list[Anchor],
    report: Report,
    evidence: dict[str, bytes | None] | None,
) -> None:
    """Verify in ``workers`` processes over consecutive ranges.  Each checks its chain links
    and builds its own compact Merkle range, snapshotted at the anchor sizes inside it; the
    parent stitches the seams (complete ranges, first link = previous range's last leaf) and
    merges compact ranges to get each anchor's root.  Hashing dominates, so this scales."""
    step = -(-size // workers)
    sizes = frozenset(a.size for a in anchors)
    jobs = [(str(path), s, min(s + step - 1, size), sizes) for s in range(1, size + 1, step)]
    with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
        parts = pool.map(_links_worker, jobs)
    prefix: list[tuple[int, bytes]] = []
    last_leaf = GENESIS_PREV
    roots: dict[int, bytes] = {}
    merged = Links(1)
    for (_, start, end, _), part in zip(jobs, parts, strict=True):
        problem = part.problem
        if problem is None and start > 1 and part.first_prev != last_leaf:
            problem = (f"event {start}", "chain link broken: prev is not the previous leaf")
        if problem is None and part.count != end - start + 1:
            problem = (f"event {start + part.count}", "missing from the stored log")
        merged.evidence_events += part.evidence_events
        if problem is not None:
            merged.problem = problem
            break
        for at, nodes in part.snapshots.items():
            roots[at] = merged_root(prefix, start - 1, nodes)[1]
        prefix, _ = merged_root(prefix, start - 1, part.final)
        last_leaf = part.last_leaf or last_leaf
        merged.count += part.count
    if merged.problem is not None:
        report.fail(*merged.problem)
        return
    if evidence is not None:
        for seq, body in merged.evidence_events:
            check_evidence(seq, body, evidence, report)
    check_anchor_roots(roots, merged.count, anchors, report)


def witness_notes_for(witness: WitnessStore, origin: str) -> list[str]:
    """Every note the witness cosigned for ``origin`` (its own record, outside the ledger)."""
    return [note for _, note in witness.history(origin)]
