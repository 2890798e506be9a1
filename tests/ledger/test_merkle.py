"""RFC 6962 Merkle tree: golden vectors, property tests and a pymerkle cross-check.

Golden vectors: the Certificate Transparency test data as published in
github.com/transparency-dev/merkle (testonly/constants.go: leaf inputs, node and root hashes;
proof/verify_test.go: inclusion and consistency proofs), the same data the Go and C++ CT
implementations use.  Their inclusion vectors number leaves from 1; here indices are 0-based.
"""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError
from triz_ri_smart_ai_evaluator.ledger.merkle import (
    EMPTY_ROOT,
    LEAF_PREFIX,
    NODE_PREFIX,
    MerkleAccumulator,
    check_consistency,
    check_inclusion,
    consistency_proof,
    consistency_proof_from,
    inclusion_proof,
    inclusion_proof_from,
    leaf_hash,
    node_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text)


LEAF_INPUTS = [
    h(x)
    for x in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
LEAF_HASHES = [leaf_hash(x) for x in LEAF_INPUTS]

# NODE_HASHES[level][i]: hashes of the complete subtrees (level 0 = leaves).
NODE_HASHES = [
    [
        h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
        h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
        h("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7"),
        h("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7"),
        h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        h("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658"),
        h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
        h("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1"),
    ],
    [
        h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
        h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
        h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
        h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
    ],
    [
        h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
    ],
    [h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]

# ROOTS[n] is the root of the tree of the first n leaves.
ROOTS = [
    h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
    h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
    h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
    h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
    h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
    h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
    h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
    h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
]

# (0-based leaf index, tree size, proof)
INCLUSION_VECTORS = [
    (0, 1, []),
    (
        0,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (2, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        1,
        5,
        [
            h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
]

# (old size, new size, proof)
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]

SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")


# --- golden vectors -----------------------------------------------------------------------


def test_hash_prefixes_and_empty_root_are_rfc6962() -> None:
    assert LEAF_PREFIX == b"\x00"
    assert NODE_PREFIX == b"\x01"
    assert EMPTY_ROOT == hashlib.sha256(b"").digest() == ROOTS[0]
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    assert (
        node_hash(b"L" * 32, b"R" * 32) == hashlib.sha256(b"\x01" + b"L" * 32 + b"R" * 32).digest()
    )


def test_leaf_hashes_match_golden_vectors() -> None:
    assert [leaf_hash(x) for x in LEAF_INPUTS] == NODE_HASHES[0]


@pytest.mark.parametrize("size", range(9))
def test_root_matches_golden_vector_for_every_size(size: int) -> None:
    assert root_from_leaf_hashes(LEAF_HASHES[:size]) == ROOTS[size]


def test_complete_subtree_hashes_match_golden_vectors() -> None:
    for level, nodes in enumerate(NODE_HASHES):
        width = 1 << level
        for i, node in enumerate(nodes):
            assert root_from_leaf_hashes(LEAF_HASHES[i * width : (i + 1) * width]) == node


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION_VECTORS)
def test_inclusion_proof_matches_golden_vector_and_verifies(
    index: int, size: int, proof: list[bytes]
) -> None:
    assert inclusion_proof(LEAF_HASHES, index, size) == proof
    verify_inclusion(LEAF_HASHES[index], index=index, size=size, proof=proof, root=ROOTS[size])


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY_VECTORS)
def test_consistency_proof_matches_golden_vector_and_verifies(
    old: int, new: int, proof: list[bytes]
) -> None:
    assert consistency_proof(LEAF_HASHES, old, new) == proof
    verify_consistency(
        old_size=old, new_size=new, old_root=ROOTS[old], new_root=ROOTS[new], proof=proof
    )


Probe = tuple[bytes, int, int, list[bytes], bytes]


def _inclusion_probes(index: int, size: int, proof: list[bytes]) -> dict[str, Probe]:
    leaf, root = LEAF_HASHES[index], ROOTS[size]
    probes = {
        "index - 1": (leaf, index - 1, size, proof, root),
        "index + 1": (leaf, index + 1, size, proof, root),
        "index ^ 2": (leaf, index ^ 2, size, proof, root),
        "size * 2": (leaf, index, size * 2, proof, root),
        "size // 2": (leaf, index, size // 2, proof, root),
        "wrong leaf": (leaf_hash(b"WrongLeaf"), index, size, proof, root),
        "empty root": (leaf, index, size, proof, EMPTY_ROOT),
        "random root": (leaf, index, size, proof, SOME_HASH),
        "trailing root": (leaf, index, size, [*proof, root], root),
        "preceding root": (leaf, index, size, [root, *proof], root),
    }
    if proof:
        probes["removed last"] = (leaf, index, size, proof[:-1], root)
    for i in range(len(proof)):
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 8]) + bad[i][1:]
        probes[f"flipped proof[{i}]"] = (leaf, index, size, bad, root)
    return probes


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION_VECTORS)
def test_corrupted_golden_inclusion_proofs_are_refused(
    index: int, size: int, proof: list[bytes]
) -> None:
    for desc, (leaf, i, n, p, root) in _inclusion_probes(index, size, proof).items():
        assert not check_inclusion(leaf, index=i, size=n, proof=p, root=root), desc


