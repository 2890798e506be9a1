"""The cryptographic core of the tamper-evident event log (spec 9.2-9.3, 10.4, 1.17).

``merkle`` (RFC 6962 trees and proofs) and ``checkpoint`` (C2SP signed notes, checkpoints and
cosignatures) do no I/O; ``witness`` adds the cosigning decision and its file-backed store.
"""

from __future__ import annotations

from .checkpoint import (
    SIG_COSIGNATURE_V1,
    SIG_ED25519,
    Checkpoint,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    add_signature,
    cosignature_message,
    generate_signer,
    key_id,
    open_note,
    parse_note,
    parse_private_key,
    parse_vkey,
    sign_note,
)
from .merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    LEAF_PREFIX,
    NODE_PREFIX,
    MerkleAccumulator,
    SubtreeHash,
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
from .witness import Cosigned, Witness, WitnessStore

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "LEAF_PREFIX",
    "NODE_PREFIX",
    "SIG_COSIGNATURE_V1",
    "SIG_ED25519",
    "Checkpoint",
    "Cosigned",
    "MerkleAccumulator",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "SubtreeHash",
    "Witness",
    "WitnessStore",
    "add_signature",
    "check_consistency",
    "check_inclusion",
    "consistency_proof",
    "consistency_proof_from",
    "cosignature_message",
    "generate_signer",
    "inclusion_proof",
    "inclusion_proof_from",
    "key_id",
    "leaf_hash",
    "node_hash",
    "open_note",
    "parse_note",
    "parse_private_key",
    "parse_vkey",
    "root_from_leaf_hashes",
    "sign_note",
    "verify_consistency",
    "verify_inclusion",
]
