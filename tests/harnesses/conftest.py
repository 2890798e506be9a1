"""The harness tests' ledger: a real signed SQLite store whose catalogue also serves the toy
class (not installed here: the runner finds its rules through the catalogue)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore

from ._toy import toy_ledger


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    yield from toy_ledger(tmp_path, monkeypatch)
