"""Shared pieces of the tamper suite: a small witnessed ledger template, an attacker who owns
the database (SQLite file or PostgreSQL superuser), every kind of tampering, and the reading of
a verify report's first divergence.

The template has ``N`` events, a log checkpoint every ``CHECKPOINT_EVERY`` events and witness
cosignatures at ``WITNESS_SIZES`` (mid-way and at the end), so every event is covered by a
witnessed root.  Both backends are built from the same events, key and clock, so they hold
byte-identical bodies and checkpoints and the same witness notes apply to both.

A tampering is ``(kind, position)``; :func:`apply` performs it through an :class:`Attacker` and
returns what the verifier must then report (an event position or a checkpoint size).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from triz_ri_smart_ai_evaluator.canonical import canonical_json
from triz_ri_smart_ai_evaluator.ledger.checkpoint import (
    SIG_COSIGNATURE_V1,
    Checkpoint,
    NoteSigner,
    NoteVerifier,
    add_signature,
    generate_signer,
    parse_note,
    sign_note,
)
from triz_ri_smart_ai_evaluator.ledger.events import GENESIS_PREV, NewEvent, seal
from triz_ri_smart_ai_evaluator.ledger.merkle import (
    MerkleAccumulator,
    leaf_hash,
    root_from_leaf_hashes,
)
from triz_ri_smart_ai_evaluator.ledger.store import CheckpointPolicy, LedgerStore
from triz_ri_smart_ai_evaluator.ledger.verify import Report

ORIGIN = "tamper.test.example/log"
WITNESS_NAME = "tamper.test.example/witness"
AT = "2025-03-01T12:00:00.000000Z"
N = 48
BATCH = 4
CHECKPOINT_EVERY = 8
CHECKPOINT_SIZES = tuple(range(CHECKPOINT_EVERY, N + 1, CHECKPOINT_EVERY))
WITNESS_SIZES = (24, 48)
EVIDENCE_POSITIONS = tuple(p for p in range(1, N + 1) if p % 6 == 3)
TABLES = ("events", "evidence", "checkpoints")


# -- the template ----------------------------------------------------------------------------
def evidence_blob(position: int) -> bytes:
    return f"evidence blob of event {position}: na\u00efve \u2713".encode()


def template_event(position: int) -> NewEvent:
    """Event ``position`` (1-based) of the template: registered sources with non-ASCII text
    and a nested ``prev``/``kind``, and an ``evidence.stored`` event every sixth position."""
    attempt = f"att-{position % 4}" if position % 5 else None
    if position in EVIDENCE_POSITIONS:
        digest = hashlib.sha256(evidence_blob(position)).hexdigest()
        return NewEvent.make("evidence.stored",
                             {"what": "text/plain", "digest": digest, "size": position},
                             actor="harness", at=AT, attempt=f"att-{position % 4}")
    return NewEvent.make(
        "source.registered",
        {"source": {"i": position, "value": str(position * 7), "text": "na\u00efve \u2013 \u2713",
                    "nested": {"prev": "not-the-link", "kind": "note"}}},
        actor="runner-1", at=AT, attempt=attempt)


def forged(event: NewEvent, data: dict[str, Any], *, kind: str | None = None) -> NewEvent:
    """``event`` with its data bytes (and kind) replaced as an attacker writes them: not
    through ``NewEvent.make``, so the data need not fit any kind's payload."""
    return replace(event, kind=event.kind if kind is None else kind,
                   data_bytes=canonical_json(data))


def log_policy(signer: NoteSigner) -> CheckpointPolicy:
    return CheckpointPolicy(signer, ORIGIN, every_events=CHECKPOINT_EVERY, every_seconds=1e9,
                            clock=lambda: 1.0)


def fill(store: LedgerStore, start: int, end: int) -> None:
    """Append template events ``start..end`` in batches of ``BATCH`` (evidence stored first)."""
    for first in range(start, end + 1, BATCH):
        positions = range(first, min(first + BATCH - 1, end) + 1)
        for p in positions:
            if p in EVIDENCE_POSITIONS:
                store.put_evidence(evidence_blob(p))
        assert store.append([template_event(p) for p in positions]) == list(positions)


