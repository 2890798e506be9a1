"""Shared fixtures for the task-class catalogue, rules-version and CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.rules.loader import BUNDLED_CATALOGUE, load_task_class
from triz_ri_smart_ai_evaluator.rules.task_class import TaskClass

PILOT_FILE = BUNDLED_CATALOGUE / "pilot_02_feedback_form.yaml"
DELAYED_FILE = BUNDLED_CATALOGUE / "defect_fix_delayed_confirmation.yaml"


@pytest.fixture
def pilot_text() -> str:
    """The text of the bundled pilot 02 class, read at test time."""
    return PILOT_FILE.read_text(encoding="utf-8")


@pytest.fixture
def delayed_text() -> str:
    """The text of the bundled delayed-confirmation class, read at test time."""
    return DELAYED_FILE.read_text(encoding="utf-8")


@pytest.fixture
def pilot_class() -> TaskClass:
    return load_task_class(PILOT_FILE)


@pytest.fixture
def delayed_class() -> TaskClass:
    return load_task_class(DELAYED_FILE)


@pytest.fixture
def pilot_file() -> Path:
    return PILOT_FILE


@pytest.fixture
def delayed_file() -> Path:
    return DELAYED_FILE
