"""Signed checkpoints of the event log: C2SP signed-note, tlog-checkpoint and tlog-cosignature/v1.

This module does no I/O and never reads the clock: text goes in, text comes out, and the time
of a witness cosignature is an argument.  A checkpoint is the log's signed statement "my tree of
N events has root R" (spec 9.2-9.3 trusted log); witnesses cosign it only after checking it
extends what they saw before, which is what makes the log's history immutable in practice
(spec 10.4, 1.17).  Formats: https://c2sp.org/signed-note, /tlog-checkpoint, /tlog-cosignature.

Malformed or unverifiable notes and checkpoints raise IntegrityError (they are evidence that
does not hold); malformed keys and arguments from the caller raise InputError.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from triz_ri_smart_ai_evaluator.errors import EvaluatorError, InputError, IntegrityError

from .merkle import EMPTY_ROOT, HASH_SIZE, MAX_TREE_SIZE

SIG_ED25519 = 0x01  # signed-note Ed25519 over the note text
SIG_COSIGNATURE_V1 = 0x04  # tlog-cosignature/v1: timestamped Ed25519
_SIG_TYPES = (SIG_ED25519, SIG_COSIGNATURE_V1)
_EM_DASH = "\u2014"
_MAX_SIGNATURES = 100  # signed-note: verifiers must accept at least 16
_MAX_TIMESTAMP = (1 << 63) - 1  # tlog-cosignature: timestamp MUST NOT exceed 2^63 - 1
_DECIMAL = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_KEY_ID_HEX = re.compile(r"[0-9a-f]{8}", re.ASCII)
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # signed-note: no controls but newline
_PRIVATE_PREFIX = "PRIVATE+KEY+"


def _b64decode(text: str, what: str, error: type[EvaluatorError]) -> bytes:
    """Standard padded base64, accepting only the one canonical encoding of the bytes."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except ValueError:
        raise error(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise error(f"{what} is not canonical padded base64")
    return raw


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _check_key_name(name: object, error: type[EvaluatorError]) -> str:
    # signed-note: non-empty, no Unicode spaces, no "+" (it separates vkey fields).
    if not isinstance(name, str) or not name or "+" in name:
        raise error(f"key name {name!r} must be non-empty text without '+'")
    if any(c.isspace() for c in name) or _CONTROL.search(name):
        raise error(f"key name {name!r} must not contain spaces or control characters")
    return name


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """SHA-256(name || 0x0A || sig_type || public key)[:4], the signed-note key ID."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


def cosignature_message(body: str, timestamp: int) -> bytes:
    """The bytes a tlog-cosignature/v1 Ed25519 cosigner signs for ``body`` at ``timestamp``."""
    return f"cosignature/v1\ntime {timestamp}\n{body}".encode()


@dataclass(frozen=True)
class NoteVerifier:
    """A trusted public key: its note name, signature type and 32-byte Ed25519 key."""

    name: str
    sig_type: int
    public_key: bytes

    def __post_init__(self) -> None:
        _check_key_name(self.name, InputError)
        if self.sig_type not in _SIG_TYPES:
            raise InputError(f"unsupported signature type {self.sig_type!r}")
        if not isinstance(self.public_key, bytes) or len(self.public_key) != 32:
            raise InputError("an Ed25519 public key is 32 bytes")

    @property
    def key_id(self) -> bytes:
        """The 4-byte key ID that prefixes this key's signatures."""
        return key_id(self.name, self.sig_type, self.public_key)

    def vkey(self) -> str:
        """The verifier key text ``<name>+<hex key ID>+<base64(type || public key)>``."""
        return f"{self.name}+{self.key_id.hex()}+{_b64(bytes([self.sig_type]) + self.public_key)}"

    def verify(self, body: str, signature: bytes) -> bool:
        """True if ``signature`` (without key ID) is this key's signature of ``body``."""
        message = body.encode()
        if self.sig_type == SIG_COSIGNATURE_V1:
            if len(signature) != 72 or signature[0] & 0x80:
                return False
            message = cosignature_message(body, int.from_bytes(signature[:8], "big"))
            signature = signature[8:]
        if len(signature) != 64:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            return False
        return True


def parse_vkey(text: str) -> NoteVerifier:
    """Parse ``<name>+<hex key ID>+<base64(type || key)>``.  Raises InputError if malformed."""
    parts = text.split("+", 2) if isinstance(text, str) else []
    if len(parts) != 3 or not _KEY_ID_HEX.fullmatch(parts[1]):
        raise InputError("verifier key must be '<name>+<8 hex digits>+<base64 key>'")
    name = _check_key_name(parts[0], InputError)
    raw = _b64decode(parts[2], "verifier key", InputError)
    if len(raw) != 33 or raw[0] not in _SIG_TYPES:
        raise InputError(f"verifier key {name!r} is not an Ed25519 or cosignature/v1 key")
    verifier = NoteVerifier(name, raw[0], raw[1:])
    if verifier.key_id.hex() != parts[1]:
        raise InputError(f"verifier key {name!r}: key ID does not match the key")
    return verifier


class NoteSigner:
    """A private Ed25519 key with its note name and signature type (the key never prints)."""

    __slots__ = ("_private", "name", "sig_type", "verifier")

    def __init__(self, name: str, private_key: Ed25519PrivateKey, *, sig_type: int) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise InputError("a note signer needs an Ed25519 private key")
        self._private = private_key
        self.name = name
        self.sig_type = sig_type
        public = private_key.public_key().public_bytes_raw()
        self.verifier = NoteVerifier(name, sig_type, public)  # validates name and type

    def __repr__(self) -> str:
        return f"NoteSigner({self.verifier.vkey()!r})"

    def private_key_text(self) -> str:
        """``PRIVATE+KEY+<name>+<hex key ID>+<base64(type || seed)>``: keep this secret."""
        seed = self._private.private_bytes_raw()
        raw = _b64(bytes([self.sig_type]) + seed)
        return f"{_PRIVATE_PREFIX}{self.name}+{self.verifier.key_id.hex()}+{raw}"

    def signature_line(self, body: str, *, timestamp: int | None = None) -> str:
        """The note signature line for ``body``; cosigners need ``timestamp`` (POSIX seconds).

        Raises InputError for a missing, superfluous or out-of-range timestamp.
        """
        if self.sig_type == SIG_COSIGNATURE_V1:
            if not isinstance(timestamp, int) or not 0 <= timestamp <= _MAX_TIMESTAMP:
                raise InputError("a cosignature needs a timestamp between 0 and 2^63-1")
            payload = timestamp.to_bytes(8, "big") + self._private.sign(
                cosignature_message(body, timestamp)
            )
        elif timestamp is not None:
            raise InputError("a plain Ed25519 note signature carries no timestamp")
        else:
            payload = self._private.sign(body.encode())
        return f"{_EM_DASH} {self.name} {_b64(self.verifier.key_id + payload)}\n"


def generate_signer(name: str, *, sig_type: int = SIG_ED25519) -> NoteSigner:
    """A new random key for ``name``.  Raises InputError for a bad name or type."""
    return NoteSigner(name, Ed25519PrivateKey.generate(), sig_type=sig_type)


def parse_private_key(text: str) -> NoteSigner:
    """Parse the text of :meth:`NoteSigner.private_key_text`.  Raises InputError if malformed."""
    if not isinstance(text, str) or not text.startswith(_PRIVATE_PREFIX):
        raise InputError("private key text must start with 'PRIVATE+KEY+'")
    parts = text[len(_PRIVATE_PREFIX) :].split("+", 2)
    if len(parts) != 3 or not _KEY_ID_HEX.fullmatch(parts[1]):
        raise InputError("private key must be 'PRIVATE+KEY+<name>+<8 hex digits>+<base64>'")
    raw = _b64decode(parts[2], "private key", InputError)
    if len(raw) != 33 or raw[0] not in _SIG_TYPES:
        raise InputError("private key is not an Ed25519 or cosignature/v1 key")
    signer = NoteSigner(parts[0], Ed25519PrivateKey.from_private_bytes(raw[1:]), sig_type=raw[0])
    if signer.verifier.key_id.hex() != parts[1]:
        raise InputError(f"private key {parts[0]!r}: key ID does not match the key")
    return signer


@dataclass(frozen=True)
class NoteSignature:
    """One parsed signature line: key name, 4-byte key ID and the signature bytes after it."""

    name: str
    key_id: bytes
    signature: bytes

    def cosignature_timestamp(self) -> int:
        """The POSIX time in a cosignature/v1 signature.  Raises IntegrityError if not one."""
        if len(self.signature) != 72 or self.signature[0] & 0x80:
            raise IntegrityError(f"signature by {self.name!r} is not a cosignature/v1")
        return int.from_bytes(self.signature[:8], "big")


def _note_text(text: object, what: str) -> str:
    """The note as str, checked to be UTF-8 without control characters other than newline."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise IntegrityError(f"{what} is not valid UTF-8") from None
    if not isinstance(text, str):
        raise IntegrityError(f"{what} is not text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise IntegrityError(f"{what} is not valid UTF-8") from None
    if _CONTROL.search(text):
        raise IntegrityError(f"{what} contains a control character other than newline")
    return text


def _split_note(text: str | bytes) -> tuple[str, list[str], list[NoteSignature]]:
    text = _note_text(text, "signed note")
    split = text.rfind("\n\n")  # the body is separated by the note's last empty line
    if split < 0 or not text.endswith("\n") or split + 2 == len(text):
        raise IntegrityError("malformed note: no blank line followed by signature lines")
    body, lines = text[: split + 1], text[split + 2 : -1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise IntegrityError(f"note has more than {_MAX_SIGNATURES} signatures")
    signatures = []
    for n, line in enumerate(lines, 1):
        fields = line.split(" ")
        if len(fields) != 3 or fields[0] != _EM_DASH:
            raise IntegrityError(f"malformed note: signature line {n} is not '— <name> <base64>'")
        name = _check_key_name(fields[1], IntegrityError)
        raw = _b64decode(fields[2], f"signature line {n}", IntegrityError)
        if len(raw) < 5:
            raise IntegrityError(f"malformed note: signature line {n} is too short")
        signatures.append(NoteSignature(name, raw[:4], raw[4:]))
    return body, lines, signatures


def parse_note(text: str | bytes) -> tuple[str, list[NoteSignature]]:
    """Split a signed note into its body and signature lines without verifying anything.

    Raises IntegrityError if the note is not well-formed C2SP signed-note text.
    """
    body, _, signatures = _split_note(text)
    return body, signatures


def open_note(text: str | bytes, verifiers: Iterable[NoteVerifier]) -> tuple[str, list[str]]:
    """Verify a signed note; return its body and the names of the known keys that signed it.

    Signatures by unknown keys (name or key ID not configured) are ignored, as C2SP requires.
    Raises IntegrityError for a malformed note, any known key's bad signature, or no signature
    from a known key; InputError if two configured verifiers share a name and key ID.
    """
    known: dict[tuple[str, bytes], NoteVerifier] = {}
    for v in verifiers:
        if (v.name, v.key_id) in known:
            raise InputError(f"ambiguous verifier key {v.name}+{v.key_id.hex()}")
        known[(v.name, v.key_id)] = v
    body, signatures = parse_note(text)
    signed: list[str] = []
    for sig in signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        if not verifier.verify(body, sig.signature):
            raise IntegrityError(f"invalid signature by key {sig.name}+{sig.key_id.hex()}")
        if sig.name not in signed:
            signed.append(sig.name)
    if not signed:
        raise IntegrityError("note has no signature from a trusted key")
    return body, signed


def sign_note(body: str, signer: NoteSigner, *, timestamp: int | None = None) -> str:
    """A signed note of ``body`` with one signature.  Raises InputError for a malformed body."""
    try:
        body = _note_text(body, "note body")
    except IntegrityError as e:
        raise InputError(e.message) from None
    if not body.endswith("\n"):
        raise InputError("note body must end with a newline")
    return body + "\n" + signer.signature_line(body, timestamp=timestamp)


def add_signature(note: str, signer: NoteSigner, *, timestamp: int | None = None) -> str:
    """``note`` with ``signer``'s signature added, replacing any earlier one by the same key.

    Other signature lines are kept verbatim.  Raises IntegrityError for a malformed note.
    """
    body, lines, signatures = _split_note(note)
    own = (signer.name, signer.verifier.key_id)
    kept = [
        ln + "\n"
        for ln, sig in zip(lines, signatures, strict=True)
        if (sig.name, sig.key_id) != own
    ]
    if len(kept) >= _MAX_SIGNATURES:
        raise IntegrityError(f"note already has {len(kept)} signatures")
    return body + "\n" + "".join(kept) + signer.signature_line(body, timestamp=timestamp)


@dataclass(frozen=True)
class Checkpoint:
    """A C2SP tlog-checkpoint: the log's origin, its tree size and the RFC 6962 root."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _validate_checkpoint(self.origin, self.size, self.root, self.extensions, InputError)

    def to_body(self) -> str:
        """The note text: origin, decimal size, base64 root, extension lines, each ending '\\n'."""
        lines = [self.origin, str(self.size), _b64(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def from_body(cls, body: str) -> Checkpoint:
        """Strictly parse checkpoint note text.  Raises IntegrityError if it is malformed."""
        if not isinstance(body, str) or not body.endswith("\n"):
            raise IntegrityError("checkpoint text must end with a newline")
        lines = body[:-1].split("\n")
        if len(lines) < 3:
            raise IntegrityError(f"checkpoint has {len(lines)} lines, needs at least 3")
        origin, size_text, root_text, *extensions = lines
        if not _DECIMAL.fullmatch(size_text):
            raise IntegrityError(f"checkpoint size {size_text!r} is not a decimal number")
        size = int(size_text)
        root = _b64decode(root_text, "checkpoint root hash", IntegrityError)
        _validate_checkpoint(origin, size, root, tuple(extensions), IntegrityError)
        return cls(origin, size, root, tuple(extensions))


def _validate_checkpoint(
    origin: str, size: int, root: bytes, extensions: Sequence[str], error: type[EvaluatorError]
) -> None:
    if not isinstance(origin, str) or not origin or "\n" in origin or _CONTROL.search(origin):
        raise error("checkpoint origin must be a non-empty line without control characters")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_TREE_SIZE:
        raise error(f"checkpoint size {size!r} is not between 0 and 2^64-1")
    if not isinstance(root, bytes) or len(root) != HASH_SIZE:
        raise error(f"checkpoint root hash is not {HASH_SIZE} bytes")
    if size == 0 and root != EMPTY_ROOT:
        raise error("checkpoint of an empty tree must have the root SHA-256('')")
    for line in extensions:
        if not isinstance(line, str) or not line or "\n" in line or _CONTROL.search(line):
            raise error("checkpoint extension lines must be non-empty single lines")
