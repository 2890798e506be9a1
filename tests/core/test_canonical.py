"""The canonical JSON fast path must be byte-identical to RFC 8785 (the rfc8785 package)."""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import InputError

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text()  # every code point, including controls, U+2028 and non-BMP
)
trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(value=trees)
def test_canonical_json_equals_rfc8785_for_any_tree(value):
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        with pytest.raises(InputError):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@settings(max_examples=200, deadline=None)
@given(key_a=st.text(min_size=1, max_size=3), key_b=st.text(min_size=1, max_size=3))
def test_non_ascii_keys_sort_by_utf16_code_units(key_a, key_b):
    """RFC 8785 3.2.3: keys sort by UTF-16 code units, which differs from code-point order for
    supplementary characters; the fast path must not be taken for them."""
    value = {key_a: 1, key_b: 2}
    assert canonical_json(value) == rfc8785.dumps(value)


def test_supplementary_key_order_differs_from_python_sort():
    value = {"\U0001f600": 1, "\ufb01": 2}  # U+1F600 is D83D DE00 in UTF-16, before U+FB01
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value) != json.dumps(value, sort_keys=True, separators=(",", ":"),
                                               ensure_ascii=False).encode()


@pytest.mark.parametrize("bad", [float("nan"), {"x": float("inf")}, "\ud800", 2**60])
def test_values_json_cannot_carry_are_refused(bad):
    with pytest.raises(InputError):
        canonical_json(bad)
