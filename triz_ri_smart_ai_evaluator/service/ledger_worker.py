"""The one thread that uses the service's ledger, with group commit.

Requests queue their ledger work here.  The thread takes whatever is waiting (up to
``MAX_GROUP`` jobs) and runs it inside one ``store.group()`` transaction when the store offers
one (SQLite): one fsync for the whole group instead of one per append or evidence write.  A
job's answer is released only after the group's COMMIT, so nothing is acknowledged that is not
durable; if the COMMIT fails, every job of the group gets that failure.  A job that raises is
answered with its exception; its appends are undone by their savepoints, and the rest of the
group commits.  Under light load a group is a single job, so latency does not grow.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

MAX_GROUP = 64

Job = tuple[Callable[[], Any], "Future[Any]", bool]


class LedgerWorker:
    """A single thread running submitted callables in order, grouping their commits."""

    def __init__(self, name: str = "ledger") -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.store: Any = None  # set once the store is open (on this thread)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any], *, grouped: bool = True) -> Future[Any]:
        """Queue ``fn``; ``grouped=False`` runs it alone, outside any group (open, close)."""
        future: Future[Any] = Future()
        self._jobs.put((fn, future, grouped))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=60)

    def _take(self) -> tuple[list[Job], bool]:
        """The next group of jobs, and whether the worker must stop after it."""
        first = self._jobs.get()
        if first is None:
            return [], True
        jobs = [first]
        if not first[2]:
            return jobs, False
        while len(jobs) < MAX_GROUP:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            if not job[2]:
                self._jobs.put(job)  # an ungrouped job runs alone, after this group
                break
            jobs.append(job)
        return jobs, False

    def _group(self, grouped: bool) -> contextlib.AbstractContextManager[None]:
        group = getattr(self.store, "group", None) if grouped else None
        return group() if group is not None else contextlib.nullcontext()

    def _loop(self) -> None:
        while True:
            jobs, stop = self._take()
            if jobs:
                self._run(jobs)
            if stop:
                return

    def _run(self, jobs: list[Job]) -> None:
        outcomes: list[tuple[Future[Any], bool, Any]] = []
        try:
            with self._group(jobs[0][2]):
                for fn, future, _ in jobs:
                    if not future.set_running_or_notify_cancel():
                        continue
                    try:
                        outcomes.append((future, True, fn()))
                    except BaseException as e:  # the job's own failure is its answer
                        outcomes.append((future, False, e))
        except BaseException as e:  # the group did not commit: nothing of it is durable
            for future, _, _ in outcomes:
                future.set_exception(e)
            return
        for future, ok, value in outcomes:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

