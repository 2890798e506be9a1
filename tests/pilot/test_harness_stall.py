"""An honest candidate on a stalled host is not judged on the stall (spec 6.5, 6.6, 11.11;
docs/adr/0016-no-answer-is-not-a-decision.md), end to end: real sandbox, real gunicorn, real
aiosmtpd receiver, real SQLite ledger.

The stall is made for real: in the middle of the scenarios every process of the candidate's
sandbox is stopped (SIGSTOP) for longer than the driver's request clock, then continued - what
an overloaded machine does to a run, only certain to happen.  The request in flight runs out of
the harness's clock and no other request is answered meanwhile.  Before this rule the honest
reference took S = 0 for a "false rejection" or a "difference" it never made (seen under CI load);
now the attempt ends errored with the scenario named, so a trainer reads no reward (null), and the
ledger still verifies.  ``tests/pilot/test_unanswered.py`` holds the rule's cases on recorded
evidence, the selective silence of a cheater among them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pilot.test_harness import EXAMPLES, Ledger, _leftovers, _new_leftovers
from triz_ri_smart_ai_evaluator._clock import now_utc
from triz_ri_smart_ai_evaluator.access.rewards import reward_of
from triz_ri_smart_ai_evaluator.evaluation import loop
from triz_ri_smart_ai_evaluator.ledger.sqlite_store import SqliteStore
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form import sandboxed
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.candidate import starting_repo
from triz_ri_smart_ai_evaluator.sandbox import probe_isolation
from triz_ri_smart_ai_evaluator.sandbox._box import Sandbox

#: Which POST of the run finds the candidate stopped.
STALLED_POST = 6


class _Stall:
    """Stops the candidate's sandbox (not the baseline's) just before the STALLED_POST-th
    POST is sent, and continues it after the driver's clock has run out."""

    def __init__(self) -> None:
        self.app: Any = None
        self.posts = 0
        self.stopped: set[int] = set()
        self.lock = threading.Lock()
        self.resumed = threading.Event()

    def before_post(self) -> None:
        with self.lock:
            self.posts += 1
            if self.posts != STALLED_POST or self.app is None:
                return
            self.stopped = set(self.app.sandbox_pids())
            for pid in self.stopped:
                os.kill(pid, signal.SIGSTOP)
        threading.Timer(sandboxed.REQUEST_TIMEOUT + 1.5, self.resume).start()

    def resume(self) -> None:
        for pid in self.stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.resumed.set()


@pytest.fixture
def stall(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Stall]:
    assert probe_isolation().available
    stall = _Stall()
    start_gunicorn = Sandbox.start_gunicorn

    def start(self: Sandbox, code_dir: Path, *args: Any, **kwargs: Any) -> Any:
        process = start_gunicorn(self, code_dir, *args, **kwargs)
        if Path(code_dir) != starting_repo():  # the candidate's tree, not the baseline
            stall.app = process
        return process

    class Driver(sandboxed.Driver):
        def submit(self, *args: Any, **kwargs: Any) -> Any:
            stall.before_post()
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(Sandbox, "start_gunicorn", start)
    monkeypatch.setattr(sandboxed, "Driver", Driver)
    yield stall
    stall.resume()  # never leave a stopped process behind, whatever the test did


def test_an_honest_candidate_on_a_stalled_host_is_not_scored(tmp_path: Path,
                                                             stall: _Stall) -> None:
    ledger = Ledger(tmp_path)
    before = _leftovers()
    result = ledger.run(EXAMPLES["reference"].diff)
    assert stall.stopped, "the stall never happened: the test proves nothing"
    assert stall.resumed.wait(30)
    # No award at all: neither the 0 of a false rejection nor a pass on evidence it lacks.
    assert result.status == "errored", (result.summary, result.findings)
    assert result.signal is None
    error = str(result.summary["error"])
    assert "no decision can be read" in error
    assert "ran out of the harness's" in error
    kinds = ledger.kinds(result.attempt_id)
    assert kinds[-1] == "attempt.errored"
    assert "award.recorded" not in kinds
    report = ledger.verify()
    assert report.ok, report
    # What a trainer reads: null with the infrastructure reason, never a silent zero.
    store = SqliteStore.open(ledger.db, read_only=True)
    try:
        answer = reward_of(result.attempt_id, store.attempt_events(result.attempt_id),
                           loop.class_state(store, "pilot_02_feedback_form"), now_utc())
    finally:
        store.close()
    assert answer.reward is None
    assert answer.reason == "infrastructure_failure"
    assert _new_leftovers(before) == {"netns": [], "links": [], "bwrap": []}


def test_repository_tests_cut_off_by_the_harness_clock_are_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository's tests run in the sandbox under a wall clock; a process that runs out
    of it has no verdict the harness can read, and ``_repository_tests`` says so (the harness
    then ends the run errored unless a violation was verified, docs/adr/0016).  Real sandbox,
    real processes: one sleeps past a 1 s clock, the other ends on its own."""
    from triz_ri_smart_ai_evaluator.sandbox import open_sandbox

    monkeypatch.setattr(sandboxed, "TESTS_WAIT", 10)
    code = tmp_path / "code"
    code.mkdir()
    with open_sandbox() as box:
        slow = box.start([box.python, "-c", "import time; time.sleep(30)"], code_dir=code,
                         wall_timeout=1)
        quick = box.start([box.python, "-c", "print('tests/test_pages.py::test_home PASSED')"],
                          code_dir=code, wall_timeout=20)
        done, public, _, clock = sandboxed._repository_tests([slow, quick])
    assert clock == ["the self-checks ran out of the harness's 60 s clock"]
    assert public["tests/test_pages.py::test_home"] == "PASSED"
    assert not any(done.values())
