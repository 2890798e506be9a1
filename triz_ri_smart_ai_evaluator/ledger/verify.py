"""Verifying a ledger as an outsider would (spec 10.2, 11.13, 1.17; issue 3 "ledger verify").

The verifier trusts nothing the database says about itself: not its triggers, not its cached
head, not its leaf column.  It recomputes, from the stored bodies alone, the chain links and the
Merkle root at every checkpoint size, and compares them with

* the log's own signed checkpoints (signature by the log key), and
* the checkpoints a **witness** cosigned (signature by the witness key), which live outside the
  evaluated policy's and the database owner's reach.

An owner who rewrites the tail and recomputes every hash still cannot produce the root the
witness cosigned: that is the guarantee (issue 3: tamper evidence an outsider can check).

Pure apart from the rows it is handed; it never writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import IntegrityError
from .checkpoint import Checkpoint, NoteVerifier, open_note
from .events import GENESIS_PREV, prev_in_body
from .merkle import EMPTY_ROOT, LEAF_PREFIX, NODE_PREFIX

_EVIDENCE_KIND = b'"kind":"evidence.stored"'


@dataclass(frozen=True, slots=True)
class Anchor:
    """A (size, root) the log must reproduce, and who vouched for it."""

    size: int
    root: bytes
    by: str  # "log" or "witness"


@dataclass(slots=True)
class Report:
    """The result of a verification.  ``ok`` only when nothing diverged."""

    size: int = 0
    checkpoints_checked: int = 0
    witnessed_checked: int = 0
    evidence_checked: int = 0
    problems: list[str] = field(default_factory=list)
    first_divergence: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, where: str, message: str) -> None:
        if self.first_divergence is None:
            self.first_divergence = where
        self.problems.append(f"{where}: {message}")

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "size": self.size,
            "checkpoints_checked": self.checkpoints_checked,
            "witnessed_checked": self.witnessed_checked,
            "evidence_checked": self.evidence_checked,
            "first_divergence": self.first_divergence,
            "problems": self.problems,
        }


def anchors_from_notes(
    notes: Iterable[tuple[int, str]],
    *,
    origin: str,
    verifiers: Sequence[NoteVerifier],
    by: str,
    report: Report,
) -> list[Anchor]:
    """Open signed checkpoint notes; every one must carry a valid signature of each verifier."""
    anchors = []
    for size, note in notes:
        where = f"{by} checkpoint at size {size}"
        try:
            body, signed_by = open_note(note, verifiers)
            cp = Checkpoint.from_body(body)
        except IntegrityError as e:
            report.fail(where, f"bad signature or malformed note ({e.diagnostics()})")
            continue
        missing = {v.name for v in verifiers} - set(signed_by)
        if missing:
            report.fail(where, f"not signed by {sorted(missing)}")
            continue
        if cp.origin != origin:
            report.fail(where, f"origin {cp.origin!r}, expected {origin!r}")
            continue
        if cp.size != size:
            report.fail(where, f"note says size {cp.size}")
            continue
        anchors.append(Anchor(cp.size, cp.root, by))
    return anchors


def verify_rows(
    rows: Iterable[tuple[int, bytes]],
    anchors: Sequence[Anchor],
    report: Report,
    *,
    evidence: dict[str, bytes | None] | None = None,
) -> None:
    """Walk the log once: contiguity, declared seq, chain links, roots at every anchor size.

    ``evidence`` (digest -> stored bytes or None) enables the evidence check: every digest an
    ``evidence.stored`` event names must be stored and hash to itself.
    """
    by_size: dict[int, list[Anchor]] = {}
    for a in anchors:
        by_size.setdefault(a.size, []).append(a)
    good_size = 0  # the largest anchor size whose root matched: divergence lies after it
    # The Merkle frontier is kept inline (not via MerkleAccumulator): this loop is the hot path
    # of verification and the accumulator's per-call checks would double its cost.
    peaks: list[bytes] = []
    prev = GENESIS_PREV.encode()
    expected = 1
    sha = hashlib.sha256
    node_prefix = NODE_PREFIX
    for seq, body in rows:
        if seq != expected:
            report.fail(f"event {expected}", f"missing; the next stored event is {seq}")
            return
        # A canonical body ends with its chain link and its own position (events.py): one
        # comparison checks both without parsing the JSON.
        if not body.endswith(b',"prev":"%s","seq":%d,"v":1}' % (prev, seq)):
            if prev_in_body(body) != prev.decode():
                report.fail(f"event {seq}", "chain link broken: prev is not the previous leaf hash")
            else:
                report.fail(f"event {seq}", "body does not declare its own position")
            return
        leaf = sha(LEAF_PREFIX + body).digest()
        node, carry = leaf, seq - 1
        while carry & 1:
            node = sha(node_prefix + peaks.pop() + node).digest()
            carry >>= 1
        peaks.append(node)
        prev = leaf.hex().encode()
        if evidence is not None and body.find(_EVIDENCE_KIND, len(body) - 160) >= 0:
            _check_evidence(seq, body, evidence, report)
        if seq in by_size:
            root = _root(peaks)
            for anchor in by_size.pop(seq):
                if anchor.root != root:
                    report.fail(
                        f"events {good_size + 1}..{seq}",
                        f"root at size {seq} differs from the {anchor.by}'s signed checkpoint",
                    )
                    return
                if anchor.by == "witness":
                    report.witnessed_checked += 1
                else:
                    report.checkpoints_checked += 1
            good_size = seq
        expected += 1
    report.size = expected - 1
    for size in sorted(by_size):
        who = ", ".join(sorted({a.by for a in by_size[size]}))
        report.fail(
            f"events {report.size + 1}..{size}",
            f"the {who} signed a checkpoint at size {size} but the log ends at {report.size} "
            "(events were removed)",
        )


def _root(peaks: list[bytes]) -> bytes:
    """RFC 6962 root from the perfect-subtree roots, left to right."""
    if not peaks:
        return EMPTY_ROOT
    root = peaks[-1]
    for peak in reversed(peaks[:-1]):
        root = hashlib.sha256(NODE_PREFIX + peak + root).digest()
    return root


def _check_evidence(
    seq: int, body: bytes, evidence: dict[str, bytes | None], report: Report
) -> None:
    try:
        data = json.loads(body)["data"]
        digest = data["digest"]
    except (ValueError, KeyError, TypeError):
        report.fail(f"event {seq}", "evidence.stored event without a digest")
        return
    if digest not in evidence:
        report.fail(f"event {seq}", f"evidence {digest[:16]}... is not stored")
        return
    stored = evidence[digest]
    if stored is None or hashlib.sha256(stored).hexdigest() != digest:
        report.fail(f"event {seq}", f"evidence {digest[:16]}... is damaged (digest mismatch)")
        return
    report.evidence_checked += 1