@dataclass
class Keys:
    """The log key (which the owner holds: he can re-sign), a forger's key with the log's name,
    the witness key and a forger's key with the witness's name."""

    log: NoteSigner = field(default_factory=lambda: generate_signer(ORIGIN))
    log_forger: NoteSigner = field(default_factory=lambda: generate_signer(ORIGIN))
    witness_forger: NoteSigner = field(
        default_factory=lambda: generate_signer(WITNESS_NAME, sig_type=SIG_COSIGNATURE_V1))

    @property
    def log_key(self) -> NoteVerifier:
        return self.log.verifier


@dataclass
class Template:
    """What a tampering needs to know about the honest ledger."""

    keys: Keys
    witness_key: NoteVerifier
    witness_notes: list[str]
    rows: list[tuple[int, bytes, str, str | None, bytes]]  # seq, leaf, kind, attempt, body
    checkpoints: list[tuple[int, str]]

    @property
    def leaves(self) -> list[bytes]:
        return [leaf for _, leaf, _, _, _ in self.rows]

    def body(self, seq: int) -> bytes:
        return self.rows[seq - 1][4]

    def fields(self, seq: int) -> dict[str, Any]:
        return json.loads(self.body(seq))  # type: ignore[no-any-return]

    def prev_of(self, seq: int) -> str:
        return GENESIS_PREV if seq == 1 else self.leaves[seq - 2].hex()


def rows_of(store: LedgerStore) -> list[tuple[int, bytes, str, str | None, bytes]]:
    """The honest rows as the backend's indexed columns would hold them."""
    out = []
    for seq, body in store.scan():
        fields = json.loads(body)
        out.append((seq, leaf_hash(body), fields["kind"], fields["attempt"], body))
    return out


# -- the attacker ------------------------------------------------------------------------------
class Attacker:
    """The database owner.  ``sql`` takes statements written for SQLite (``?`` parameters,
    bare table names in braces: ``{events}``)."""

    backend = ""

    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def unguard(self, *tables: str) -> None:
        """Switch off the append-only guards of ``tables`` (to be restored by ``reguard``)."""
        raise NotImplementedError

    def reguard(self) -> None:
        """Put the guards back, covering the tracks."""
        raise NotImplementedError

    def drop_guards(self, *tables: str) -> None:
        """Drop the guards of ``tables`` for good."""
        raise NotImplementedError

    def truncate(self, table: str) -> None:
        raise NotImplementedError

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        """Insert ``row``, replacing the row with the same primary key."""
        raise NotImplementedError


class SqliteAttacker(Attacker):
    """Owner of the SQLite file: a plain connection without the store's authorizer."""

    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._saved: list[str] = []

    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        text = statement.format(events="events", evidence="evidence",
                                checkpoints="checkpoints", head="head")
        return self.conn.execute(text, tuple(params)).fetchall()

    def _triggers(self, tables: Sequence[str]) -> list[tuple[str, str]]:
        marks = ",".join("?" * len(tables))
        return self.conn.execute(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({marks})",
            tuple(tables)).fetchall()

    def unguard(self, *tables: str) -> None:
        for name, text in self._triggers(tables):
            self._saved.append(text)
            self.conn.execute(f'DROP TRIGGER "{name}"')

    def reguard(self) -> None:
        for text in self._saved:
            self.conn.execute(text)
        self._saved.clear()

    def drop_guards(self, *tables: str) -> None:
        for name, _ in self._triggers(tables):
            self.conn.execute(f'DROP TRIGGER "{name}"')

    def truncate(self, table: str) -> None:
        # SQLite has no TRUNCATE: an unqualified DELETE is its truncate optimisation.
        self.unguard(table)
        self.conn.execute(f"DELETE FROM {table}")

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        # INSERT OR REPLACE deletes the old row without firing DELETE triggers (recursive
        # triggers are off on an ordinary connection): it needs no dropped guard at all.
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        self.conn.execute(f"INSERT OR REPLACE INTO {table} ({columns}) VALUES ({marks})",
                          tuple(row.values()))


