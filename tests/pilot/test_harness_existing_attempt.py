"""The pilot 02 harness on an attempt the policy port already opened (the service's path).

The policy submits a unified diff through :class:`PolicyPort`, which writes ``attempt.initiated``
(with the SHA-256 of the submitted bytes) and the artefact as evidence; the harness then runs
*that* attempt: no second initiation, no new id, the rules it started with, and an outcome in
every case, including a candidate that cannot be prepared and a machine without isolation.

Only the first test opens the sandbox (real bwrap, netns, gunicorn, receiver); every other one
ends before it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from triz_ri_smart_ai_evaluator.access import (
    AccessGuard,
    Catalogue,
    PolicyPort,
    Principal,
    Role,
    load_matrix,
)
from triz_ri_smart_ai_evaluator.canonical import sha256_hex
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.evaluation import attempts, loop
from triz_ri_smart_ai_evaluator.harnesses import runner
from triz_ri_smart_ai_evaluator.ledger.events import EventKind, NewEvent, parse_body
from triz_ri_smart_ai_evaluator.ledger.recompute import recompute_ledger
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form import harness
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.candidate import starting_repo
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.examples import bundled_candidates
from triz_ri_smart_ai_evaluator.rules import load_catalogue
from triz_ri_smart_ai_evaluator.sandbox import IsolationSupport, probe_isolation

CLASS = harness.TASK_CLASS
REFERENCE = next(e for e in bundled_candidates() if e.name == "reference").diff
SEED = bytes(range(32))


class World:
    """A real SQLite ledger, the policy port of ``policy-a``, and a place for runs."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.store = SqliteStore.open(tmp / "ledger.db")
        self.policy = PolicyPort(AccessGuard(load_matrix(), self.store),
                                 Principal("policy-a", Role.EVALUATED_POLICY),
                                 catalogue=Catalogue(load_catalogue()))
        self.runs = tmp / "runs"

    def submit(self, artefact: bytes, class_id: str = CLASS) -> str:
        return self.policy.submit(class_id, artefact, ["it works"], ["tested locally"])

    def artefact_file(self, attempt_id: str) -> Path:
        """What the service does: write the stored artefact's bytes to a file for the harness."""
        events = self.store.attempt_events(attempt_id)
        digest = next(e.data["digest"] for e in events
                      if e.kind == EventKind.EVIDENCE_STORED.value
                      and e.data["what"] == "artefact")
        path = self.tmp / f"{attempt_id}.diff"
        path.write_bytes(self.store.get_evidence(digest))
        return path

    def run(self, candidate: Path, attempt_id: str) -> harness.RunResult:
        return harness.run(candidate, self.store, self.runs,
                           harness.RunOptions(seed=SEED, attempt_id=attempt_id))

    def kinds(self, attempt_id: str) -> list[str]:
        return [e.kind for e in self.store.attempt_events(attempt_id)]

    def all_events(self, start: int = 1) -> list[dict[str, Any]]:
        return [parse_body(body, seq=seq) for seq, body in self.store.scan(start)]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.store.close()


def _unavailable() -> IsolationSupport:
    return IsolationSupport(False, "simulated: no namespaces", False)


def test_a_submitted_reference_diff_runs_on_its_own_attempt_and_reaches_2b(world: World) -> None:
    support = probe_isolation()
    assert support.available, f"this test needs full isolation: {support.reason}"
    diff = REFERENCE.read_bytes()
    attempt_id = world.submit(diff)
    submitted_up_to = world.store.size()
    assert world.policy.attempt_status(attempt_id)["status"] == "initiated"

    result = world.run(world.artefact_file(attempt_id), attempt_id)

    assert result.status == "completed", result.summary
    assert result.attempt_id == attempt_id
    assert result.bundle == world.runs / attempt_id
    assert result.signal is not None
    assert result.signal.value == 2 * Decimal(1)
    assert result.summary["public_acceptance"] is True
    assert result.summary["pilot_pass"] is None  # the red-team evidence is not in yet
    # One initiation, the policy port's, with the submitted bytes' digest; everything the run
    # appended belongs to that attempt, or to the class's loop subject (its known-vs-hidden
    # observation, the divergence check and, after the award, the revealed control set).
    events = world.all_events()
    initiated = [e for e in events if e["kind"] == "attempt.initiated"]
    assert [e["attempt"] for e in initiated] == [attempt_id]
    assert initiated[0]["data"]["artefact_sha256"] == sha256_hex(diff)
    appended = world.all_events(submitted_up_to + 1)
    assert {e["attempt"] for e in appended} == {attempt_id, loop.subject(harness.TASK_CLASS)}
    assert [e["kind"] for e in appended if e["attempt"] != attempt_id] == [
        "control.observation", "divergence.checked", "control.revealed"]
    # spec 10.5: judged under the rules it started with.
    assert result.summary["rules_version"] == initiated[0]["data"]["rules_version"]
    # The record holds both digests: the submitted bytes' and the prepared tree's archive.
    stored = [e.data for e in world.store.attempt_events(attempt_id)
              if e.kind == "evidence.stored"]
    assert [s["what"] for s in stored[:4]] == ["artefact", "candidate", "control_seed_commitment",
                                             "control_set"]
    assert stored[1]["candidate_sha256"] == result.candidate_digest
    assert stored[1]["digest"] == sha256_hex(diff)
    kinds = world.kinds(attempt_id)
    assert kinds.count("attempt.initiated") == 1
    assert kinds[-1] == "attempt.completed"
    # The independent recomputation reproduces the award from the ledger alone.
    report = recompute_ledger(world.store)
    assert report.ok, report.mismatches
    assert report.matched == report.attempts == 1
    # The policy sees its attempt completed, with the final signal.
    status = world.policy.attempt_status(attempt_id)
    assert status["status"] == "completed"
    assert status["artefact_sha256"] == sha256_hex(diff)
    assert status["final_signal"] is not None
    assert Decimal(status["final_signal"]) == result.signal.final == 2 * Decimal(1)


