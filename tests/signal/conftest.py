"""Fixtures for the signal tests: factories, per the house style."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from triz_ri_smart_ai_evaluator.signal import AttemptInputs

from .factories import inputs_for


@pytest.fixture
def make_inputs() -> Callable[..., AttemptInputs]:
    return inputs_for