class PostgresAttacker(Attacker):
    """A superuser inside one transaction (rolled back by the caller after verification)."""

    backend = "postgres"

    def __init__(self, conn: Any, schema: str) -> None:
        self.conn = conn
        self.schema = schema
        self._disabled: list[tuple[str, str]] = []

    def t(self, table: str) -> str:
        return f'"{self.schema}".{table}'

    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        text = statement.format(**{t: self.t(t) for t in (*TABLES, "head")}).replace("?", "%s")
        cur = self.conn.execute(text, tuple(params))
        return cur.fetchall() if cur.description else []

    def _triggers(self, table: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
            (self.t(table),)).fetchall()
        return [r[0] for r in rows]

    def unguard(self, *tables: str) -> None:
        for table in tables:
            for name in self._triggers(table):
                self.conn.execute(f'ALTER TABLE {self.t(table)} DISABLE TRIGGER "{name}"')
                self._disabled.append((table, name))

    def reguard(self) -> None:
        for table, name in self._disabled:
            self.conn.execute(f'ALTER TABLE {self.t(table)} ENABLE ALWAYS TRIGGER "{name}"')
        self._disabled.clear()

    def drop_guards(self, *tables: str) -> None:
        for table in tables:
            for name in self._triggers(table):
                self.conn.execute(f'DROP TRIGGER "{name}" ON {self.t(table)}')

    def truncate(self, table: str) -> None:
        self.unguard(table)
        self.conn.execute(f"TRUNCATE {self.t(table)}")

    def upsert(self, table: str, row: dict[str, Any]) -> None:
        key = {"events": "seq", "checkpoints": "size", "evidence": "digest"}[table]
        self.unguard(table)  # ON CONFLICT DO UPDATE fires the row UPDATE guard
        columns = ", ".join(row)
        marks = ", ".join(["%s"] * len(row))
        sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in row if c != key)
        self.conn.execute(f"INSERT INTO {self.t(table)} ({columns}) VALUES ({marks}) "
                          f"ON CONFLICT ({key}) DO UPDATE SET {sets}", tuple(row.values()))


