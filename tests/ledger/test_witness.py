"""The witness decision and its file-backed store."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import (
    SIG_COSIGNATURE_V1,
    Checkpoint,
    NoteSigner,
    generate_signer,
    open_note,
    parse_note,
    sign_note,
)
from triz_ri_smart_ai_evaluator.ledger.merkle import (
    consistency_proof,
    leaf_hash,
    root_from_leaf_hashes,
)
from triz_ri_smart_ai_evaluator.ledger.witness import Witness, WitnessStore

ORIGIN = "log.example/events"
LEAVES = [leaf_hash(b"event %d" % i) for i in range(40)]
FORK = [*LEAVES[:10], *(leaf_hash(b"forged %d" % i) for i in range(30))]


class Log:
    """A test log: signs checkpoints of prefixes of a list of leaf hashes."""

    def __init__(self, leaves: list[bytes], signer: NoteSigner | None = None) -> None:
        self.leaves = leaves
        self.signer = signer or generate_signer(ORIGIN)

    def checkpoint(self, size: int) -> Checkpoint:
        return Checkpoint(ORIGIN, size, root_from_leaf_hashes(self.leaves[:size]))

    def note(self, size: int) -> str:
        return sign_note(self.checkpoint(size).to_body(), self.signer)

    def proof(self, old: int, new: int) -> list[bytes]:
        return consistency_proof(self.leaves, old, new)


@pytest.fixture
def log() -> Log:
    return Log(LEAVES)


@pytest.fixture
def witness() -> Witness:
    return Witness(generate_signer("witness.example/w1", sig_type=SIG_COSIGNATURE_V1))


def _cosign(
    witness: Witness, log: Log, previous: Checkpoint | None, size: int, proof: list[bytes]
) -> str:
    return witness.cosign(
        origin=ORIGIN,
        log_key=log.signer.verifier,
        previous=previous,
        note=log.note(size),
        proof=proof,
        timestamp=1_700_000_000 + size,
    ).note


# --- the pure decision ----------------------------------------------------------------------


def test_witness_accepts_a_consistent_growth_sequence(witness: Witness, log: Log) -> None:
    previous: Checkpoint | None = None
    for size in [1, 2, 3, 8, 8, 13, 32, 40]:
        proof = [] if previous is None else log.proof(previous.size, size)
        result = witness.cosign(
            origin=ORIGIN,
            log_key=log.signer.verifier,
            previous=previous,
            note=log.note(size),
            proof=proof,
            timestamp=1_700_000_000 + size,
        )
        assert result.checkpoint == log.checkpoint(size)
        body, signers = open_note(result.note, [log.signer.verifier, witness.cosigner.verifier])
        assert body == log.checkpoint(size).to_body()
        assert signers == [ORIGIN, "witness.example/w1"]
        assert parse_note(result.note)[1][1].cosignature_timestamp() == 1_700_000_000 + size
        previous = result.checkpoint


def test_witness_refuses_a_rollback_to_a_smaller_size(witness: Witness, log: Log) -> None:
    with pytest.raises(
        IntegrityError, match="rollback: size 5 is smaller than the cosigned size 8"
    ):
        _cosign(witness, log, log.checkpoint(8), 5, [])


def test_witness_refuses_a_different_root_at_the_same_size(witness: Witness, log: Log) -> None:
    forked = Log(FORK, log.signer)  # the same log key signing another history
    with pytest.raises(IntegrityError, match="split view: two roots at size 20"):
        _cosign(witness, forked, log.checkpoint(20), 20, [])


def test_witness_refuses_growth_of_a_forked_history(witness: Witness, log: Log) -> None:
    forked = Log(FORK, log.signer)
    # A proof honestly computed on the fork, from a size where the histories already differ.
    with pytest.raises(IntegrityError, match="consistency proof does not match the old root"):
        _cosign(witness, forked, log.checkpoint(20), 30, forked.proof(20, 30))


def test_witness_refuses_a_bad_consistency_proof(witness: Witness, log: Log) -> None:
    proof = log.proof(6, 13)
    assert len(proof) == 4
    bad = [proof[0], bytes([proof[1][0] ^ 1]) + proof[1][1:], *proof[2:]]
    with pytest.raises(IntegrityError, match="consistency proof does not match"):
        _cosign(witness, log, log.checkpoint(6), 13, bad)
    with pytest.raises(IntegrityError, match="from size 6 to 13 is empty"):
        _cosign(witness, log, log.checkpoint(6), 13, [])
    with pytest.raises(IntegrityError, match="too short"):
        _cosign(witness, log, log.checkpoint(6), 13, proof[:-1])
    with pytest.raises(IntegrityError, match="too long"):
        _cosign(witness, log, log.checkpoint(6), 13, [*proof, proof[0]])
    _cosign(witness, log, log.checkpoint(6), 13, proof)  # and the real proof passes


def test_witness_refuses_a_checkpoint_signed_by_another_key(witness: Witness, log: Log) -> None:
    impostor = Log(LEAVES, generate_signer(ORIGIN))  # same name, different key
    with pytest.raises(IntegrityError, match="no signature from a trusted key"):
        witness.cosign(
            origin=ORIGIN,
            log_key=log.signer.verifier,
            previous=None,
            note=impostor.note(3),
            proof=[],
            timestamp=1,
        )


def test_witness_refuses_a_checkpoint_for_another_origin(witness: Witness) -> None:
    other = Log(LEAVES, generate_signer("other.example/log"))
    note = sign_note(Checkpoint("other.example/log", 1, LEAVES[0]).to_body(), other.signer)
    with pytest.raises(IntegrityError, match=r"origin 'other\.example/log' is not the expected"):
        witness.cosign(
            origin=ORIGIN,
            log_key=other.signer.verifier,
            previous=None,
            note=note,
            proof=[],
            timestamp=1,
        )


def test_witness_refuses_a_proof_with_its_first_checkpoint(witness: Witness, log: Log) -> None:
    with pytest.raises(
        IntegrityError, match="first checkpoint of a log must come with an empty proof"
    ):
        _cosign(witness, log, None, 8, log.proof(4, 8))


def test_witness_needs_a_cosignature_key() -> None:
    with pytest.raises(InputError, match="cosignature/v1 key"):
        Witness(generate_signer("w"))


# --- the store ------------------------------------------------------------------------------


def _store_cosign(store: WitnessStore, log: Log, size: int, proof: list[bytes]) -> str:
    return store.cosign(
        origin=ORIGIN,
        log_key=log.signer.verifier,
        note=log.note(size),
        proof=proof,
        timestamp=1_700_000_000 + size,
    )


def test_store_creates_a_private_key_file_and_never_replaces_it(tmp_path: Path) -> None:
    store = WitnessStore(tmp_path / "witness")
    verifier = store.init("witness.example/w1")
    assert stat.S_IMODE(store.key_path.stat().st_mode) == 0o600
    assert store.signer().verifier == verifier
    before = store.key_path.read_bytes()
    with pytest.raises(InputError, match="already exists"):
        store.init("witness.example/w1")
    assert store.key_path.read_bytes() == before
    assert [p.name for p in store.directory.iterdir()] == ["witness.key"]  # no temp files left


def test_store_records_a_growth_sequence_and_its_history(tmp_path: Path, log: Log) -> None:
    store = WitnessStore(tmp_path)
    witness_key = store.init("witness.example/w1")
    assert store.latest(ORIGIN) is None
    notes = [_store_cosign(store, log, 3, []), _store_cosign(store, log, 8, log.proof(3, 8))]
    notes.append(_store_cosign(store, log, 40, log.proof(8, 40)))
    assert store.latest(ORIGIN) == log.checkpoint(40)
    assert store.history(ORIGIN) == [
        (1_700_000_003, notes[0]),
        (1_700_000_008, notes[1]),
        (1_700_000_040, notes[2]),
    ]
    assert open_note(notes[2], [witness_key])[1] == ["witness.example/w1"]
    with pytest.raises(IntegrityError, match="rollback"):
        _store_cosign(store, log, 20, [])
    with pytest.raises(IntegrityError, match="split view: two roots at size 40"):
        _store_cosign(store, Log(FORK, log.signer), 40, [])
    assert store.latest(ORIGIN) == log.checkpoint(40)
    assert len(store.history(ORIGIN)) == 3


def test_store_survives_a_corrupt_state_file_without_overwriting_it(
    tmp_path: Path, log: Log
) -> None:
    store = WitnessStore(tmp_path)
    store.init("witness.example/w1")
    _store_cosign(store, log, 8, [])
    state = next((tmp_path / "logs").glob("*/checkpoint"))
    corrupt = state.read_bytes().replace(b"\n8\n", b"\n9\n")  # also breaks our cosignature
    state.write_bytes(corrupt)
    with pytest.raises(
        IntegrityError, match=r"witness state .*checkpoint is corrupt .*left untouched"
    ):
        store.latest(ORIGIN)
    with pytest.raises(IntegrityError, match="is corrupt"):
        _store_cosign(store, log, 13, log.proof(8, 13))
    assert state.read_bytes() == corrupt
    assert len(store.history(ORIGIN)) == 1


def test_store_refuses_a_state_file_that_is_not_text(tmp_path: Path, log: Log) -> None:
    store = WitnessStore(tmp_path)
    store.init("witness.example/w1")
    _store_cosign(store, log, 8, [])
    state = next((tmp_path / "logs").glob("*/checkpoint"))
    state.write_bytes(b"\xff\x00garbage")
    with pytest.raises(IntegrityError, match=r"is corrupt .*not valid UTF-8"):
        store.latest(ORIGIN)
    assert state.read_bytes() == b"\xff\x00garbage"


def test_store_refuses_to_append_after_a_torn_history_line(tmp_path: Path, log: Log) -> None:
    store = WitnessStore(tmp_path)
    store.init("witness.example/w1")
    _store_cosign(store, log, 8, [])
    history = next((tmp_path / "logs").glob("*/history.jsonl"))
    torn = history.read_bytes() + b'{"note":"half'
    history.write_bytes(torn)
    with pytest.raises(IntegrityError, match="incomplete line"):
        _store_cosign(store, log, 13, log.proof(8, 13))
    assert history.read_bytes() == torn
    assert store.latest(ORIGIN) == log.checkpoint(8)
    with pytest.raises(IntegrityError, match="last line is incomplete"):
        store.history(ORIGIN)


def test_store_reports_a_missing_key_file_clearly(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"witness key not found: .*witness\.key"):
        WitnessStore(tmp_path).signer()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a key\n", "is corrupt: private key text must start with"),
        (b"PRIVATE+KEY+w+00000000+AAAA\n", "is corrupt"),
        (b"\xff\xfe\n", "is corrupt: not UTF-8"),
        (b"", "is corrupt: truncated"),
    ],
)
def test_store_reports_a_corrupt_key_file_clearly(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "witness.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(IntegrityError, match=message):
        WitnessStore(tmp_path).signer()


def test_store_refuses_a_key_file_readable_by_others(tmp_path: Path) -> None:
    store = WitnessStore(tmp_path)
    store.init("w")
    os.chmod(store.key_path, 0o644)
    with pytest.raises(InputError, match=r"accessible to other users .*chmod 600"):
        store.signer()


def test_store_refuses_a_plain_signing_key_as_witness_key(tmp_path: Path) -> None:
    path = tmp_path / "witness.key"
    path.write_text(generate_signer("w").private_key_text() + "\n")
    path.chmod(0o600)
    with pytest.raises(IntegrityError, match="not a cosignature/v1 key"):
        WitnessStore(tmp_path).signer()