@pytest.mark.parametrize(("old", "new", "proof"), [v for v in CONSISTENCY_VECTORS if v[2]])
def test_corrupted_golden_consistency_proofs_are_refused(
    old: int, new: int, proof: list[bytes]
) -> None:
    r1, r2 = ROOTS[old], ROOTS[new]
    probes = {
        "old - 1": (old - 1, new, r1, r2, proof),
        "old + 1": (old + 1, new, r1, r2, proof),
        "old ^ 2": (old ^ 2, new, r1, r2, proof),
        "new * 2": (old, new * 2, r1, r2, proof),
        "new // 2": (old, new // 2, r1, r2, proof),
        "wrong old root": (old, new, SOME_HASH, r2, proof),
        "wrong new root": (old, new, r1, SOME_HASH, proof),
        "swapped roots": (old, new, r2, r1, proof),
        "empty proof": (old, new, r1, r2, []),
        "trailing old root": (old, new, r1, r2, [*proof, r1]),
        "trailing new root": (old, new, r1, r2, [*proof, r2]),
        "preceding old root": (old, new, r1, r2, [r1, *proof]),
        "preceding proof[0]": (old, new, r1, r2, [proof[0], *proof]),
        "truncated": (old, new, r1, r2, proof[:-1]),
    }
    for i in range(len(proof)):
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 16]) + bad[i][1:]
        probes[f"flipped proof[{i}]"] = (old, new, r1, r2, bad)
    for desc, (m, n, a, b, p) in probes.items():
        assert not check_consistency(old_size=m, new_size=n, old_root=a, new_root=b, proof=p), desc


# --- edge cases -----------------------------------------------------------------------------


def test_verify_inclusion_refuses_index_at_or_beyond_size_with_clear_message() -> None:
    with pytest.raises(IntegrityError, match="leaf index 1 is not below tree size 1"):
        verify_inclusion(ROOTS[1], index=1, size=1, proof=[], root=ROOTS[1])
    with pytest.raises(IntegrityError, match="not below tree size 0"):
        verify_inclusion(EMPTY_ROOT, index=0, size=0, proof=[], root=EMPTY_ROOT)


def test_verify_inclusion_reports_too_long_too_short_and_wrong_root() -> None:
    index, size, proof = INCLUSION_VECTORS[2]
    leaf, root = LEAF_HASHES[index], ROOTS[size]
    with pytest.raises(IntegrityError, match="too long"):
        verify_inclusion(leaf, index=index, size=size, proof=[*proof, SOME_HASH], root=root)
    with pytest.raises(IntegrityError, match="too short"):
        verify_inclusion(leaf, index=index, size=size, proof=proof[:-1], root=root)
    with pytest.raises(IntegrityError, match="does not match the root"):
        verify_inclusion(LEAF_HASHES[index + 1], index=index, size=size, proof=proof, root=root)


