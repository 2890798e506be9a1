"""Fingerprints of text for echo and copy detection (spec 8.14, 8.15, 9.16, 11.21).  No I/O.

A model output repeated elsewhere must not come back as independent confirmation (8.14), so
every policy output and every confirmation is fingerprinted the same way:

* :func:`normalise_text` removes what a copier can change for free: Unicode compatibility forms
  (NFKC), invisible format and control characters (a zero-width space would otherwise defeat an
  exact match), case (casefold), punctuation and runs of white space;
* the exact fingerprint is SHA-256 of the normalised text;
* the near-duplicate fingerprint is a MinHash (``datasketch``) of the set of normalised words.
  Word unigrams rather than longer shingles: reordering sentences keeps the similarity at 1, and
  a copy with a tenth of its words changed still estimates above the 0.8 threshold
  (Jaccard (n-e)/(n+e) = 0.82 for e = n/10).  The cost is more false positives on texts that
  share vocabulary; those are quarantined until reconciled (8.15), the safe direction.

The MinHash parameters are fixed (seed, permutation count, datasketch's ``affine32`` scheme) and
named by :data:`METHOD`, which is stored with every fingerprint: datasketch 2.0 changed its
default scheme, and a silent change of parameters would make old and new fingerprints
incomparable.  Similarity is an integer count of equal MinHash slots, so decisions are exact and
reproducible (10.2) and no float reaches canonical JSON.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH  # type: ignore[import-untyped]

from ..canonical import canonical_json
from ..errors import EvaluatorError, InputError

NUM_PERM = 128
SEED = 814  # any fixed value; 8.14 is the threat this serves
SCHEME = "affine32"
SHINGLE_WORDS = 1
METHOD = f"minhash/{SCHEME}/words{SHINGLE_WORDS}/perm{NUM_PERM}/seed{SEED}"
_DROP = frozenset({"Cc", "Cf", "Co", "Cs", "Cn"})  # controls, zero-width and format characters


def normalise_text(text: str) -> str:
    """NFKC, drop invisible characters, casefold, punctuation to spaces, collapse white space."""
    out = []
    for ch in unicodedata.normalize("NFKC", text).casefold():
        category = unicodedata.category(ch)
        if ch.isspace() or category[0] in "PZ":
            out.append(" ")
        elif category not in _DROP:
            out.append(ch)
    # NFKC again: casefolding can produce characters that compose differently.
    return " ".join(unicodedata.normalize("NFKC", "".join(out)).split())


def content_text(content: str | dict[str, Any] | list[Any]) -> str:
    """The text a confirmation's content is fingerprinted as: the string itself, or the canonical
    JSON of structured content (punctuation is dropped by normalisation, keys and values remain).
    Raises InputError if structured content cannot be put in canonical JSON."""
    if isinstance(content, str):
        return content
    return canonical_json(content).decode("utf-8")


def _shingles(normalised: str) -> list[bytes]:
    words = normalised.split()
    grams = {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}
    if not grams and words:
        grams = {" ".join(words)}
    return sorted(g.encode("utf-8") for g in grams)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """SHA-256 of the normalised text, its count of distinct shingles and its MinHash slots."""

    sha256: str
    tokens: int
    minhash: tuple[int, ...]  # NUM_PERM slots; empty when the text has no words
    method: str = METHOD

    def matches(self, other: Fingerprint) -> int:
        """How many MinHash slots are equal: NUM_PERM times the Jaccard estimate."""
        if self.method != other.method or not self.minhash or not other.minhash:
            return 0
        return sum(1 for a, b in zip(self.minhash, other.minhash, strict=True) if a == b)

    def to_data(self) -> dict[str, Any]:
        packed = struct.pack(f">{len(self.minhash)}I", *self.minhash)
        return {
            "method": self.method,
            "sha256": self.sha256,
            "tokens": self.tokens,
            "minhash": base64.b64encode(packed).decode("ascii"),
        }

    @classmethod
    def from_data(cls, data: object, error: type[EvaluatorError] = InputError) -> Fingerprint:
        """Read what :meth:`to_data` wrote; raises ``error`` if malformed."""
        if not isinstance(data, dict) or set(data) != {"method", "sha256", "tokens", "minhash"}:
            raise error("a fingerprint must have method, sha256, tokens and minhash")
        try:
            raw = base64.b64decode(str(data["minhash"]), validate=True)
            if len(raw) % 4:
                raise ValueError("not a whole number of 32-bit slots")
            slots = struct.unpack(f">{len(raw) // 4}I", raw)
        except (ValueError, struct.error) as e:
            raise error(f"fingerprint MinHash is malformed: {e}") from e
        tokens, sha = data["tokens"], data["sha256"]
        if not isinstance(tokens, int) or tokens < 0 or not isinstance(sha, str) or len(sha) != 64:
            raise error("fingerprint sha256 or token count is malformed")
        if len(slots) not in (0, NUM_PERM) or (len(slots) == 0) != (tokens == 0):
            raise error("fingerprint MinHash has the wrong number of slots")
        return cls(sha, tokens, tuple(slots), str(data["method"]))


_PERMUTATIONS: list[Any] = []


def _permutations() -> Any:
    """The fixed MinHash permutations, drawn once (they depend only on SEED and NUM_PERM;
    drawing them anew for every fingerprint cost more than the hashing itself)."""
    if not _PERMUTATIONS:
        _PERMUTATIONS.append(MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME).permutations)
    return _PERMUTATIONS[0]


def fingerprint(text: str) -> Fingerprint:
    """The exact and near-duplicate fingerprint of ``text``.  Raises InputError if not text."""
    if not isinstance(text, str):
        raise InputError("only text can be fingerprinted")
    normalised = normalise_text(text)
    digest = hashlib.sha256(normalised.encode("utf-8")).hexdigest()
    shingles = _shingles(normalised)
    if not shingles:
        return Fingerprint(digest, 0, ())
    mh = MinHash(num_perm=NUM_PERM, seed=SEED, scheme=SCHEME, permutations=_permutations())
    mh.update_batch(shingles)
    # tolist() gives Python ints (the slots are uint32)
    return Fingerprint(digest, len(shingles), tuple(mh.hashvalues.tolist()))


class NearDuplicateIndex:
    """Exact-digest lookup plus a MinHash LSH index (datasketch) for scale.

    The band width is chosen so that the LSH cannot miss a pair the decision would accept: with
    ``b`` bands, fewer than ``b`` unequal slots leave at least one band fully equal, so every
    pair with at least ``min_matches`` equal slots is a candidate.  The LSH only saves work; the
    count of equal slots decides (deterministically, 10.2).
    """

    def __init__(self, min_matches: int, min_tokens: int) -> None:
        if not 1 <= min_matches <= NUM_PERM:
            raise InputError(f"min_matches must be between 1 and {NUM_PERM}")
        allowed_mismatches = NUM_PERM - min_matches
        # datasketch needs at least two bands; two bands still satisfy the guarantee.
        rows = max(r for r in range(1, NUM_PERM // 2 + 1) if NUM_PERM // r > allowed_mismatches)
        self.min_matches = min_matches
        self.min_tokens = min_tokens
        self._lsh = MinHashLSH(num_perm=NUM_PERM, params=(NUM_PERM // rows, rows))
        self._exact: dict[str, list[str]] = {}
        self._prints: dict[str, Fingerprint] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._prints

    def add(self, key: str, fp: Fingerprint) -> None:
        """Index ``fp`` under ``key`` (adding the same key again does nothing)."""
        if key in self._prints:
            return
        self._prints[key] = fp
        self._exact.setdefault(fp.sha256, []).append(key)
        if fp.tokens >= self.min_tokens and fp.method == METHOD:
            lean = LeanMinHash(seed=SEED, hashvalues=np.array(fp.minhash, dtype=np.uint32),
                               scheme=SCHEME)
            self._lsh.insert(key, lean, check_duplication=False)

    def find(self, fp: Fingerprint) -> list[tuple[str, str, int]]:
        """Indexed keys matching ``fp``, as (key, "exact" | "minhash", equal slots), key order.

        Exact matches count at any length; near matches only when both texts have at least
        ``min_tokens`` distinct words, because a Jaccard estimate over a handful of words says
        little (a short verdict shares most of its words with any other short verdict).
        """
        found = dict.fromkeys(self._exact.get(fp.sha256, ()), ("exact", NUM_PERM))
        if fp.tokens >= self.min_tokens and fp.method == METHOD and fp.minhash:
            query = LeanMinHash(seed=SEED, hashvalues=np.array(fp.minhash, dtype=np.uint32),
                                scheme=SCHEME)
            for key in self._lsh.query(query):
                if key in found:
                    continue
                equal = fp.matches(self._prints[key])
                if equal >= self.min_matches:
                    found[key] = ("minhash", equal)
        return sorted((key, how, n) for key, (how, n) in found.items())

    def keys(self) -> Iterable[str]:
        return self._prints.keys()
