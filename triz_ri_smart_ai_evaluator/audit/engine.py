"""The campaign engine (spec 9.12-9.13; pilot 11-12; issue 15 item 4).  Generic over classes.

1. The honest reference runs first, as a normal attempt: its signal is the level no adversary
   may reach (spec 11.23).  If it is not positive the campaign cannot judge anything and stops.
2. The adversaries run through the generic runner into the same ledger, each a normal attempt,
   ``workers`` at a time (threads: the sandbox claims its addresses and uids under locks, and
   each worker thread opens its own connection to the ledger).  A candidate of a category whose
   share of the budget is spent is skipped; the campaign stops once the budget is spent.
3. Each attempt is judged (:mod:`.classify`).  The campaign stops at once on an exploit or an
   unquarantined stopping condition (pilot 12), and when the wall-clock limit is reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from ..errors import EvaluatorError, InputError
from ..harnesses import runner
from ..harnesses.protocol import Harness, RunOptions, RunResult
from ..ledger.checkpoint import NoteSigner
from ..ledger.store import LedgerStore
from . import adversaries as sources
from .adversaries import Adversary
from .budget import CATEGORIES, Budget
from .classify import STOPPING, Judged, Ran, judge

Say = Callable[[str], None]


def _silent(_line: str) -> None:
    """No progress output."""


def gather(task_class: str, budget: Budget, *, seed: bytes, user: Path | None,
           mutants_dir: Path) -> list[Adversary]:
    """The campaign's adversaries in the order they run: the user's first, then the bundled,
    then as many generated mutants per category as the budget still asks for."""
    chosen = (sources.user_supplied(user) if user is not None else []) + sources.bundled(
        task_class)
    have = {c: sum(1 for a in chosen if a.category == c) for c in CATEGORIES}
    wanted: dict[str, int] = {c: max(0, budget.attempts.as_dict()[c] - have[c])
                              for c in CATEGORIES}
    chosen += sources.generated(task_class, seed, wanted, mutants_dir)
    names = [a.name for a in chosen]
    if len(set(names)) != len(names):
        raise InputError("two adversaries share a name: "
                         f"{sorted({n for n in names if names.count(n) > 1})}")
    return chosen


@dataclass(frozen=True, slots=True)
class Campaign:
    """What a campaign runs, and how."""

    harness: Harness
    budget: Budget
    rules_version: str
    reference: Path
    adversaries: list[Adversary]
    bundle_root: Path
    signer: NoteSigner
    workers: int = 1
    #: Opens another connection to the same ledger, one per worker thread (workers > 1).
    open_store: Callable[[], LedgerStore] | None = None
    say: Say = _silent


@dataclass(slots=True)
class Result:
    """What a campaign did: the honest baseline, every judged adversary in the order they
    ended, what was skipped, and why it stopped."""

    baseline: Ran
    judged: list[Judged] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stopped: str = ""
    budget_met: bool = False
    wall_clock_hit: bool = False
    seconds: float = 0.0

    def spent(self) -> dict[str, int]:
        """Scenarios run and attempts made per category, counting only what was measured."""
        counted = [j for j in self.judged if j.counts]
        out = {"scenarios": sum(j.ran.scenarios for j in counted)}
        out.update({c: sum(1 for j in counted if j.adversary.category == c)
                    for c in CATEGORIES})
        return out

    def of(self, *verdicts: str) -> list[Judged]:
        return [j for j in self.judged if j.verdict in verdicts]


def _ran(result: RunResult) -> Ran:
    if result.status != "completed" or result.signal is None:
        return Ran("errored", result.attempt_id, error=str(result.summary.get("error")))
    s = result.summary
    return Ran("completed", result.attempt_id, result.signal.value,
               bool(result.signal.critical_violation), tuple(s.get("quarantine") or ()),
               int(s.get("scenarios") or 0), s.get("rules_version"))


class _Stores:
    """Where an attempt is written: the campaign's own connection when it runs attempts one at
    a time, else the worker thread's own connection (a SQLite connection belongs to the thread
    that opened it).  Every worker opens its connection before any attempt runs and closes it
    after the last one: opening a writable SQLite ledger sets the process-wide umask for a
    moment (issue 11), and a sandbox staging its files in another thread meanwhile gets files
    its uid cannot read (seen: bwrap "Permission denied" on the stage's etc/group)."""

    def __init__(self, main: LedgerStore, opener: Callable[[], LedgerStore] | None) -> None:
        self._main, self._opener = main, opener
        self._local = threading.local()

    def open_here(self) -> None:
        """Open this worker thread's connection (the pool's initializer)."""
        assert self._opener is not None
        self._local.store = self._opener()

    def close_here(self) -> None:
        store: LedgerStore | None = getattr(self._local, "store", None)
        if store is not None:
            store.close()
            self._local.store = None

    def get(self) -> LedgerStore:
        if self._opener is None:
            return self._main
        store: LedgerStore = self._local.store
        return store


def _run_one(campaign: Campaign, stores: _Stores, candidate: Path) -> Ran:
    options = RunOptions(signer=campaign.signer)
    try:
        result = runner.run(campaign.harness, candidate, stores.get(), campaign.bundle_root,
                            options)
    except InputError as e:
        return Ran("refused", error=e.diagnostics())
    except EvaluatorError as e:  # isolation missing, an integrity failure: nothing measured
        return Ran("errored", error=e.diagnostics())
    return _ran(result)


class _Budget:
    """What is left of the budget while the campaign runs (in-flight attempts reserve)."""

    def __init__(self, budget: Budget) -> None:
        self.quota = budget.attempts.as_dict()
        self.used = dict.fromkeys(self.quota, 0)

    def wanted(self, adversary: Adversary) -> bool:
        if self.used[adversary.category] < self.quota[adversary.category]:
            return True
        # Every category is spent but the scenarios are not: any adversary adds scenarios.
        return self.categories_spent() and self.used["scenarios"] < self.quota["scenarios"]

    def categories_spent(self) -> bool:
        return all(self.used[c] >= self.quota[c] for c in CATEGORIES)

    def spent(self) -> bool:
        return self.categories_spent() and self.used["scenarios"] >= self.quota["scenarios"]


@contextmanager
def _pool(workers: int, stores: _Stores) -> Iterator[ThreadPoolExecutor]:
    """``workers`` threads, each with its ledger connection open before the first attempt and
    closed after the last (see :class:`_Stores`)."""
    if workers == 1:  # attempts run in the calling thread on the campaign's connection
        with ThreadPoolExecutor(max_workers=1) as idle:
            yield idle
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit",
                              initializer=stores.open_here)
    try:
        _on_every_thread(pool, workers, lambda: None)  # starts every thread, opening its store
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    try:
        yield pool
    finally:
        _on_every_thread(pool, workers, stores.close_here)
        pool.shutdown(wait=True)


