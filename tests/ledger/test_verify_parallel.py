"""Parallel verification: compact ranges merged across processes give the same roots."""

from __future__ import annotations

import itertools
import random
import sqlite3
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.ledger import log as ledger_log
from triz_ri_smart_ai_evaluator.ledger.events import NewEvent
from triz_ri_smart_ai_evaluator.ledger.log import (
    check_ledger,
    create_log_key,
    open_sqlite_ledger,
)
from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash, root_from_leaf_hashes
from triz_ri_smart_ai_evaluator.ledger.verify import merged_root, push


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 400), data=st.data())
def test_compact_ranges_from_any_cuts_merge_to_the_rfc6962_root(n, data):
    leaves = [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]
    cuts = sorted(set(data.draw(st.lists(st.integers(0, n), max_size=4))))
    bounds = [0, *cuts, n]
    prefix: list[tuple[int, bytes]] = []
    for start, end in itertools.pairwise(bounds):
        part: list[tuple[int, bytes]] = []
        for i in range(start, end):
            push(part, i, 0, leaves[i])
        prefix, root = merged_root(prefix, start, part)
        assert root == root_from_leaf_hashes(leaves[:end])


@pytest.fixture
def big_ledger(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_log, "PARALLEL_FROM", 100)  # exercise the parallel path
    key = create_log_key(tmp_path / "keys")
    store = open_sqlite_ledger(tmp_path / "l.db", tmp_path / "keys", every_events=97)
    now = datetime.now(UTC)
    events = [
        NewEvent.make("comment.added", {"text": f"event {i}"}, actor="harness", at=now,
                      attempt=f"a{i % 7}")
        for i in range(3001)
    ]
    for i in range(0, len(events), 250):
        store.append(events[i : i + 250])
    store.append([], force_checkpoint=True)
    return tmp_path, store, key


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_parallel_and_serial_verification_agree_on_a_clean_ledger(big_ledger, workers):
    _, store, key = big_ledger
    report = check_ledger(store, log_key=key, workers=workers)
    assert report.ok, report.problems
    assert report.size == 3001
    assert report.checkpoints_checked == len(store.checkpoints())


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_verification_finds_a_deleted_event_at_a_range_seam(big_ledger, workers):
    tmp_path, store, key = big_ledger
    victim = random.Random(workers).choice([1001, 1501, 2001])
    conn = sqlite3.connect(tmp_path / "l.db")  # the owner, bypassing the writer's protections
    conn.execute("DROP TRIGGER events_no_delete")
    conn.execute("DELETE FROM events WHERE seq = ?", (victim,))
    conn.commit()
    report = check_ledger(store, log_key=key, workers=workers)
    assert not report.ok
    assert report.first_divergence is not None
    assert str(victim) in report.first_divergence
