"""Fingerprints: normalisation, exact digests, MinHash and the LSH recall guarantee.

Spec 8.14 (an echo survives cosmetic changes), 10.2 (the same text gives the same bits),
11.21 (the echo test depends on these properties).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.provenance.conftest import POLICY_OUTPUT
from triz_ri_smart_ai_evaluator.errors import IntegrityError
from triz_ri_smart_ai_evaluator.provenance import (
    METHOD,
    Fingerprint,
    NearDuplicateIndex,
    ProvenanceRules,
    fingerprint,
    normalise_text,
)
from triz_ri_smart_ai_evaluator.provenance.fingerprint import NUM_PERM

WORDS = st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), min_size=1, max_size=40)


def test_normalisation_removes_what_a_copier_changes_for_free() -> None:
    assert normalise_text("  Hello,\tWORLD!!\u200b ﬁne\u00a0day  ") == "hello world fine day"
    assert normalise_text("Straße") == normalise_text("STRASSE")  # casefold, not lower()


@given(WORDS, st.sampled_from([str.upper, str.title, str.lower]),
       st.sampled_from([" ", "  ", "\n", " , ", "; ", "\u200b "]))
def test_exact_fingerprint_ignores_case_spacing_and_punctuation(
    words: list[str], case: object, sep: str
) -> None:
    """8.14: the exact digest of a cosmetically changed copy equals the original's."""
    plain = " ".join(words)
    disguised = case(sep.join(words)) + "."  # type: ignore[operator]
    assert fingerprint(disguised).sha256 == fingerprint(plain).sha256


@given(st.text(max_size=200))
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalise_text(text)
    assert normalise_text(once) == once


def test_fingerprint_is_deterministic_and_pinned() -> None:
    """10.2: parameters are fixed, so the same text always yields the same slots."""
    a, b = fingerprint(POLICY_OUTPUT), fingerprint(POLICY_OUTPUT)
    assert a == b
    assert a.method == METHOD
    assert len(a.minhash) == NUM_PERM
    assert Fingerprint.from_data(a.to_data()) == a


def test_fingerprint_of_empty_text_has_no_minhash() -> None:
    fp = fingerprint(" ... ")
    assert (fp.tokens, fp.minhash) == (0, ())
    assert fp.matches(fp) == 0


def test_malformed_fingerprint_data_raises_the_given_error() -> None:
    data = fingerprint(POLICY_OUTPUT).to_data()
    with pytest.raises(IntegrityError, match="32-bit slots"):
        Fingerprint.from_data({**data, "minhash": "AAAA"}, IntegrityError)
    with pytest.raises(IntegrityError, match="wrong number of slots"):
        Fingerprint.from_data({**data, "minhash": "AAAAAA=="}, IntegrityError)
    with pytest.raises(IntegrityError, match="token count"):
        Fingerprint.from_data({**data, "tokens": -1}, IntegrityError)


@pytest.mark.parametrize("changed", [1, 2, 3, 4])
def test_a_copy_with_a_tenth_of_its_words_changed_is_a_near_duplicate(changed: int) -> None:
    """The documented tolerance of the 0.8 threshold (fingerprint module docstring)."""
    words = POLICY_OUTPUT.split()
    for i in random.Random(changed).sample(range(len(words)), changed):
        words[i] = f"zz{i}"
    copy = fingerprint(" ".join(words))
    assert copy.matches(fingerprint(POLICY_OUTPUT)) >= ProvenanceRules().min_matches


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=64, max_value=NUM_PERM), st.randoms(use_true_random=False),
       st.integers(min_value=64, max_value=NUM_PERM))
def test_lsh_never_misses_a_pair_the_decision_accepts(
    min_matches: int, rnd: random.Random, equal: int
) -> None:
    """NearDuplicateIndex: the LSH is only a speed-up.  Whenever two fingerprints share at
    least ``min_matches`` slots, the index finds the pair - whatever slots differ."""
    base = tuple(rnd.getrandbits(32) for _ in range(NUM_PERM))
    differing = rnd.sample(range(NUM_PERM), NUM_PERM - equal)
    other = list(base)
    for i in differing:
        other[i] = (other[i] + 1 + rnd.getrandbits(8)) % 2**32
    index = NearDuplicateIndex(min_matches, min_tokens=1)
    index.add("stored", Fingerprint("a" * 64, 50, base))
    found = index.find(Fingerprint("b" * 64, 50, tuple(other)))
    assert (found == [("stored", "minhash", equal)]) == (equal >= min_matches)


def test_short_texts_match_only_exactly() -> None:
    """Below min_tokens a Jaccard estimate means little; only an exact repeat is an echo."""
    index = NearDuplicateIndex(ProvenanceRules().min_matches, min_tokens=8)
    index.add("out", fingerprint("the answer is 42"))
    assert index.find(fingerprint("The answer is: 42!")) == [("out", "exact", NUM_PERM)]
    assert index.find(fingerprint("the answer is 43")) == []
