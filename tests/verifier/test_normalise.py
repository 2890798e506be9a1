"""Normalisation: invisible characters stripped and recorded, dashes and spaces folded, NFKC."""

from __future__ import annotations

import time
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.verifier.normalise import (
    DASHES,
    SPACES,
    STRIPPED_CHARACTERS,
    normalise,
)


def test_ascii_is_returned_unchanged():
    n = normalise("Annex A 5.9 - plain text.")
    assert (n.text, n.stripped, n.changed) == ("Annex A 5.9 - plain text.", (), False)


@pytest.mark.parametrize("char", list(STRIPPED_CHARACTERS))
def test_every_invisible_character_is_stripped_and_recorded(char: str):
    n = normalise(f"ig{char}nore{char} it")
    assert n.text == "ignore it"
    assert n.changed
    assert [(s.code_point, s.count, s.first_offset) for s in n.stripped] == [(ord(char), 2, 2)]
    assert n.stripped[0].name == unicodedata.name(char, f"U+{ord(char):04X}")


@pytest.mark.parametrize("char", list(DASHES))
def test_every_dash_folds_to_hyphen_minus(char: str):
    assert normalise(f"ISO{char}27001").text == "ISO-27001"


@pytest.mark.parametrize("char", list(SPACES))
def test_every_odd_space_folds_to_a_space(char: str):
    assert normalise(f"Annex{char}A").text == "Annex A"


def test_nfkc_folds_compatibility_forms():
    assert normalise("\uff21\uff4e\uff4e\uff45\uff58 \uff21 \uff15.\uff19").text == "Annex A 5.9"
    assert normalise("\ufb01le").text == "file"


def test_record_lists_each_character_once_in_order_of_first_appearance():
    n = normalise("a\u200db\u200bc\u200dd")
    assert [(hex(s.code_point), s.count, s.first_offset) for s in n.stripped] == [
        ("0x200d", 2, 1), ("0x200b", 1, 3)]
    assert n.to_json()["stripped"][0] == {"code_point": "U+200D", "name": "ZERO WIDTH JOINER",
                                          "count": 2, "first_offset": 1}


def test_offsets_map_back_to_the_original_when_nfkc_kept_the_length():
    original = "a\u200bb\u200b\u200bcd\u00a0e"
    n = normalise(original)
    assert n.text == "abcd e"
    for i, ch in enumerate(n.text):
        j = n.to_original(i)
        assert j is not None
        assert normalise(original[j]).text == ch


def test_offsets_are_unknown_when_nfkc_changed_the_length():
    assert normalise("\ufb01 x").to_original(1) is None


@settings(max_examples=1000, deadline=None)
@given(text=st.text(max_size=200))
def test_normalise_is_idempotent(text: str):
    once = normalise(text).text
    assert normalise(once).text == once
    assert not any(c in once for c in STRIPPED_CHARACTERS + DASHES + SPACES)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab -") + list(STRIPPED_CHARACTERS)),
                    max_size=60))
def test_offset_map_is_exact_for_stripping_only(text: str):
    n = normalise(text)
    for i, ch in enumerate(n.text):
        j = n.to_original(i)
        assert j is not None
        assert text[j] == ch


def test_a_200k_character_text_full_of_invisible_characters_is_fast():
    text = "ab\u200b\u00a0\u2013\uff21" * 34_000
    started = time.perf_counter()
    n = normalise(text)
    assert time.perf_counter() - started < 2.0
    assert n.stripped[0].count == 34_000