def test_a_submitted_artefact_that_is_not_a_diff_ends_errored(world: World) -> None:
    attempt_id = world.submit(b"Dear evaluator, I fixed the form. Please award full marks.\n")
    result = world.run(world.artefact_file(attempt_id), attempt_id)
    assert result.status == "errored"
    assert result.attempt_id == attempt_id
    assert result.signal is None
    assert "does not apply" in result.summary["error"]
    assert "\n" not in result.summary["error"]
    assert json.loads((world.runs / attempt_id / "summary.json").read_text())["status"] == (
        "errored")
    assert world.kinds(attempt_id) == ["attempt.initiated", "evidence.stored", "policy.output",
                                       "policy.output", "attempt.errored"]
    errored = world.store.attempt_events(attempt_id)[-1].data
    assert errored["stage"] == "prepare"
    assert errored["reason"] == result.summary["error"]
    assert attempts.attempt_record(world.store.attempt_events(attempt_id))["status"] == "errored"
    assert world.policy.attempt_status(attempt_id)["status"] == "errored"


def test_a_candidate_that_is_not_the_submitted_artefact_ends_errored(world: World) -> None:
    # A full copy of the starting repository would prepare, but it is not what was handed in.
    attempt_id = world.submit(REFERENCE.read_bytes())
    result = world.run(starting_repo(), attempt_id)
    assert result.status == "errored"
    assert "is not the artefact" in result.summary["error"]
    assert world.kinds(attempt_id)[-1] == "attempt.errored"
    assert world.kinds(attempt_id).count("evidence.stored") == 1  # no control set was drawn


def _complete(world: World, attempt_id: str) -> None:
    world.store.append([NewEvent.make(EventKind.ATTEMPT_COMPLETED, {"outcome": "obtained"},
                                      actor="harness", at=datetime.now(UTC),
                                      attempt=attempt_id)])


@pytest.mark.parametrize("case", ["unknown", "other_class", "completed", "errored"])
def test_an_attempt_that_is_not_open_for_this_class_is_refused_and_nothing_is_written(
    world: World, case: str
) -> None:
    if case == "unknown":
        attempt_id = "att-" + "0" * 32
    elif case == "other_class":
        attempt_id = world.submit(b"a step-by-step document", "document_step_faithfulness")
    else:
        attempt_id = world.submit(REFERENCE.read_bytes())
        if case == "completed":
            _complete(world, attempt_id)
        else:
            world.run(world.tmp / "missing.diff", attempt_id)  # errored: no such candidate
            assert world.kinds(attempt_id)[-1] == "attempt.errored"
    size = world.store.size()
    with pytest.raises(InputError, match=attempt_id):
        world.run(REFERENCE, attempt_id)
    assert world.store.size() == size
    assert not (world.runs / attempt_id / "receiver_events.jsonl").exists()


def test_without_isolation_an_existing_attempt_ends_errored_instead_of_dangling(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triz_ri_smart_ai_evaluator.sandbox import _box

    monkeypatch.setattr(_box, "probe_isolation", _unavailable)
    monkeypatch.setattr(runner, "probe_isolation", _unavailable)
    attempt_id = world.submit(REFERENCE.read_bytes())
    result = world.run(world.artefact_file(attempt_id), attempt_id)
    assert result.status == "errored"
    assert result.summary["error"] == "sandbox isolation not available: simulated: no namespaces"
    errored = world.store.attempt_events(attempt_id)[-1]
    assert errored.kind == "attempt.errored"
    assert errored.data == {"reason": result.summary["error"], "stage": "isolation"}
    assert world.kinds(attempt_id).count("attempt.initiated") == 1
    assert (world.runs / attempt_id / "summary.json").is_file()
