"""The toy class's harness and rules, loaded from tests/plugins without installing the plugin,
and small helpers the harness tests share."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from triz_ri_smart_ai_evaluator.harnesses import runner
from triz_ri_smart_ai_evaluator.ledger.log import create_log_key, open_sqlite_ledger
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules.loader import load_task_class

TOY = Path(__file__).resolve().parent.parent / "plugins" / "toy_task_class" / "toy_triz_class"


def _load(name: str, path: Path) -> ModuleType:
    """The toy module from its file, without putting the plugin folder on sys.path: there its
    .dist-info would register the toy class for every test of this process."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look a module up by name
    spec.loader.exec_module(module)
    return module


_toy = _load("toy_sum_harness_under_test", TOY / "harness.py")
HARNESS = _toy.HARNESS
ToySumHarness = _toy.ToySumHarness
TOY_RULES = load_task_class(TOY / "toy_sum.yaml")


def candidate(tmp_path: Path, op: str) -> Path:
    """A toy candidate file naming ``op``."""
    path = tmp_path / f"{op}.json"
    path.write_text(json.dumps({"op": op}), "utf-8")
    return path


def kinds(store: LedgerStore, attempt_id: str) -> list[str]:
    """The attempt's event kinds in order, evidence as ``evidence.stored:<what>``."""
    out = []
    for e in store.attempt_events(attempt_id):
        data = e.fields["data"]
        out.append(f"{e.kind}:{data['what']}" if e.kind == "evidence.stored" else e.kind)
    return out


def toy_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    """A real signed SQLite ledger under ``tmp_path`` whose runner catalogue also serves the toy
    class (not installed here: the runner finds its rules through the catalogue)."""
    real = runner.load_catalogue
    monkeypatch.setattr(runner, "load_catalogue", lambda: {**real(), "toy_sum": TOY_RULES})
    create_log_key(tmp_path / "keys")
    opened = open_sqlite_ledger(tmp_path / "ledger.db", tmp_path / "keys")
    yield opened
    opened.close()
