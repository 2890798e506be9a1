"""The shared identifier rule and wall clock (issue 14 item 8): one definition each."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest

from triz_ri_smart_ai_evaluator._clock import now_utc
from triz_ri_smart_ai_evaluator._ids import is_plain_id


@pytest.mark.parametrize("value", ["a", "attempt-1", "src.harness:v2@host/x+y", "9" * 200])
def test_plain_identifiers_are_accepted(value: str) -> None:
    assert is_plain_id(value)


@pytest.mark.parametrize(
    "value", ["", "-leading", ".dot", "has space", "tab\t", "line\n", "x" * 201, "é", 7, None],
)
def test_anything_else_is_not_a_plain_identifier(value: object) -> None:
    assert not is_plain_id(value)


def test_the_clock_is_utc_and_aware() -> None:
    now = now_utc()
    assert now.tzinfo is UTC
    assert now.utcoffset() == timedelta(0)