def test_verify_inclusion_refuses_malformed_hashes() -> None:
    with pytest.raises(IntegrityError, match="leaf hash is not a 32-byte hash"):
        verify_inclusion(b"short", index=0, size=1, proof=[], root=ROOTS[1])
    with pytest.raises(IntegrityError, match="inclusion proof element 0"):
        verify_inclusion(LEAF_HASHES[0], index=0, size=2, proof=[b""], root=ROOTS[2])
    with pytest.raises(IntegrityError, match="more than any valid proof"):
        verify_inclusion(LEAF_HASHES[0], index=0, size=2, proof=[SOME_HASH] * 66, root=ROOTS[2])


def test_consistency_between_equal_sizes_needs_empty_proof_and_equal_roots() -> None:
    verify_consistency(old_size=5, new_size=5, old_root=ROOTS[5], new_root=ROOTS[5], proof=[])
    with pytest.raises(IntegrityError, match="two different roots for tree size 5"):
        verify_consistency(old_size=5, new_size=5, old_root=ROOTS[5], new_root=ROOTS[4], proof=[])
    with pytest.raises(IntegrityError, match="must be empty"):
        verify_consistency(
            old_size=5, new_size=5, old_root=ROOTS[5], new_root=ROOTS[5], proof=[ROOTS[5]]
        )


def test_consistency_from_empty_tree_needs_empty_proof_and_empty_root() -> None:
    assert consistency_proof(LEAF_HASHES, 0, 8) == []
    verify_consistency(old_size=0, new_size=8, old_root=EMPTY_ROOT, new_root=ROOTS[8], proof=[])
    with pytest.raises(IntegrityError, match="must be empty"):
        verify_consistency(
            old_size=0, new_size=8, old_root=EMPTY_ROOT, new_root=ROOTS[8], proof=[ROOTS[8]]
        )
    with pytest.raises(IntegrityError, match="root of an empty tree"):
        verify_consistency(old_size=0, new_size=8, old_root=SOME_HASH, new_root=ROOTS[8], proof=[])


def test_consistency_refuses_shrinking_and_empty_proof_for_growth() -> None:
    with pytest.raises(IntegrityError, match="old size 5 is larger than new size 4"):
        verify_consistency(old_size=5, new_size=4, old_root=ROOTS[5], new_root=ROOTS[4], proof=[])
    with pytest.raises(IntegrityError, match="from size 4 to 5 is empty"):
        verify_consistency(old_size=4, new_size=5, old_root=ROOTS[4], new_root=ROOTS[5], proof=[])


def test_proof_generation_refuses_impossible_requests() -> None:
    with pytest.raises(InputError, match="leaf index 8 is not below tree size 8"):
        inclusion_proof(LEAF_HASHES, 8, 8)
    with pytest.raises(InputError, match="exceeds the 8 leaf hashes"):
        inclusion_proof(LEAF_HASHES, 0, 9)
    with pytest.raises(InputError, match="old tree size 5 is larger"):
        consistency_proof(LEAF_HASHES, 5, 4)
    with pytest.raises(InputError, match="leaf hash 1 is not a 32-byte hash"):
        root_from_leaf_hashes([LEAF_HASHES[0], b"x"])
    with pytest.raises(InputError, match="leaf index"):
        inclusion_proof(LEAF_HASHES, -1, 8)


def test_accumulator_matches_golden_roots_and_restores_from_peaks() -> None:
    acc = MerkleAccumulator()
    assert acc.root() == ROOTS[0]
    for n, leaf in enumerate(LEAF_HASHES, 1):
        assert acc.append(leaf) == n - 1
        assert acc.size == n
        assert acc.root() == ROOTS[n]
        assert len(acc.peaks) == bin(n).count("1")
    assert acc.peaks == (NODE_HASHES[3][0],)
    seven = MerkleAccumulator()
    seven.extend(LEAF_HASHES[:7])
    assert seven.peaks == (NODE_HASHES[2][0], NODE_HASHES[1][2], NODE_HASHES[0][6])
    restored = MerkleAccumulator.from_state(7, seven.peaks)
    restored.append(LEAF_HASHES[7])
    assert restored.root() == ROOTS[8]
    with pytest.raises(InputError, match="size 7 needs 3 peaks, got 2"):
        MerkleAccumulator.from_state(7, seven.peaks[:2])


