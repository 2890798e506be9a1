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
from .merkle import EMPTY_ROOT, HASH_SIZE, LEAF_PREFIX, NODE_PREFIX

# The top-level kind sits right before the chain link in a canonical body, so matching it at
# that exact place cannot be fooled by a nested "kind" inside the data.
_EVIDENCE_KIND = b',"kind":"evidence.stored"'
_AT_FIELD = b'","at":"'
_STAMP_LENGTH = 27  # YYYY-MM-DDTHH:MM:SS.ffffffZ


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
    #: The largest size the witness cosigned (None when no witness was checked): the events
    #: after it rest on the log's own signature only (issue 11).
    witnessed_size: int | None = None
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
            "witnessed_size": self.witnessed_size,
            "after_witness": (None if self.witnessed_size is None
                              else max(self.size - self.witnessed_size, 0)),
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


@dataclass(slots=True)
class Links:
    """Stage 1 over a range of rows: packed leaf hashes and the first broken link, if any."""

    first_seq: int
    count: int = 0
    leaves: bytearray = field(default_factory=bytearray)
    first_prev: str | None = None
    evidence_events: list[tuple[int, bytes]] = field(default_factory=list)
    problem: tuple[str, str] | None = None
    last_leaf: str | None = None
    #: With snapshots requested: the compact range [first_seq - 1, size) at each anchor size,
    #: and at the end of the range, as (level, hash) nodes (see ``push``).
    snapshots: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    final: list[tuple[int, bytes]] = field(default_factory=list)


def push(nodes: list[tuple[int, bytes]], start: int, level: int, node: bytes) -> None:
    """Append the perfect subtree of height ``level`` that starts at leaf index ``start`` to a
    compact range ``nodes`` that ends exactly there, merging with left siblings (RFC 6962).

    A node is a right child when bit ``level`` of its start is set; its left sibling is then the
    last node, of the same height.  Works for ranges that do not start at 0, which lets ranges
    checked in different processes be merged.
    """
    sha = hashlib.sha256
    while nodes and nodes[-1][0] == level and (start >> level) & 1:
        node = sha(NODE_PREFIX + nodes.pop()[1] + node).digest()
        start -= 1 << level
        level += 1
    nodes.append((level, node))


def merged_root(
    prefix: list[tuple[int, bytes]], prefix_size: int, part: list[tuple[int, bytes]]
) -> tuple[list[tuple[int, bytes]], bytes]:
    """Merge the compact range [0, prefix_size) with ``part`` (which starts at prefix_size);
    return the merged range and its root."""
    nodes = list(prefix)
    position = prefix_size
    for level, node in part:
        push(nodes, position, level, node)
        position += 1 << level
    return nodes, _root([n for _, n in nodes])


def check_links(
    rows: Iterable[tuple[int, bytes, str, str | None]],
    *,
    first_seq: int = 1,
    prev: str | None = GENESIS_PREV,
    snapshot_at: frozenset[int] | None = None,
) -> Links:
    """Contiguity, declared position and chain links of consecutive rows from ``first_seq``,
    and agreement of each row's indexed ``kind`` and ``attempt`` columns with its body (a lying
    index would make ``attempt show`` list another attempt's events).

    With ``prev=None`` the first row's link is not checked but reported as ``first_prev``, so a
    range checked in another process can be stitched to the one before it.  With
    ``snapshot_at`` the range's own compact Merkle range is kept (instead of every leaf) and
    copied at each of those sizes.
    """
    out = Links(first_seq)
    expected = first_seq
    sha = hashlib.sha256
    leaves = out.leaves
    want = prev.encode() if prev is not None else None
    for seq, body, kind, attempt in rows:
        if seq != expected:
            out.problem = (f"event {expected}", f"missing; the next stored event is {seq}")
            return out
        if want is None:
            out.first_prev = prev_in_body(body)
            want = (out.first_prev or "").encode()
        # A canonical body ends with its chain link and its own position (events.py): one
        # comparison checks both without parsing the JSON.
        tail = b',"prev":"%s","seq":%d,"v":1}' % (want, seq)
        if not body.endswith(tail):
            if prev_in_body(body) != want.decode():
                out.problem = (f"event {seq}", "chain link broken: prev is not the previous leaf")
            else:
                out.problem = (f"event {seq}", "body does not declare its own position")
            return out
        kind_end = len(body) - len(tail)
        if not _index_agrees(body, kind_end, kind, attempt):
            out.problem = (f"event {seq}", "indexed kind or attempt column differs from the body")
            return out
        leaf = sha(LEAF_PREFIX + body).digest()
        if snapshot_at is None:
            leaves += leaf
        else:
            push(out.final, seq - 1, 0, leaf)
            if seq in snapshot_at:
                out.snapshots[seq] = list(out.final)
        want = leaf.hex().encode()
        if body.endswith(_EVIDENCE_KIND, 0, kind_end):
            out.evidence_events.append((seq, body))
        expected += 1
    out.count = expected - first_seq
    out.last_leaf = want.decode() if out.count and want is not None else None
    return out


