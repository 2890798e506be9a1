"""Regression tests, each named after the hole it closes (found by the tamper and bad-input
suites of issue 3).  Every test builds a real SQLite ledger with a real log key and a real
witness, then attacks it the way the named incident did."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.errors import InputError, IntegrityError
from triz_ri_smart_ai_evaluator.evaluation import attempts
from triz_ri_smart_ai_evaluator.ledger import events
from triz_ri_smart_ai_evaluator.ledger.checkpoint import Checkpoint, generate_signer, sign_note
from triz_ri_smart_ai_evaluator.ledger.events import Event, EventKind, NewEvent, parse_body, seal
from triz_ri_smart_ai_evaluator.ledger.log import (
    check_ledger,
    create_log_key,
    load_log_signer,
    open_sqlite_ledger,
    witness_cosign,
    witness_notes_for,
)
from triz_ri_smart_ai_evaluator.ledger.merkle import leaf_hash, root_from_leaf_hashes
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.ledger.witness import WitnessStore
from triz_ri_smart_ai_evaluator.rules import pin

from ..signal.factories import DEFECT, inputs_for, task_class
from ._tamper import forged as forge

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)  # defect_fix rules v2 in force


def _event(i: int, *, kind: EventKind = EventKind.COMMENT_ADDED, data: dict | None = None,
           attempt: str | None = "a-1") -> NewEvent:
    return NewEvent.make(kind, data if data is not None else {"text": f"event {i}"}, actor="tester",
                         at=T0 + timedelta(seconds=i), attempt=attempt)


class World:
    """A ledger file, its log key and a witness that cosigned along the way."""

    def __init__(self, tmp: Path) -> None:
        self.db = tmp / "ledger.db"
        self.keys = tmp / "keys"
        self.log_key = create_log_key(self.keys)
        self.witness = WitnessStore(tmp / "witness")
        self.witness_key = self.witness.init("witness.test/w")

    def store(self, *, every: int = 1000) -> SqliteStore:
        return open_sqlite_ledger(self.db, self.keys, every_events=every)

    def grow(self, events: list[NewEvent], *, cosign: bool = True) -> None:
        store = self.store()
        try:
            store.append(events, force_checkpoint=True)
            if cosign:
                witness_cosign(store, self.witness, log_key=self.log_key)
        finally:
            store.close()

    def verify(self):
        store = SqliteStore.open(self.db, read_only=True)
        try:
            return check_ledger(
                store, log_key=self.log_key,
                witness_notes=witness_notes_for(self.witness, self.log_key.name),
                witness_key=self.witness_key, workers=1)
        finally:
            store.close()

    def owner(self) -> sqlite3.Connection:
        """The file's owner: no authorizer, triggers dropped."""
        conn = sqlite3.connect(self.db, isolation_level=None)
        for table in ("events", "evidence", "checkpoints"):
            for op in ("update", "delete"):
                conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{op}")
        return conn


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_owner_rewriting_the_tail_and_resigning_is_located_from_the_witness(world: World):
    # The witness cosigned sizes 10 and 20.  The owner drops the triggers, deletes events
    # 12..20 and the log's checkpoints past 10, then appends forged events with every hash
    # recomputed and the log's checkpoints at 15 and 20 re-signed with the log key.  The
    # divergence must be located after the WITNESS's 10, never after the owner's own 15.
    world.grow([_event(i) for i in range(1, 11)])
    world.grow([_event(i) for i in range(11, 21)])
    conn = world.owner()
    conn.execute("DELETE FROM events WHERE seq >= 12")
    conn.execute("DELETE FROM checkpoints WHERE size > 10")
    conn.close()
    forged = open_sqlite_ledger(world.db, world.keys, unsafe_resign_head=True)  # holds the key
    for first, end in ((12, 16), (16, 21)):
        forged.append([_event(i, data={"text": f"forged event {i}"}) for i in range(first, end)],
                      force_checkpoint=True)
    forged.close()
    report = world.verify()
    assert not report.ok
    assert report.first_divergence == "events 11..20"