def test_proofs_from_a_subtree_callable_ask_only_for_the_proof_nodes() -> None:
    """A large log can serve proofs from stored subtree hashes: one lookup per proof element."""
    size = 1_000_003
    calls: list[tuple[int, int]] = []

    def fake_subtree(start: int, end: int) -> bytes:
        calls.append((start, end))
        return hashlib.sha256(f"{start}:{end}".encode()).digest()

    proof = inclusion_proof_from(fake_subtree, 777_777, size)
    assert len(proof) == len(calls) <= math.ceil(math.log2(size))
    calls.clear()
    proof = consistency_proof_from(fake_subtree, 654_321, size)
    assert len(proof) == len(calls) <= math.ceil(math.log2(size)) + 1


def test_large_tree_root_and_proofs_agree_with_accumulator() -> None:
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(70_001)]
    acc = MerkleAccumulator()
    acc.extend(leaves)
    root = root_from_leaf_hashes(leaves)
    assert acc.root() == root
    proof = inclusion_proof(leaves, 65_536, len(leaves))
    verify_inclusion(leaves[65_536], index=65_536, size=len(leaves), proof=proof, root=root)
    old_root = root_from_leaf_hashes(leaves[:65_537])
    proof = consistency_proof(leaves, 65_537, len(leaves))
    verify_consistency(
        old_size=65_537, new_size=len(leaves), old_root=old_root, new_root=root, proof=proof
    )


# --- property tests -------------------------------------------------------------------------


def _distinct_leaves(n: int, salt: bytes) -> list[bytes]:
    # Distinct leaves, so that a proof for another index can only verify through a collision.
    return [leaf_hash(salt + i.to_bytes(4, "big")) for i in range(n)]


def _flip(proof: list[bytes], element: int, byte: int) -> list[bytes]:
    bad = list(proof)
    item = bytearray(bad[element])
    item[byte % 32] ^= 1
    bad[element] = bytes(item)
    return bad


PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(data=st.data(), n=st.integers(1, 300), salt=st.binary(max_size=8))
def test_every_inclusion_proof_verifies_and_any_change_breaks_it(
    data: st.DataObject, n: int, salt: bytes
) -> None:
    leaves = _distinct_leaves(n, salt)
    root = root_from_leaf_hashes(leaves)
    index = data.draw(st.integers(0, n - 1), label="index")
    proof = inclusion_proof(leaves, index, n)
    assert len(proof) <= math.ceil(math.log2(n))  # n == 1: log2(1) = 0, an empty proof
    verify_inclusion(leaves[index], index=index, size=n, proof=proof, root=root)

    if proof:
        element = data.draw(st.integers(0, len(proof) - 1), label="element")
        byte = data.draw(st.integers(0, 31), label="byte")
        assert not check_inclusion(
            leaves[index], index=index, size=n, proof=_flip(proof, element, byte), root=root
        )
    other = data.draw(st.integers(0, n + 5).filter(lambda i: i != index), label="other index")
    assert not check_inclusion(leaves[index], index=other, size=n, proof=proof, root=root)
    bad_leaf = _flip([leaves[index]], 0, data.draw(st.integers(0, 31), label="leaf byte"))[0]
    assert not check_inclusion(bad_leaf, index=index, size=n, proof=proof, root=root)
    bad_root = _flip([root], 0, data.draw(st.integers(0, 31), label="root byte"))[0]
    assert not check_inclusion(leaves[index], index=index, size=n, proof=proof, root=bad_root)


