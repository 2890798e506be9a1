"""C2SP signed notes, checkpoints and cosignatures.

Golden vectors: the PeterNeumann / EnochRoot keys and signatures of golang.org/x/mod
(sumdb/note/note_test.go), the vkeys and the cosignature timestamp of
github.com/transparency-dev/formats (note/note_cosigv1_test.go), and the example checkpoint of
c2sp.org/tlog-checkpoint.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError
from triz_ri_smart_ai_evaluator.ledger.checkpoint import (
    SIG_COSIGNATURE_V1,
    SIG_ED25519,
    Checkpoint,
    NoteSignature,
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
from triz_ri_smart_ai_evaluator.ledger.merkle import EMPTY_ROOT

PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FF"
    "YC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGr"
    "Q5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"
)
SOFA_BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
ROOT = hashlib.sha256(b"some root").digest()


# --- golden vectors -------------------------------------------------------------------------


def test_golden_key_id_is_sha256_of_name_newline_type_key() -> None:
    verifier = parse_vkey(PETER_VKEY)
    assert verifier.name == "PeterNeumann"
    assert verifier.sig_type == SIG_ED25519
    assert verifier.key_id == bytes.fromhex("c74f20a3")
    expected = hashlib.sha256(b"PeterNeumann\n\x01" + verifier.public_key).digest()[:4]
    assert key_id("PeterNeumann", SIG_ED25519, verifier.public_key) == expected
    assert verifier.vkey() == PETER_VKEY


@pytest.mark.parametrize(
    ("vkey", "name", "sig_type", "kid"),
    [
        (ENOCH_VKEY, "EnochRoot", SIG_ED25519, "af0cfe78"),
        # base64 containing '+': only the first two '+' separate the fields
        (
            "TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6",
            "TEST",
            SIG_ED25519,
            "7997405c",
        ),
        (
            "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2",
            "remora.n621.de",
            SIG_COSIGNATURE_V1,
            "da77ade7",
        ),
    ],
)
def test_golden_vkeys_parse_with_matching_key_ids(
    vkey: str, name: str, sig_type: int, kid: str
) -> None:
    verifier = parse_vkey(vkey)
    assert (verifier.name, verifier.sig_type, verifier.key_id.hex()) == (name, sig_type, kid)
    assert verifier.vkey() == vkey


def test_golden_private_key_signs_exactly_like_the_go_implementation() -> None:
    signer = parse_private_key(PETER_SKEY)
    assert signer.verifier.vkey() == PETER_VKEY
    assert signer.private_key_text() == PETER_SKEY
    assert sign_note(TEXT, signer) == TEXT + "\n" + PETER_SIG  # Ed25519 is deterministic


def test_golden_note_with_two_signatures_opens_for_each_trusted_key() -> None:
    note = TEXT + "\n" + PETER_SIG + ENOCH_SIG
    peter, enoch = parse_vkey(PETER_VKEY), parse_vkey(ENOCH_VKEY)
    assert open_note(note, [peter]) == (TEXT, ["PeterNeumann"])
    assert open_note(note, [peter, enoch]) == (TEXT, ["PeterNeumann", "EnochRoot"])
    assert open_note(note.encode(), [enoch]) == (TEXT, ["EnochRoot"])


def test_golden_cosignature_timestamp_is_read_from_the_signature() -> None:
    raw = base64.b64decode(
        "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJXORmnFBOBA=="
    )
    assert NoteSignature("w", raw[:4], raw[4:]).cosignature_timestamp() == 1727964367
    plain = base64.b64decode(PETER_SIG.split(" ")[2])
    with pytest.raises(IntegrityError, match="not a cosignature/v1"):
        NoteSignature("PeterNeumann", plain[:4], plain[4:]).cosignature_timestamp()


def test_golden_checkpoint_body_round_trips() -> None:
    checkpoint = Checkpoint.from_body(SOFA_BODY)
    assert checkpoint.origin == "example.com/behind-the-sofa"
    assert checkpoint.size == 20852163
    assert checkpoint.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert checkpoint.to_body() == SOFA_BODY


# --- round trips ----------------------------------------------------------------------------


def test_checkpoint_round_trip_with_extensions_and_empty_tree() -> None:
    cp = Checkpoint("log.example/events", 42, ROOT, ("ext one", "ext-two"))
    assert Checkpoint.from_body(cp.to_body()) == cp
    empty = Checkpoint("log.example/events", 0, EMPTY_ROOT)
    assert empty.to_body() == f"log.example/events\n0\n{base64.b64encode(EMPTY_ROOT).decode()}\n"
    assert Checkpoint.from_body(empty.to_body()) == empty


def test_generated_keys_round_trip_through_their_text_forms() -> None:
    for sig_type in (SIG_ED25519, SIG_COSIGNATURE_V1):
        signer = generate_signer("log.example/key", sig_type=sig_type)
        again = parse_private_key(signer.private_key_text())
        assert again.verifier == signer.verifier == parse_vkey(signer.verifier.vkey())
        assert "PRIVATE" not in repr(signer)  # the seed never shows up in logs


def test_signed_checkpoint_round_trip() -> None:
    signer = generate_signer("log.example/events")
    body = Checkpoint("log.example/events", 7, ROOT).to_body()
    note = sign_note(body, signer)
    assert open_note(note, [signer.verifier]) == (body, ["log.example/events"])


def test_cosignature_v1_signs_the_c2sp_message_with_an_8_byte_timestamp() -> None:
    log = generate_signer("log.example/events")
    witness = generate_signer("witness.example/w1", sig_type=SIG_COSIGNATURE_V1)
    body = Checkpoint("log.example/events", 7, ROOT).to_body()
    note = add_signature(sign_note(body, log), witness, timestamp=1679315147)

    _, signatures = parse_note(note)
    assert [s.name for s in signatures] == ["log.example/events", "witness.example/w1"]
    cosig = signatures[1]
    assert (
        cosig.key_id
        == hashlib.sha256(b"witness.example/w1\n\x04" + witness.verifier.public_key).digest()[:4]
    )
    assert cosig.signature[:8] == (1679315147).to_bytes(8, "big")
    message = b"cosignature/v1\ntime 1679315147\n" + body.encode()
    assert cosignature_message(body, 1679315147) == message
    # Checked with the raw Ed25519 primitive, independently of NoteVerifier.
    Ed25519PublicKey.from_public_bytes(witness.verifier.public_key).verify(
        cosig.signature[8:], message
    )
    assert open_note(note, [log.verifier, witness.verifier])[1] == [
        "log.example/events",
        "witness.example/w1",
    ]


def test_add_signature_replaces_an_earlier_signature_by_the_same_key() -> None:
    log = generate_signer("log")
    witness = generate_signer("w", sig_type=SIG_COSIGNATURE_V1)
    note = sign_note("log\n1\n" + base64.b64encode(ROOT).decode() + "\n", log)
    once = add_signature(note, witness, timestamp=100)
    twice = add_signature(once, witness, timestamp=200)
    sigs = parse_note(twice)[1]
    assert [s.name for s in sigs] == ["log", "w"]
    assert sigs[1].cosignature_timestamp() == 200


def test_timestamp_rules_for_signers() -> None:
    plain = generate_signer("p")
    cosigner = generate_signer("c", sig_type=SIG_COSIGNATURE_V1)
    with pytest.raises(InputError, match="carries no timestamp"):
        sign_note("x\n", plain, timestamp=5)
    with pytest.raises(InputError, match="needs a timestamp"):
        sign_note("x\n", cosigner)
    with pytest.raises(InputError, match="needs a timestamp"):
        sign_note("x\n", cosigner, timestamp=1 << 63)


# --- refusals -------------------------------------------------------------------------------


def _signed_checkpoint() -> tuple[str, str, NoteVerifier]:
    signer = generate_signer("log.example/events")
    body = Checkpoint("log.example/events", 7, ROOT).to_body()
    return body, sign_note(body, signer), signer.verifier


def test_tampering_with_any_line_of_the_checkpoint_is_refused() -> None:
    body, note, verifier = _signed_checkpoint()
    lines = body.split("\n")[:3]
    replacements = [
        "log.example/other",
        "8",
        base64.b64encode(hashlib.sha256(b"x").digest()).decode(),
    ]
    for i, new in enumerate(replacements):
        tampered = note.replace(lines[i] + "\n", new + "\n", 1)
        assert tampered != note
        with pytest.raises(IntegrityError, match=r"invalid signature by key log\.example/events"):
            open_note(tampered, [verifier])


def test_tampering_with_the_signature_is_refused() -> None:
    _, note, verifier = _signed_checkpoint()
    head, sig_line = note.rsplit("— ", 1)
    name, b64 = sig_line[:-1].split(" ")
    raw = bytearray(base64.b64decode(b64))
    for position in (4, 20, len(raw) - 1):  # first, middle and last signature byte
        bad = bytearray(raw)
        bad[position] ^= 1
        tampered = f"{head}— {name} {base64.b64encode(bytes(bad)).decode()}\n"
        with pytest.raises(IntegrityError, match="invalid signature"):
            open_note(tampered, [verifier])


def test_a_signature_by_an_unknown_key_is_not_counted() -> None:
    log = generate_signer("log")
    stranger = generate_signer("stranger")
    impostor = generate_signer("log")  # same name, different key, so a different key ID
    body = "log\n1\n" + base64.b64encode(ROOT).decode() + "\n"
    note = add_signature(sign_note(body, log), stranger)
    assert open_note(note, [log.verifier]) == (body, ["log"])
    with pytest.raises(IntegrityError, match="no signature from a trusted key"):
        open_note(sign_note(body, stranger), [log.verifier])
    with pytest.raises(IntegrityError, match="no signature from a trusted key"):
        open_note(sign_note(body, impostor), [log.verifier])
    with pytest.raises(IntegrityError, match="no signature from a trusted key"):
        open_note(note, [])


def test_ambiguous_verifier_configuration_is_refused() -> None:
    peter = parse_vkey(PETER_VKEY)
    with pytest.raises(InputError, match="ambiguous verifier key PeterNeumann"):
        open_note(TEXT + "\n" + PETER_SIG, [peter, peter])


MALFORMED_NOTES = [
    ("no signatures", TEXT, "no blank line followed by signature lines"),
    ("blank line only", TEXT + "\n", "no blank line followed by signature lines"),
    (
        "missing final newline",
        TEXT + "\n" + PETER_SIG[:-1],
        "no blank line followed by signature lines",
    ),
    ("control character", "\x01" + TEXT + "\n" + PETER_SIG, "control character"),
    ("carriage return", TEXT.replace("\n", "\r\n", 1) + "\n" + PETER_SIG, "control character"),
    ("invalid UTF-8", b"\xff" + (TEXT + "\n" + PETER_SIG).encode(), "not valid UTF-8"),
    (
        "space in key name",
        TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Bad Name"),
        "not '— <name> <base64>'",
    ),
    ("hyphen not em dash", TEXT + "\n" + PETER_SIG.replace("—", "-"), "not '— <name> <base64>'"),
    ("plus in key name", TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "a+b"), "without '\\+'"),
    ("bad base64", TEXT + "\n" + PETER_SIG.replace("x08go", "x08g!"), "not valid base64"),
    ("short signature", TEXT + "\n— PeterNeumann AAAA\n", "too short"),
    ("unexpected line", TEXT + "\n" + PETER_SIG + "Unexpected line.\n", "signature line 2"),
    ("too many signatures", TEXT + "\n" + PETER_SIG * 101, "more than 100 signatures"),
]


@pytest.mark.parametrize(
    ("case", "note", "message"), MALFORMED_NOTES, ids=[c[0] for c in MALFORMED_NOTES]
)
def test_malformed_notes_are_refused(case: str, note: str | bytes, message: str) -> None:
    with pytest.raises(IntegrityError, match=message):
        open_note(note, [parse_vkey(PETER_VKEY)])


R64 = base64.b64encode(ROOT).decode()
MALFORMED_BODIES = [
    ("two lines", "origin\n5\n", "has 2 lines"),
    ("no trailing newline", f"origin\n5\n{R64}", "must end with a newline"),
    ("empty origin", f"\n5\n{R64}\n", "origin must be a non-empty line"),
    ("non-decimal size", f"origin\nfive\n{R64}\n", "not a decimal number"),
    ("leading zero", f"origin\n05\n{R64}\n", "not a decimal number"),
    ("signed size", f"origin\n+5\n{R64}\n", "not a decimal number"),
    ("unicode digits", f"origin\n\u0665\n{R64}\n", "not a decimal number"),
    ("size beyond uint64", f"origin\n{1 << 64}\n{R64}\n", "not between 0 and 2"),
    ("bad base64", f"origin\n5\n{R64[:-2]}!=\n", "not valid base64"),
    ("unpadded base64", f"origin\n5\n{R64.rstrip('=')}\n", "not valid base64"),
    ("root not 32 bytes", f"origin\n5\n{base64.b64encode(ROOT[:31]).decode()}\n", "not 32 bytes"),
    ("empty extension line", f"origin\n5\n{R64}\n\n", "extension lines must be non-empty"),
    ("empty tree, wrong root", f"origin\n0\n{R64}\n", "empty tree must have the root"),
    ("carriage return", f"origin\r\n5\n{R64}\n", "origin must be a non-empty line"),
]


@pytest.mark.parametrize(
    ("case", "body", "message"), MALFORMED_BODIES, ids=[c[0] for c in MALFORMED_BODIES]
)
def test_malformed_checkpoint_bodies_are_refused(case: str, body: str, message: str) -> None:
    with pytest.raises(IntegrityError, match=message):
        Checkpoint.from_body(body)


def test_non_canonical_base64_root_is_refused() -> None:
    # Same bytes, but the unused low bits of the last character are set: not the one encoding.
    canonical = base64.b64encode(ROOT[:31] + b"\x00").decode()
    assert canonical.endswith("A=")
    sloppy = canonical[:-2] + "B="
    assert base64.b64decode(sloppy) == base64.b64decode(canonical)
    with pytest.raises(IntegrityError, match="not canonical"):
        Checkpoint.from_body(f"origin\n5\n{sloppy}\n")


def test_invalid_checkpoint_arguments_raise_input_error() -> None:
    with pytest.raises(InputError, match="origin"):
        Checkpoint("two\nlines", 1, ROOT)
    with pytest.raises(InputError, match="size"):
        Checkpoint("o", -1, ROOT)
    with pytest.raises(InputError, match="32 bytes"):
        Checkpoint("o", 1, ROOT[:16])


MALFORMED_VKEYS = [
    ("two parts", "PeterNeumann+c74f20a3", "must be '<name>\\+<8 hex digits>\\+<base64 key>'"),
    ("upper-case key id", PETER_VKEY.replace("c74f20a3", "C74F20A3"), "8 hex digits"),
    ("wrong key id", PETER_VKEY.replace("c74f20a3", "c74f20a4"), "key ID does not match"),
    ("truncated key", PETER_VKEY[:-4], "not an Ed25519 or cosignature/v1 key"),
    (
        "unknown algorithm",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "not an Ed25519 or cosignature/v1 key",
    ),
    (
        "space in name",
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "spaces",
    ),
]


@pytest.mark.parametrize(
    ("case", "vkey", "message"), MALFORMED_VKEYS, ids=[c[0] for c in MALFORMED_VKEYS]
)
def test_malformed_vkeys_are_refused(case: str, vkey: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_vkey(vkey)


def test_malformed_private_keys_are_refused() -> None:
    with pytest.raises(InputError, match="must start with"):
        parse_private_key(PETER_VKEY)
    with pytest.raises(InputError, match="key ID does not match"):
        parse_private_key(PETER_SKEY.replace("c74f20a3", "00000000"))
    with pytest.raises(InputError, match="not valid base64"):
        parse_private_key(PETER_SKEY[:-1] + "!")
