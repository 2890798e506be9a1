"""The audit tests' ledger: a real signed SQLite store whose catalogue also serves the toy
class of tests/plugins (fast, unsandboxed runs through the real runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore

from ..harnesses._toy import toy_ledger


@pytest.fixture
def toy_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    yield from toy_ledger(tmp_path, monkeypatch)
