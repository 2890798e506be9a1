"""RFC 6962 Merkle tree hashing, inclusion and consistency proofs, and an append-only accumulator.

This module does no I/O: it works on hashes in memory and on a caller-supplied function that
returns the hash of a range of leaves.  It is the cryptographic core of the trusted, immutable
event log of the specification (9.2-9.3 trusted log, 10.4 immutability, 1.17 immutable log):
a root commits to every event, an inclusion proof shows one event is in it, and a consistency
proof shows a later root only appended to an earlier one.

Hashing is RFC 6962 section 2.1 (SHA-256 with domain-separating prefixes so that a leaf can never
be passed off as an interior node); proofs are generated as PATH and SUBPROOF of RFC 6962
2.1.1/2.1.2 and verified with the algorithms of RFC 9162 2.1.3.2 and 2.1.4.2.  Leaf indices
count from zero.  ``verify_*`` functions raise IntegrityError, ``check_*`` return a bool.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence

from triz_ri_smart_ai_evaluator.errors import EvaluatorError, InputError, IntegrityError

LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
# Sizes are uint64 on the wire (C2SP checkpoints, RFC 9162); no valid proof is longer than this.
MAX_TREE_SIZE = (1 << 64) - 1
MAX_PROOF_LENGTH = 65

SubtreeHash = Callable[[int, int], bytes]
"""``f(start, end)`` returns the Merkle tree hash of the leaves ``start <= i < end``."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data): the hash of one leaf (RFC 6962 2.1)."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right): the hash of an interior node (RFC 6962 2.1)."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2): RFC 6962's ``k``."""
    return 1 << ((n - 1).bit_length() - 1)


def _mth(hashes: Sequence[bytes]) -> bytes:
    """MTH of already validated leaf hashes, level by level: O(n) hashes, no recursion.

    Pairing neighbours and promoting an odd last node unchanged builds exactly the RFC 6962 tree
    (left subtrees are always the largest perfect ones), and list comprehensions keep the
    per-hash interpreter overhead low enough for millions of leaves.
    """
    if not hashes:
        return EMPTY_ROOT
    sha = hashlib.sha256
    level: Sequence[bytes] = hashes
    while len(level) > 1:
        m = len(level)
        nxt = [sha(NODE_PREFIX + level[i] + level[i + 1]).digest() for i in range(0, m - 1, 2)]
        if m % 2:
            nxt.append(level[m - 1])
        level = nxt
    return level[0]


def _size(value: object, what: str, error: type[EvaluatorError] = InputError) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_TREE_SIZE:
        raise error(f"{what} must be an integer between 0 and 2^64-1, got {value!r}")
    return value


def _hash(value: object, what: str, error: type[EvaluatorError] = InputError) -> bytes:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise error(f"{what} is not a {HASH_SIZE}-byte hash")
    return value


def _require_leaf_hashes(hashes: Sequence[bytes]) -> None:
    for i, h in enumerate(hashes):
        _hash(h, f"leaf hash {i}")


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """The RFC 6962 Merkle tree hash of ``hashes``; SHA-256(b"") for none.

    Raises InputError if an element is not a 32-byte hash.
    """
    _require_leaf_hashes(hashes)
    return _mth(hashes)


def _subtree_hasher(leaf_hashes: Sequence[bytes], size: int) -> SubtreeHash:
    if size > len(leaf_hashes):
        raise InputError(f"tree size {size} exceeds the {len(leaf_hashes)} leaf hashes given")
    _require_leaf_hashes(leaf_hashes[:size])
    return lambda start, end: _mth(leaf_hashes[start:end])


def inclusion_proof_from(subtree_hash: SubtreeHash, index: int, size: int) -> list[bytes]:
    """RFC 6962 PATH(index, D[0:size]) from a subtree-hash function, bottom-up.

    Calls ``subtree_hash`` once per proof element, so a log that stores subtree hashes serves
    proofs without reading all leaves.  Raises InputError unless ``0 <= index < size``.
    """
    _size(size, "tree size")
    _size(index, "leaf index")
    if index >= size:
        raise InputError(f"leaf index {index} is not below tree size {size}")
    path: list[bytes] = []
    start, end = 0, size
    # Walk down from the root; each step keeps the half holding the leaf and records the other.
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(subtree_hash(start + k, end))
            end = start + k
        else:
            path.append(subtree_hash(start, start + k))
            start += k
    path.reverse()
    return path


