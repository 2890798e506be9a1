"""The audit tests' ledger: a real signed SQLite store whose catalogue also serves the toy
class of tests/plugins (fast, unsandboxed runs through the real runner)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.harnesses import runner
from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore

from ..harnesses._toy import TOY_RULES


@pytest.fixture
def toy_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    real = runner.load_catalogue
    monkeypatch.setattr(runner, "load_catalogue", lambda: {**real(), "toy_sum": TOY_RULES})
    create_log_key(tmp_path / "keys")
    opened = open_sqlite_ledger(tmp_path / "ledger.db", tmp_path / "keys")
    yield opened
    opened.close()