# -- tamperings --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    """What the report must show: ``event`` (first divergent position), ``checkpoint`` (a
    problem naming a checkpoint of that size) or ``witness`` (a problem with a witness note)."""

    what: str
    at: int
    extra_witness_notes: tuple[str, ...] = ()


def _reserialised(body: bytes) -> bytes:
    """The same JSON value in non-canonical bytes: a space after the first ``data`` colon."""
    start = body.index(b'"data":{') + len(b'"data":{')
    colon = body.index(b":", start)
    return body[: colon + 1] + b" " + body[colon + 1 :]


def _edit(template: Template, seq: int, **changes: Any) -> NewEvent:
    """The event at ``seq`` with envelope fields or data entries changed, as an attacker
    writes it (the changed data need not fit the kind's payload)."""
    f = template.fields(seq)
    data = {**f["data"], **changes.pop("data", {})}
    honest = NewEvent.make(f["kind"], f["data"], actor=changes.get("actor", f["actor"]),
                           at=f["at"], attempt=changes.get("attempt", f["attempt"]))
    return forged(honest, data, kind=changes.get("kind"))


def _set_body(a: Attacker, seq: int, body: bytes, *, leaf: bytes | None = None,
              kind: str | None = None) -> None:
    a.sql("UPDATE {events} SET body = ?, leaf = ? WHERE seq = ?",
          (body, leaf if leaf is not None else leaf_hash(body), seq))
    if kind is not None:
        a.sql("UPDATE {events} SET kind = ? WHERE seq = ?", (kind, seq))


def _move(a: Attacker, where: str, delta: int, params: Sequence[Any] = ()) -> None:
    """Shift seq by ``delta`` for the rows ``where`` (via a far-away range: unique keys are
    checked row by row)."""
    far = 1_000_000
    a.sql(f"UPDATE {{events}} SET seq = seq + {far + delta} WHERE {where}", params)
    a.sql(f"UPDATE {{events}} SET seq = seq - {far} WHERE seq > {far // 2}")


def _reseal_tail(a: Attacker, t: Template, p: int, *, resign: bool) -> None:
    """Rewrite events p..N with new data and recompute every hash: bodies, links, leaves,
    head; the log's checkpoints from p on are deleted, and with ``resign`` signed again with
    the log key over the new history (the owner holds the log key)."""
    a.unguard("events", "checkpoints")
    leaves = t.leaves[: p - 1]
    prev = t.prev_of(p)
    for seq in range(p, N + 1):
        sealed = seal(_edit(t, seq, data={"rewritten": seq}), seq=seq, prev=prev)
        a.sql("UPDATE {events} SET body = ?, leaf = ? WHERE seq = ?",
              (sealed.body, sealed.leaf, seq))
        leaves.append(sealed.leaf)
        prev = sealed.leaf.hex()
    a.sql("DELETE FROM {checkpoints} WHERE size >= ?", (p,))
    if resign:
        for size in CHECKPOINT_SIZES:
            if size >= p:
                body = Checkpoint(ORIGIN, size, root_from_leaf_hashes(leaves[:size])).to_body()
                a.sql("INSERT INTO {checkpoints} (size, note) VALUES (?, ?)",
                      (size, sign_note(body, t.keys.log)))
    acc = MerkleAccumulator()
    for leaf in leaves:
        acc.append(leaf)
    a.sql("UPDATE {head} SET last_leaf = ?, peaks = ? WHERE id = 1",
          (prev, b"".join(acc.peaks)))
    a.reguard()


def _forked_root(t: Template, size: int) -> bytes:
    forked = [*t.leaves[: size - 1], leaf_hash(b"forged event at %d" % size)]
    return root_from_leaf_hashes(forked)


def _tamper(kind: str, a: Attacker, t: Template, p: int) -> Expect:
    ev = Expect("event", p)
    if kind == "update_data":
        a.unguard("events")
        body = _edit(t, p, data={"value": "forged"}).body(seq=p, prev=t.prev_of(p))
        _set_body(a, p, body)
        a.reguard()
    elif kind == "update_actor":
        a.unguard("events")
        _set_body(a, p, _edit(t, p, actor="mallory").body(seq=p, prev=t.prev_of(p)))
        a.reguard()
    elif kind == "update_kind_in_body":
        a.unguard("events")
        body = _edit(t, p, kind="comment.added").body(seq=p, prev=t.prev_of(p))
        _set_body(a, p, body, kind="comment.added")
        a.reguard()
    elif kind == "update_prev":
        a.unguard("events")
        _set_body(a, p, _edit(t, p).body(seq=p, prev="ab" * 32))
        a.reguard()
    elif kind == "update_seq":
        a.unguard("events")
        _set_body(a, p, _edit(t, p).body(seq=p + 100, prev=t.prev_of(p)))
        a.reguard()
    elif kind == "update_noncanonical":
        a.unguard("events")
        _set_body(a, p, _reserialised(t.body(p)))
        a.reguard()
    elif kind == "update_garbage":
        a.unguard("events")
        _set_body(a, p, b"\xff\x00 not an event " + t.body(p)[:20])
        a.reguard()
    elif kind == "dropped_trigger":
        # The guards are dropped for good and the body edited in place, leaf column recomputed.
        a.drop_guards(*TABLES)
        key = b'"size":' if p in EVIDENCE_POSITIONS else b'"i":'
        assert key + b"%d" % p in t.body(p)
        _set_body(a, p, t.body(p).replace(key + b"%d" % p, key + b"%d" % (p + 1), 1))
    elif kind == "delete":
        a.unguard("events")
        a.sql("DELETE FROM {events} WHERE seq = ?", (p,))
        a.reguard()
    elif kind == "delete_resequence":
        a.unguard("events")
        a.sql("DELETE FROM {events} WHERE seq = ?", (p,))
        _move(a, "seq > ?", -1, (p,))
        a.reguard()
    elif kind in ("truncate", "truncate_keep_checkpoints"):
        # TRUNCATE, then put back the first p-1 events: the log is cut back to p-1 events.
        a.truncate("events")
        for row in t.rows[: p - 1]:
            a.sql("INSERT INTO {events} (seq, leaf, kind, attempt, body) VALUES (?, ?, ?, ?, ?)",
                  row)
        if kind == "truncate":
            a.unguard("checkpoints")
            a.sql("DELETE FROM {checkpoints} WHERE size >= ?", (p,))
        a.reguard()
    elif kind == "reorder":
        a.unguard("events")
        a.sql("UPDATE {events} SET seq = 999999 WHERE seq = ?", (p,))
        a.sql("UPDATE {events} SET seq = ? WHERE seq = ?", (p, p + 1))
        a.sql("UPDATE {events} SET seq = ? WHERE seq = 999999", (p + 1,))
        a.reguard()
    elif kind == "insert_or_replace":
        forged = _edit(t, p, data={"forged": True})
        sealed = seal(forged, seq=p, prev=t.prev_of(p))
        a.upsert("events", {"seq": p, "leaf": sealed.leaf, "kind": forged.kind,
                            "attempt": forged.attempt, "body": sealed.body})
        a.reguard()
    elif kind in ("rewrite_tail", "rewrite_tail_resigned"):
        _reseal_tail(a, t, p, resign=kind == "rewrite_tail_resigned")
    elif kind == "column_kind":
        a.unguard("events")
        a.sql("UPDATE {events} SET kind = ? WHERE seq = ?",
              ("comment.added" if t.rows[p - 1][2] != "comment.added" else "measurement.raw", p))
        a.reguard()
    elif kind == "column_attempt":
        a.unguard("events")
        a.sql("UPDATE {events} SET attempt = ? WHERE seq = ?",
              (None if t.rows[p - 1][3] else "att-hidden", p))
        a.reguard()
    elif kind == "evidence_update":
        digest = t.fields(p)["data"]["digest"]
        a.unguard("evidence")
        a.sql("UPDATE {evidence} SET data = ? WHERE digest = ?", (b"forged evidence", digest))
        a.reguard()
    elif kind == "evidence_delete":
        digest = t.fields(p)["data"]["digest"]
        a.unguard("evidence")
        a.sql("DELETE FROM {evidence} WHERE digest = ?", (digest,))
        a.reguard()
    elif kind == "forged_checkpoint_other_key":
        # The right root, signed by a key that carries the log's name but is not the log key.
        note_body = Checkpoint(ORIGIN, p, root_from_leaf_hashes(t.leaves[:p])).to_body()
        a.upsert("checkpoints", {"size": p, "note": sign_note(note_body, t.keys.log_forger)})
        a.reguard()
        return Expect("checkpoint", p)
    elif kind == "forged_checkpoint_bad_signature":
        # A forked root under the log key's name and key ID, with a signature of another note.
        donor = t.checkpoints[0][1]
        _, signatures = parse_note(donor)
        line = donor.split("\n\n", 1)[1]
        note_body = Checkpoint(ORIGIN, p, _forked_root(t, p)).to_body()
        assert signatures[0].name == ORIGIN
        a.upsert("checkpoints", {"size": p, "note": note_body + "\n" + line})
        a.reguard()
        return Expect("checkpoint", p)
    elif kind == "split_checkpoint":
        # A different root at the same size, genuinely signed by the log key (the owner has it).
        note_body = Checkpoint(ORIGIN, p, _forked_root(t, p)).to_body()
        a.upsert("checkpoints", {"size": p, "note": sign_note(note_body, t.keys.log)})
        a.reguard()
        return Expect("checkpoint", p)
    elif kind == "forged_witness_cosignature":
        # The owner signs a forked checkpoint with the log key and fakes the witness's
        # cosignature: by a key with the witness's name (odd p) or by copying a real one (even).
        note_body = Checkpoint(ORIGIN, p, _forked_root(t, p)).to_body()
        note = sign_note(note_body, t.keys.log)
        if p % 2:
            note = add_signature(note, t.keys.witness_forger, timestamp=1_700_000_000)
        else:
            real = t.witness_notes[0].split("\n\n", 1)[1].splitlines()
            witness_line = next(ln for ln in real if ln.split(" ")[1] == WITNESS_NAME)
            note = note + witness_line + "\n"
        return Expect("witness", p, (note,))
    else:
        raise AssertionError(f"unknown tampering {kind}")
    return ev


EVENT_KINDS = (
    "update_data", "update_actor", "update_kind_in_body", "update_prev", "update_seq",
    "update_noncanonical", "update_garbage", "dropped_trigger", "delete", "delete_resequence",
    "truncate", "truncate_keep_checkpoints", "reorder", "insert_or_replace", "rewrite_tail",
    "rewrite_tail_resigned", "column_kind", "column_attempt",
)
CHECKPOINT_KINDS = (
    "forged_checkpoint_other_key", "forged_checkpoint_bad_signature", "split_checkpoint",
    "forged_witness_cosignature",
)
EVIDENCE_KINDS = ("evidence_update", "evidence_delete")


def cases() -> list[tuple[str, int]]:
    """Every (kind, position) of the suite: about 1,070 per backend."""
    out: list[tuple[str, int]] = []
    for kind in EVENT_KINDS:
        last = N - 1 if kind == "reorder" else N
        out += [(kind, p) for p in range(1, last + 1)]
    for kind in CHECKPOINT_KINDS:
        out += [(kind, p) for p in range(1, N + 1)]
    for kind in EVIDENCE_KINDS:
        out += [(kind, p) for p in EVIDENCE_POSITIONS]
    return out


def apply(kind: str, attacker: Attacker, template: Template, position: int) -> Expect:
    return _tamper(kind, attacker, template, position)


# -- reading the report ------------------------------------------------------------------------
#: A broken chain link at N is reported at N, but it is the link between N-1 and N: editing
#: event N-1's body breaks it just as editing N's ``prev`` does.  With True the suite accepts
#: either event; set False to demand that the verifier name the altered event itself.
LINK_NAMES_PAIR = True

_EVENT = re.compile(r"event (\d+)")
_RANGE = re.compile(r"events (\d+)\.\.(\d+)")


def span(problem: str) -> tuple[int, int] | None:
    """The event positions a problem line (``WHERE: message``) points at, or None when it
    names no event.  A broken chain link at N names the link between N-1 and N."""
    where = problem.split(": ", 1)[0]
    if m := _RANGE.fullmatch(where):
        return int(m[1]), int(m[2])
    if m := _EVENT.fullmatch(where):
        n = int(m[1])
        return (n - 1, n) if LINK_NAMES_PAIR and "chain link broken" in problem else (n, n)
    return None


def first_event_span(report: Report) -> tuple[int, int] | None:
    for problem in report.problems:
        s = span(problem)
        if s is not None:
            return s
    return None


def check_detected(report: Report, expect: Expect, what: str) -> None:
    """The assertion of the suite: detected, and the first divergence located."""
    assert not report.ok, f"{what}: UNDETECTED (verify says ok: {report.to_dict()})"
    assert report.first_divergence, f"{what}: problems but no first divergence named"
    if expect.what == "event":
        s = first_event_span(report)
        assert s is not None, f"{what}: no problem names an event: {report.problems}"
        lo, hi = s
        assert lo <= hi, f"{what}: empty divergence range {s}: {report.problems[0]}"
        assert lo <= expect.at <= hi, (
            f"{what}: first divergence {report.first_divergence!r} (events {lo}..{hi}) does not "
            f"contain the tampered event {expect.at}: {report.problems}")
    elif expect.what == "checkpoint":
        assert any(re.search(rf"\bsize {expect.at}\b|\b\d+\.\.{expect.at}\b", p)
                   for p in report.problems), (
            f"{what}: no problem names the checkpoint at size {expect.at}: {report.problems}")
    else:
        assert any("witness" in p for p in report.problems), (
            f"{what}: no problem names the forged witness note: {report.problems}")

