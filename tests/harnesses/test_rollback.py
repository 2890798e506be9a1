"""spec 9.19 "version rollback": an attempt the runner opens itself starts under the owner's
rollback while it is in force, and under the published version in force once it is lifted
(the policy port does the same: tests/service/test_owner_loop_control.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator._clock import now_utc
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.harnesses import runner
from triz_ri_smart_ai_evaluator.harnesses.protocol import RunOptions
from triz_ri_smart_ai_evaluator.ledger.store import LedgerStore
from triz_ri_smart_ai_evaluator.rules.versions import rules_version

from . import _toy

CLASS = _toy.TOY_RULES.id


def _started_under(store: LedgerStore, tmp_path: Path, name: str) -> str:
    result = runner.run(_toy.HARNESS, _toy.candidate(tmp_path, "add"), store,
                        tmp_path / name, RunOptions(size=8))
    assert result.status == "completed", result.summary
    [initiated] = [e.data for e in store.attempt_events(result.attempt_id)
                   if e.kind == "attempt.initiated"]
    assert result.summary["rules_version"] == initiated["rules_version"]
    return str(initiated["rules_version"])


def _rollback(store: LedgerStore, version: str | None) -> None:
    loop.set_mode(store, CLASS, "training", cause="rollback", reason="owner's rollback drill",
                  at=now_utc(), actor="owner", rules_version=version)


def test_a_runner_opened_attempt_starts_under_the_rollback_until_it_is_lifted(
        store: LedgerStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _started_under(store, tmp_path, "first")
    fixed = _toy.TOY_RULES.model_copy(update={"title": f"{_toy.TOY_RULES.title} (fixed)"})
    new = rules_version(fixed)
    assert new != old
    real = runner.load_catalogue
    monkeypatch.setattr(runner, "load_catalogue", lambda: {**real(), CLASS: fixed})
    assert _started_under(store, tmp_path, "second") == new
    _rollback(store, old)  # the ledger holds the old version's rules.published
    assert _started_under(store, tmp_path, "rolled-back") == old
    _rollback(store, None)
    assert _started_under(store, tmp_path, "lifted") == new


def test_a_rollback_to_a_version_never_published_ends_nothing_and_runs_nothing(
        store: LedgerStore, tmp_path: Path) -> None:
    _rollback(store, "0" * 64)
    size = store.size()
    with pytest.raises(InputError):
        runner.run(_toy.HARNESS, _toy.candidate(tmp_path, "add"), store, tmp_path / "r",
                   RunOptions(size=8))
    assert store.size() == size