def test_a_corrupt_database_page_is_an_integrity_error_not_a_crash(world: World):
    world.grow([_event(i, data={"text": "x" * 3000}) for i in range(1, 40)])
    raw = bytearray(world.db.read_bytes())
    page = 4096
    raw[-page:] = b"\xa5" * page  # the last page (events rows) overwritten with garbage
    world.db.write_bytes(bytes(raw))
    before = world.db.read_bytes()
    with pytest.raises(IntegrityError, match="not a readable ledger database"):
        world.verify()
    assert world.db.read_bytes() == before


def test_a_checkpoint_cannot_be_signed_with_another_log_key(world: World, tmp_path: Path):
    world.grow([_event(i) for i in range(1, 6)])
    before = world.db.read_bytes()
    other_keys = tmp_path / "other-keys"
    create_log_key(other_keys)
    with pytest.raises(IntegrityError, match="not signed by this log key"):
        open_sqlite_ledger(world.db, other_keys)
    assert world.db.read_bytes() == before
    assert world.verify().ok


def test_a_lying_attempt_column_is_detected(world: World):
    world.grow([_event(i, attempt="a-1") for i in range(1, 6)])
    conn = world.owner()
    conn.execute("UPDATE events SET attempt = 'a-2' WHERE seq = 3")
    conn.close()
    report = world.verify()
    assert report.first_divergence == "event 3"
    assert "indexed kind or attempt" in report.problems[0]


def test_a_lying_kind_column_is_detected(world: World):
    world.grow([_event(i) for i in range(1, 6)])
    conn = world.owner()
    conn.execute("UPDATE events SET kind = 'attempt.completed' WHERE seq = 4")
    conn.close()
    report = world.verify()
    assert report.first_divergence == "event 4"


def test_a_nested_evidence_kind_in_data_is_not_taken_for_an_evidence_event(world: World):
    nested = {"note": {"kind": "evidence.stored"}, "x": {"kind": "evidence.stored"}}
    world.grow([_event(1, kind=EventKind.VERIFIER_DECISION, data=nested)])
    report = world.verify()
    assert report.ok, report.problems
    assert report.evidence_checked == 0


def test_an_evidence_event_with_a_non_text_digest_is_reported_not_crashed(world: World):
    honest = _event(1, kind=EventKind.EVIDENCE_STORED, data={"what": "blob", "digest": "ab" * 32})
    world.grow([forge(honest, {"digest": {"a": 1}})])  # stored as an owner writes it
    report = world.verify()
    assert not report.ok
    assert "not text" in report.problems[0]


def test_real_evidence_is_still_checked(world: World):
    store = world.store()
    digest = store.put_evidence(b"payload")
    store.close()
    world.grow([_event(1, kind=EventKind.EVIDENCE_STORED,
                       data={"what": "payload", "digest": digest})])
    report = world.verify()
    assert report.ok
    assert report.evidence_checked == 1


@pytest.mark.parametrize(("field", "value"), [
    ("actor", "tester\n"), ("attempt", "a-1\n"), ("at", "2026-12-01T10:00:00.000000Z\n")])
def test_a_trailing_newline_in_an_event_field_is_refused(field: str, value: str):
    kwargs: dict = {"actor": "tester", "at": "2026-12-01T10:00:00.000000Z", "attempt": "a-1"}
    kwargs[field] = value
    with pytest.raises(InputError):
        NewEvent.make(EventKind.COMMENT_ADDED, {"text": "x"}, **kwargs)


@pytest.fixture
def escrowed(tmp_path: Path):
    store = SqliteStore.open(tmp_path / "escrow.db")
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="d-1", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14))
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    attempts.evaluate(store, pinned, inputs_for(DEFECT, values), attempt_id="d-1", at=T0)
    yield store
    store.close()