def _index_agrees(body: bytes, kind_end: int, kind: str, attempt: str | None) -> bool:
    """Whether the columns match the body's top-level ``kind`` (just before the chain link)
    and ``attempt`` (right after ``at``; an actor never contains a quote, events.py)."""
    if not body.endswith(b',"kind":"%s"' % kind.encode(), 0, kind_end):
        return False
    at = body.find(_AT_FIELD)
    if at < 0:
        return False
    value = b"null" if attempt is None else b'"%s"' % attempt.encode()
    return body.startswith(b'","attempt":%s,"data":' % value, at + len(_AT_FIELD) + _STAMP_LENGTH)


def check_roots(leaves: bytes | bytearray, anchors: Sequence[Anchor], report: Report) -> None:
    """Stage 2: the RFC 6962 root at every anchor size, from packed leaf hashes in order."""
    sizes = {a.size for a in anchors}
    roots: dict[int, bytes] = {}
    # The Merkle frontier is kept inline (not via MerkleAccumulator): this loop is the hot path
    # of verification and the accumulator's per-call checks would double its cost.
    peaks: list[bytes] = []
    sha = hashlib.sha256
    node_prefix = NODE_PREFIX
    size = len(leaves) // HASH_SIZE
    view = memoryview(leaves)
    for index in range(size):
        node = bytes(view[index * HASH_SIZE : (index + 1) * HASH_SIZE])
        carry = index
        while carry & 1:
            node = sha(node_prefix + peaks.pop() + node).digest()
            carry >>= 1
        peaks.append(node)
        if index + 1 in sizes:
            roots[index + 1] = _root(peaks)
    check_anchor_roots(roots, size, anchors, report)


def check_anchor_roots(
    roots: dict[int, bytes], size: int, anchors: Sequence[Anchor], report: Report
) -> None:
    """Compare recomputed roots with every anchor, in size order; name the narrowest range
    that must hold the first divergence, and anchors beyond the end of the log."""
    # Divergence lies after the largest size a WITNESS vouched for and the log reproduces: the
    # log's own checkpoints may have been re-signed by an owner rewriting the tail, so they
    # narrow the range only when no witness checkpoint exists at all.
    witnessed = any(a.by == "witness" for a in anchors)
    good_size = 0
    for anchor in sorted(anchors, key=lambda a: a.size):
        if anchor.size > size:
            report.fail(
                f"events {min(good_size, size) + 1}..{anchor.size}",
                f"the {anchor.by} signed a checkpoint at size {anchor.size} but the log ends at "
                f"{size} (events were removed)",
            )
            return
        if roots.get(anchor.size) != anchor.root:
            report.fail(
                f"events {good_size + 1}..{anchor.size}",
                f"root at size {anchor.size} differs from the {anchor.by}'s signed checkpoint",
            )
            return
        if anchor.by == "witness":
            report.witnessed_checked += 1
        else:
            report.checkpoints_checked += 1
        if anchor.by == "witness" or not witnessed:
            good_size = anchor.size
    report.size = size


def finish(
    links: Links,
    anchors: Sequence[Anchor],
    report: Report,
    *,
    evidence: dict[str, bytes | None] | None,
) -> None:
    """Report a broken link, else check evidence and the roots at every anchor."""
    if links.problem is not None:
        report.fail(*links.problem)
        return
    if evidence is not None:
        for seq, body in links.evidence_events:
            check_evidence(seq, body, evidence, report)
    check_roots(links.leaves, anchors, report)


def _root(peaks: list[bytes]) -> bytes:
    """RFC 6962 root from the perfect-subtree roots, left to right."""
    if not peaks:
        return EMPTY_ROOT
    root = peaks[-1]
    for peak in reversed(peaks[:-1]):
        root = hashlib.sha256(NODE_PREFIX + peak + root).digest()
    return root


def check_evidence(
    seq: int, body: bytes, evidence: dict[str, bytes | None], report: Report
) -> None:
    try:
        data = json.loads(body)["data"]
        digest = data["digest"]
    except (ValueError, KeyError, TypeError):
        report.fail(f"event {seq}", "evidence.stored event without a digest")
        return
    if not isinstance(digest, str):
        report.fail(f"event {seq}", f"evidence digest is a {type(digest).__name__}, not text")
        return
    if digest not in evidence:
        report.fail(f"event {seq}", f"evidence {digest[:16]}... is not stored")
        return
    stored = evidence[digest]
    if stored is None or hashlib.sha256(stored).hexdigest() != digest:
        report.fail(f"event {seq}", f"evidence {digest[:16]}... is damaged (digest mismatch)")
        return
    report.evidence_checked += 1