def consistency_proof_from(subtree_hash: SubtreeHash, old_size: int, new_size: int) -> list[bytes]:
    """RFC 6962 PROOF(old_size, D[0:new_size]) (SUBPROOF with b=true) from a subtree-hash function.

    Empty when ``old_size`` is 0 or equals ``new_size``.  Raises InputError unless
    ``0 <= old_size <= new_size``.
    """
    _size(old_size, "old tree size")
    _size(new_size, "new tree size")
    if old_size > new_size:
        raise InputError(f"old tree size {old_size} is larger than new tree size {new_size}")
    if old_size in (0, new_size):
        return []
    path: list[bytes] = []
    start, m, n = 0, old_size, new_size
    old_is_whole_subtree = True  # RFC 6962 flag b: the old tree's root is itself a node here
    while m != n:
        k = _split(n)
        if m <= k:
            path.append(subtree_hash(start + k, start + n))
            n = k
        else:
            path.append(subtree_hash(start, start + k))
            start, m, n = start + k, m - k, n - k
            old_is_whole_subtree = False
    if not old_is_whole_subtree:
        path.append(subtree_hash(start, start + n))
    path.reverse()
    return path


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int, size: int) -> list[bytes]:
    """Inclusion proof for leaf ``index`` in the tree of the first ``size`` leaf hashes; O(size).

    Raises InputError for an index outside the tree or a size beyond the hashes given.
    """
    return inclusion_proof_from(_subtree_hasher(leaf_hashes, size), index, size)


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int, new_size: int) -> list[bytes]:
    """Consistency proof from the tree of size ``old_size`` to ``new_size``; O(new_size).

    Raises InputError unless ``0 <= old_size <= new_size <= len(leaf_hashes)``.
    """
    return consistency_proof_from(_subtree_hasher(leaf_hashes, new_size), old_size, new_size)


def _evidence_proof(proof: Sequence[bytes], what: str) -> list[bytes]:
    # Bound the work before hashing anything: a longer proof cannot be valid for a uint64 size.
    if len(proof) > MAX_PROOF_LENGTH:
        raise IntegrityError(f"{what} has {len(proof)} hashes, more than any valid proof")
    return [_hash(p, f"{what} element {i}", IntegrityError) for i, p in enumerate(proof)]