def test_settle_with_a_late_set_the_rules_refuse_writes_nothing(escrowed: SqliteStore):
    digest = hashlib.sha256(canonical_json({"r": 0})).hexdigest()
    late = {"recurrence_free": {"value": "1", "source": "issue_tracker", "evidence": [digest]},
            "regression_suite": {"value": "1", "source": "ci", "evidence": [digest]}}
    before = escrowed.size()
    with pytest.raises((InputError, IntegrityError)):
        attempts.settle(escrowed, "d-1", late=late, at=T0 + timedelta(days=15))
    assert escrowed.size() == before


def test_settle_with_a_malformed_late_value_is_an_input_error(escrowed: SqliteStore):
    before = escrowed.size()
    with pytest.raises(InputError, match="late value"):
        attempts.settle(escrowed, "d-1", late={"recurrence_free": {"value": []}},
                        at=T0 + timedelta(days=15))
    assert escrowed.size() == before


def test_evaluate_with_an_unknown_indicator_writes_no_measurement(tmp_path: Path):
    store = SqliteStore.open(tmp_path / "e.db")
    pinned = pin(task_class(DEFECT), started_at=T0)
    attempts.initiate(store, pinned, attempt_id="d-2", task_version="1", started_at=T0,
                      deadline=T0 + timedelta(days=14))
    values = {"reproduction_fixed": "1", "regression_suite": "1", "p95_latency_ms": "200",
              "recurrence_free": "1"}
    bad = inputs_for(DEFECT, values)
    bad = bad.model_copy(update={"measurements": {**bad.measurements,
                                                  "no_such_indicator": bad.measurements[
                                                      "regression_suite"]}})
    before = store.size()
    with pytest.raises(InputError):
        attempts.evaluate(store, pinned, bad, attempt_id="d-2", at=T0)
    assert store.size() == before
    store.close()


def test_a_forged_checkpoint_with_another_root_at_the_same_size_is_detected(world: World):
    world.grow([_event(i) for i in range(1, 9)])
    signer = load_log_signer(world.keys)
    fake_root = root_from_leaf_hashes([leaf_hash(b"x")] * 8)
    note = sign_note(Checkpoint(signer.name, 8, fake_root).to_body(), signer)
    conn = world.owner()
    conn.execute("DELETE FROM checkpoints WHERE size = 8")
    conn.execute("INSERT INTO checkpoints VALUES (8, ?)", (note,))
    conn.close()
    assert not world.verify().ok
    # A checkpoint signed by a stranger is refused too.
    stranger = generate_signer(signer.name)
    conn = world.owner()
    conn.execute("DELETE FROM checkpoints WHERE size = 8")
    conn.execute("INSERT INTO checkpoints VALUES (8, ?)",
                 (sign_note(Checkpoint(signer.name, 8, fake_root).to_body(), stranger),))
    conn.close()
    assert not world.verify().ok


def test_an_events_kind_is_read_once_and_a_bad_body_never_gives_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16: ``Event.kind`` is kept after the first read (the service's ledger thread read
    each body's kind several times per submission).  Only a body that parses and checks is
    kept: a non-canonical one raises on every read, and the fields stay a fresh copy."""
    parsed: list[int] = []

    def counting(body: bytes, *, seq: int) -> dict[str, object]:
        parsed.append(seq)
        return parse_body(body, seq=seq)

    monkeypatch.setattr(events, "parse_body", counting)
    good = seal(_event(1), seq=1, prev="0" * 64)
    assert [good.kind for _ in range(3)] == [EventKind.COMMENT_ADDED.value] * 3
    assert parsed == [1]
    good.fields["kind"] = "escrow.released"  # a caller's copy, not the event's
    assert good.kind == EventKind.COMMENT_ADDED.value
    assert good.fields["kind"] == EventKind.COMMENT_ADDED.value
    assert good == Event(good.seq, good.body, good.leaf)  # the kept kind is not compared
    bad_body = good.body.replace(b'{"actor"', b'{ "actor"', 1)  # valid JSON, not canonical
    bad = Event(good.seq, bad_body, leaf_hash(bad_body))
    for _ in range(2):
        with pytest.raises(IntegrityError, match="not in canonical form"):
            _ = bad.kind