@PROPERTY_SETTINGS
@given(data=st.data(), n=st.integers(1, 300), salt=st.binary(max_size=8))
def test_every_consistency_proof_verifies_and_a_different_old_root_fails(
    data: st.DataObject, n: int, salt: bytes
) -> None:
    leaves = _distinct_leaves(n, salt)
    m = data.draw(st.integers(0, n), label="old size")
    old_root, new_root = root_from_leaf_hashes(leaves[:m]), root_from_leaf_hashes(leaves)
    proof = consistency_proof(leaves, m, n)
    assert len(proof) <= math.ceil(math.log2(n)) + 1
    verify_consistency(old_size=m, new_size=n, old_root=old_root, new_root=new_root, proof=proof)

    byte = data.draw(st.integers(0, 31), label="byte")
    bad_old = _flip([old_root], 0, byte)[0]
    assert not check_consistency(
        old_size=m, new_size=n, old_root=bad_old, new_root=new_root, proof=proof
    )
    if m > 0:  # the empty tree is a prefix of every tree, so only m > 0 constrains new_root
        bad_new = _flip([new_root], 0, byte)[0]
        assert not check_consistency(
            old_size=m, new_size=n, old_root=old_root, new_root=bad_new, proof=proof
        )
    if proof:
        element = data.draw(st.integers(0, len(proof) - 1), label="element")
        bad = _flip(proof, element, byte)
        assert not check_consistency(
            old_size=m, new_size=n, old_root=old_root, new_root=new_root, proof=bad
        )
    if 0 < m < n:
        # A root that really exists in the log, but at another size, must not pass either.
        other = data.draw(st.integers(1, n).filter(lambda k: k != m), label="other size")
        assert not check_consistency(
            old_size=m,
            new_size=n,
            old_root=root_from_leaf_hashes(leaves[:other]),
            new_root=new_root,
            proof=proof,
        )


@settings(max_examples=60, deadline=None)
@given(leaves=st.lists(st.binary(max_size=16), max_size=200))
def test_accumulator_root_equals_batch_root_for_every_prefix(leaves: list[bytes]) -> None:
    hashes = [leaf_hash(x) for x in leaves]
    acc = MerkleAccumulator()
    assert acc.root() == EMPTY_ROOT
    for n, item in enumerate(hashes, 1):
        acc.append(item)
        assert acc.root() == root_from_leaf_hashes(hashes[:n])
        assert MerkleAccumulator.from_state(acc.size, acc.peaks).root() == acc.root()


# --- pymerkle cross-check -------------------------------------------------------------------


def test_roots_and_inclusion_paths_agree_with_pymerkle() -> None:
    """pymerkle with sha256 and its default 'security' mode hashes exactly like RFC 6962
    (0x00 leaf prefix, 0x01 node prefix, SHA-256('') for the empty tree, largest-power-of-two
    split), so roots and inclusion paths must be identical.  Its consistency proofs are a
    different (longer) encoding when the old size sits on a split point, so for those only the
    roots that its proofs resolve to are compared.
    """
    pymerkle = pytest.importorskip("pymerkle")
    tree = pymerkle.InmemoryTree(algorithm="sha256")
    data = [b"event-%d" % i for i in range(70)]
    hashes = [leaf_hash(x) for x in data]
    for x in data:
        tree.append_entry(x)
    assert tree.get_root(0) == EMPTY_ROOT
    for size in range(1, len(data) + 1):
        assert tree.get_root(size) == root_from_leaf_hashes(hashes[:size])
        for index in range(size):
            theirs = tree.prove_inclusion(index + 1, size)  # pymerkle counts leaves from 1
            assert theirs.path[0] == hashes[index]
            assert theirs.path[1:] == inclusion_proof(hashes, index, size)
        for old in range(1, size + 1):
            theirs = tree.prove_consistency(old, size)
            pymerkle.verify_consistency(
                root_from_leaf_hashes(hashes[:old]), root_from_leaf_hashes(hashes[:size]), theirs
            )