def _on_every_thread(pool: ThreadPoolExecutor, workers: int, task: Callable[[], None]) -> None:
    """Run ``task`` once on each of the pool's threads: each call waits at a barrier until all
    ``workers`` calls are running, so no thread takes two."""
    barrier = threading.Barrier(workers)

    def once() -> None:
        barrier.wait(timeout=120)
        task()

    for future in [pool.submit(once) for _ in range(workers)]:
        future.result()


def run_campaign(campaign: Campaign, store: LedgerStore,
                 clock: Callable[[], float] = time.monotonic) -> Result:
    """Run the campaign into ``store``.  Raises InputError for bad settings (nothing run)."""
    if campaign.workers < 1:
        raise InputError("--workers must be at least 1")
    if campaign.workers > 1 and campaign.open_store is None:
        raise InputError("more than one worker needs a way to open the ledger per worker")
    started = clock()
    say = campaign.say
    stores = _Stores(store, campaign.open_store if campaign.workers > 1 else None)
    say(f"honest reference: {campaign.reference}")
    baseline = _run_one(campaign, _Stores(store, None), campaign.reference)
    result = Result(baseline)
    if baseline.status != "completed" or baseline.signal is None or baseline.signal <= 0:
        result.stopped = (f"the honest reference did not earn a positive signal "
                          f"({baseline.status}, S = {baseline.signal}, "
                          f"{baseline.error or 'no error'}): nothing can be judged")
    elif baseline.rules_version != campaign.rules_version:
        result.stopped = (f"the honest reference was judged under rules "
                          f"{baseline.rules_version}, not {campaign.rules_version}")
    else:
        say(f"honest reference {baseline.attempt_id}: S = {baseline.signal}")
        _adversaries(campaign, stores, result, baseline.signal, started, clock)
    result.seconds = round(clock() - started, 3)
    return result


def _submit(pool: ThreadPoolExecutor, campaign: Campaign, stores: _Stores,
            adversary: Adversary) -> Future[Ran]:
    """One worker: run in the calling thread, on the campaign's own connection; more: in the
    pool, each attempt on a connection of its own."""
    if campaign.workers > 1:
        return pool.submit(_run_one, campaign, stores, adversary.candidate)
    done: Future[Ran] = Future()
    done.set_result(_run_one(campaign, stores, adversary.candidate))
    return done


def _adversaries(campaign: Campaign, stores: _Stores, result: Result, honest: Decimal,
                 started: float, clock: Callable[[], float]) -> None:
    left = _Budget(campaign.budget)
    plan = list(campaign.adversaries)
    total = len(plan)
    running: dict[Future[Ran], Adversary] = {}
    stop: str | None = None
    with _pool(campaign.workers, stores) as pool:
        while True:
            while stop is None and len(running) < campaign.workers:
                if clock() - started >= campaign.budget.wall_clock_seconds:
                    result.wall_clock_hit = True
                    stop = (f"the wall-clock limit of {campaign.budget.wall_clock_seconds} s "
                            "was reached: the campaign is incomplete")
                    break
                # The next adversary the budget still wants; the others wait, since a running
                # attempt may yet be inconclusive and free its slot, and are skipped at the end.
                pick = next((i for i, a in enumerate(plan) if left.wanted(a)), None)
                if pick is None:
                    break
                adversary = plan.pop(pick)
                left.used[adversary.category] += 1  # reserved while it runs
                running[_submit(pool, campaign, stores, adversary)] = adversary
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                adversary = running.pop(future)
                judged = judge(adversary, future.result(), honest=honest,
                               rules_version=campaign.rules_version)
                result.judged.append(judged)
                if judged.counts:
                    left.used["scenarios"] += judged.ran.scenarios
                else:
                    left.used[adversary.category] -= 1  # nothing measured: the slot is free
                campaign.say(f"[{len(result.judged)}/{total}] {adversary.name} "
                             f"({adversary.category}): {judged.verdict}, {judged.why}")
                if judged.verdict in STOPPING and stop is None:
                    stop = (f"{judged.verdict} confirmed: {adversary.name} ({judged.why}); "
                            "stopped at once")
            if stop is None and not running and left.spent():
                stop = "the budget is spent"  # nothing in flight: every count is measured
    result.skipped += [a.name for a in plan]
    result.budget_met = left.spent()
    result.stopped = stop or ("the budget is spent" if result.budget_met else
                              "the adversaries ran out before the budget was spent")


def counts(result: Result) -> Mapping[str, int]:
    """Verdict counts, for a one-line summary."""
    return {v: len(result.of(v)) for v in ("caught", "exploit", "unquarantined",
                                           "inconclusive")}
