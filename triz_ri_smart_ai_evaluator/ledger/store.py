"""The storage interface of the ledger and the sequencing logic every backend shares.

A backend gives durable, append-only rows; the :class:`Sequencer` decides everything that makes
them a verifiable log: positions, chain links, the Merkle frontier and when a signed checkpoint
is due.  It does no I/O of its own (the clock is passed in), so SQLite and PostgreSQL seal events
identically and a verifier can rebuild the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import IntegrityError
from .checkpoint import Checkpoint, NoteSigner, NoteVerifier, open_note, sign_note
from .events import GENESIS_PREV, Event, NewEvent, seal
from .merkle import MerkleAccumulator


@dataclass(frozen=True, slots=True)
class Head:
    """The end of the log as a backend stores it: size, last leaf hash, Merkle frontier."""

    size: int
    last_leaf: str
    peaks: tuple[bytes, ...]
    last_checkpoint_size: int
    last_checkpoint_time: float

    @classmethod
    def empty(cls) -> Head:
        return cls(0, GENESIS_PREV, (), 0, 0.0)


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """Sign a checkpoint at least every ``every_events`` events or ``every_seconds`` seconds
    (issue 3), with the log's key."""

    signer: NoteSigner
    origin: str
    every_events: int = 1000
    every_seconds: float = 10.0  # issue 11: keep the unprotected tail short
    clock: Callable[[], float] = field(default=lambda: 0.0)


#: First line of a signed head note: never a valid checkpoint (its second line is no size).
HEAD_TAG = "triz-ri ledger head v1"


def sign_head(head: Head, signer: NoteSigner, origin: str) -> str:
    """The log key's signed statement of the store's head (issue 11: the events after the last
    checkpoint are protected by it, so someone without the key cannot rewrite them unseen)."""
    peaks = base64.b64encode(b"".join(head.peaks)).decode("ascii") or "-"
    body = (f"{HEAD_TAG}\n{origin}\n{head.size}\n{head.last_leaf}\n{peaks}\n"
            f"{head.last_checkpoint_size}\n{head.last_checkpoint_time!r}\n")
    return sign_note(body, signer)


def open_head(note: str, verifier: NoteVerifier, origin: str) -> Head:
    """Verify a note from :func:`sign_head`.  Raises IntegrityError when it does not verify."""
    body, _ = open_note(note, [verifier])
    lines = body.split("\n")
    try:
        tag, who, size, last, peaks, cp_size, cp_time, end = lines
        raw = b"" if peaks == "-" else base64.b64decode(peaks, validate=True)
        head = Head(int(size), last, tuple(raw[i : i + 32] for i in range(0, len(raw), 32)),
                    int(cp_size), float(json.loads(cp_time)))
    except (ValueError, binascii.Error) as e:
        raise IntegrityError(f"the signed head is malformed ({e})") from e
    if tag != HEAD_TAG or who != origin or end or len(raw) % 32:
        raise IntegrityError("the signed head is not a head of this log")
    return head


@dataclass(frozen=True, slots=True)
class Batch:
    """What a backend must write, in one transaction, for one append."""

    events: tuple[Event, ...]
    head: Head
    checkpoint: tuple[int, str] | None  # (size, signed note) when one is due


class Sequencer:
    """Seals new events after a head.  Pure: the same head and events give the same batch."""

    def __init__(self, policy: CheckpointPolicy | None) -> None:
        self.policy = policy

    def verify_signer(self, checkpoints: Sequence[tuple[int, str]], where: str) -> None:
        """Refuse to sign for a log whose last checkpoint another key signed (issue 3: a wrong
        key never writes a checkpoint the verifier would then reject).  Raises IntegrityError.
        """
        if self.policy is None or not checkpoints:
            return
        size, note = checkpoints[-1]
        try:
            body, _ = open_note(note, [self.policy.signer.verifier])
            origin = Checkpoint.from_body(body).origin
        except IntegrityError as e:
            raise IntegrityError(
                f"{where}: the checkpoint at size {size} was not signed by this log key "
                f"({self.policy.signer.name}); refusing to sign with it"
            ) from e
        if origin != self.policy.origin:
            raise IntegrityError(
                f"{where}: the log's origin is {origin!r}, not {self.policy.origin!r}"
            )

    def seal(self, head: Head, new: Sequence[NewEvent], *, force_checkpoint: bool = False) -> Batch:
        acc = MerkleAccumulator.from_state(head.size, head.peaks)
        prev = head.last_leaf
        sealed = []
        seq = head.size
        for event in new:
            seq += 1
            item = seal(event, seq=seq, prev=prev)
            acc.append(item.leaf)
            prev = item.leaf.hex()
            sealed.append(item)
        checkpoint = None
        cp_size, cp_time = head.last_checkpoint_size, head.last_checkpoint_time
        policy = self.policy
        if policy is not None and seq > 0:
            now = policy.clock()
            due = (
                force_checkpoint
                or seq - head.last_checkpoint_size >= policy.every_events
                or (seq > head.last_checkpoint_size and now - cp_time >= policy.every_seconds)
            )
            if due and seq > head.last_checkpoint_size:
                body = Checkpoint(policy.origin, seq, acc.root()).to_body()
                checkpoint = (seq, sign_note(body, policy.signer))
                cp_size, cp_time = seq, now
        return Batch(tuple(sealed), Head(seq, prev, acc.peaks, cp_size, cp_time), checkpoint)


class LedgerStore(Protocol):
    """What a storage backend provides.  Every method raises IntegrityError or ExternalError."""

    def append(self, events: Sequence[NewEvent], *, force_checkpoint: bool = False) -> list[int]:
        """Append atomically and durably; return the positions given.  Concurrent writers are
        serialised so the chain never forks."""
        ...

    def append_with_evidence(self, events: Sequence[NewEvent], evidence: Sequence[bytes], *,
                             force_checkpoint: bool = False) -> list[int]:
        """Store ``evidence`` (content-addressed, as :meth:`put_evidence`) and append
        ``events`` in ONE transaction: both are kept or neither (spec 10.4: an attempt is
        logged with what it submitted, never half of it).  Returns the positions given.  On
        PostgreSQL it is one round trip (issue 16 item 4)."""
        ...

    def size(self) -> int: ...

    def scan(self, start: int = 1, end: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(seq, body) in order, from ``start`` up to ``end`` inclusive."""
        ...

    def scan_indexed(
        self, start: int = 1, end: int | None = None
    ) -> Iterator[tuple[int, bytes, str, str | None]]:
        """(seq, body, kind column, attempt column): what verify reads, so that it can check
        the indexed columns against the body they were taken from."""
        ...

    def attempt_events(self, attempt: str) -> list[Event]: ...

    def put_evidence(self, data: bytes) -> str:
        """Store content-addressed evidence; return its SHA-256 hex digest."""
        ...

    def get_evidence(self, digest: str) -> bytes: ...

    def evidence_digests(self) -> Iterator[str]: ...

    def checkpoints(self) -> list[tuple[int, str]]:
        """(size, signed note) of every checkpoint, oldest first."""
        ...

    def close(self) -> None: ...