def verify_inclusion(
    leaf_hash: bytes, *, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Verify that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with ``root``.

    RFC 9162 2.1.3.2.  Raises IntegrityError naming the first check that fails.
    """
    leaf = _hash(leaf_hash, "leaf hash", IntegrityError)
    want = _hash(root, "root hash", IntegrityError)
    index = _size(index, "leaf index", IntegrityError)
    size = _size(size, "tree size", IntegrityError)
    path = _evidence_proof(proof, "inclusion proof")
    if index >= size:
        raise IntegrityError(f"inclusion proof: leaf index {index} is not below tree size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise IntegrityError(f"inclusion proof for leaf {index} of {size} is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            # Skip levels where our node has no right sibling (the right edge of the tree).
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise IntegrityError(f"inclusion proof for leaf {index} of {size} is too short")
    if not hmac.compare_digest(r, want):
        raise IntegrityError(f"inclusion proof for leaf {index} of {size} does not match the root")


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Verify that the tree (``new_size``, ``new_root``) appends to (``old_size``, ``old_root``).

    RFC 9162 2.1.4.2, plus the trivial cases: equal sizes need an empty proof and equal roots;
    size 0 needs an empty proof and the empty-tree root (any new root extends it).
    Raises IntegrityError.
    """
    old = _hash(old_root, "old root hash", IntegrityError)
    new = _hash(new_root, "new root hash", IntegrityError)
    old_size = _size(old_size, "old tree size", IntegrityError)
    new_size = _size(new_size, "new tree size", IntegrityError)
    path = _evidence_proof(proof, "consistency proof")
    if old_size > new_size:
        raise IntegrityError(f"consistency: old size {old_size} is larger than new size {new_size}")
    if old_size in (0, new_size):
        if path:
            raise IntegrityError(
                f"consistency proof from size {old_size} to {new_size} must be empty"
            )
        if old_size == 0 and not hmac.compare_digest(old, EMPTY_ROOT):
            raise IntegrityError("consistency: the root of an empty tree must be SHA-256 of ''")
        if old_size == new_size and not hmac.compare_digest(old, new):
            raise IntegrityError(f"consistency: two different roots for tree size {old_size}")
        return
    if not path:
        raise IntegrityError(f"consistency proof from size {old_size} to {new_size} is empty")
    if old_size & (old_size - 1) == 0:
        # The old root is a node of the new tree; RFC 6962 leaves it out of the proof.
        path.insert(0, old)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise IntegrityError(f"consistency proof from {old_size} to {new_size} is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise IntegrityError(f"consistency proof from {old_size} to {new_size} is too short")
    if not hmac.compare_digest(fr, old):
        raise IntegrityError(f"consistency proof does not match the old root at size {old_size}")
    if not hmac.compare_digest(sr, new):
        raise IntegrityError(f"consistency proof does not match the new root at size {new_size}")


def check_inclusion(
    leaf_hash: bytes, *, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """True if :func:`verify_inclusion` accepts; never raises."""
    try:
        verify_inclusion(leaf_hash, index=index, size=size, proof=proof, root=root)
    except IntegrityError:
        return False
    return True


def check_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """True if :func:`verify_consistency` accepts; never raises."""
    try:
        verify_consistency(
            old_size=old_size, new_size=new_size, old_root=old_root, new_root=new_root, proof=proof
        )
    except IntegrityError:
        return False
    return True


class MerkleAccumulator:
    """The compact range [0, size): roots of the perfect subtrees of an append-only tree.

    Holds one hash per set bit of ``size`` (at most 64), so a ledger keeps its current root while
    appending millions of events without keeping or rehashing the leaves (spec 1.17, 10.4).
    """

    __slots__ = ("_peaks", "_size")

    def __init__(self) -> None:
        self._size = 0
        self._peaks: list[bytes] = []  # left to right, heights strictly decreasing

    @classmethod
    def from_state(cls, size: int, peaks: Sequence[bytes]) -> MerkleAccumulator:
        """Restore an accumulator saved as (size, peaks).

        Raises InputError if the number of peaks does not match ``size`` or a peak is malformed.
        """
        _size(size, "accumulator size")
        if len(peaks) != size.bit_count():
            raise InputError(f"size {size} needs {size.bit_count()} peaks, got {len(peaks)}")
        _require_leaf_hashes(peaks)
        acc = cls()
        acc._size, acc._peaks = size, list(peaks)
        return acc

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    @property
    def peaks(self) -> tuple[bytes, ...]:
        """The perfect-subtree roots, left to right (the state to persist)."""
        return tuple(self._peaks)

    def append(self, leaf_hash: bytes) -> int:
        """Append one leaf hash; return its index.  Raises InputError for a malformed hash."""
        _hash(leaf_hash, "leaf hash")
        if self._size == MAX_TREE_SIZE:
            raise InputError("the tree is full")
        index = self._size
        node, carry = leaf_hash, index
        # Like binary increment: each trailing 1 bit of the old size is a peak of equal height.
        while carry & 1:
            node = node_hash(self._peaks.pop(), node)
            carry >>= 1
        self._peaks.append(node)
        self._size = index + 1
        return index

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append several leaf hashes in order.  Raises InputError for a malformed hash."""
        for h in leaf_hashes:
            self.append(h)

    def root(self) -> bytes:
        """The RFC 6962 root of the leaves appended so far (SHA-256 of '' when empty)."""
        if not self._peaks:
            return EMPTY_ROOT
        r = self._peaks[-1]
        for peak in reversed(self._peaks[:-1]):
            r = node_hash(peak, r)
        return r
