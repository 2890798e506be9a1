"""What the running service holds: the ledger, the guard, the register, the ports' backing,
and the dispatcher of the harness runs.

Every use of the ledger happens on one dedicated thread (:meth:`Runtime.call`): a SQLite
connection belongs to the thread that opened it, appends are serialised anyway (the chain has
one head), and the request handlers stay free while it works.  Pilot 02 submissions are handed
to the dispatcher (:mod:`.dispatch`): a pool of service threads, each with its own ledger
connection, runs the runner; the class's own work happens on those threads or on Ray workers,
which report back signed through the trusted port.  The harness never runs in a request
handler, only the service writes the ledger, and the attempt's status moves through the
ledger's states.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ..access import (
    AccessGuard,
    Catalogue,
    CheckSchedule,
    MemoryControlSets,
    PolicyPort,
    Principal,
    Role,
    ScheduleBook,
    TrustedPort,
    load_matrix,
)
from ..access.rewards import RewardReader
from ..errors import EvaluatorError
from ..harnesses import runner
from ..harnesses.protocol import RunOptions
from ..harnesses.registry import task_classes
from ..ledger.events import OUTCOME_KINDS, EventKind, NewEvent
from ..ledger.log import DEFAULT_ORIGIN, create_log_key, load_log_signer
from ..ledger.payloads import AttemptEnded, AttemptRequeued
from ..ledger.postgres_store import PostgresStore
from ..ledger.sqlite_store import SqliteStore
from ..ledger.store import CheckpointPolicy, LedgerStore
from ..provenance.register import ProvenanceRegister
from ..rules.loader import load_catalogue
from .auth import Authenticator, sync_trusted_sources
from .config import ServiceConfig, load_principal_key
from .dispatch import Dispatcher, LocalDispatcher, RayConfig, RayDispatcher
from .ledger_worker import LedgerWorker
from .workers import RemoteExecutor, WorkerHandle, WorkerOptions

#: Issue 11: events after the last checkpoint are the unprotected tail; sign one at least this
#: often while events arrive, and on a timer when they stop arriving.
CHECKPOINT_SECONDS = 10.0
#: How often the idle timer looks for events no checkpoint covers yet.
CHECKPOINT_TIMER_SECONDS = CHECKPOINT_SECONDS
log = logging.getLogger("triz_eval.service")
T = TypeVar("T")


def open_store(config: ServiceConfig, base: Path) -> LedgerStore:
    """The configured ledger, signing checkpoints with the log key.  Raises InputError,
    ExternalError or IntegrityError."""
    keys = base / config.keys
    if not (keys / "log.key").exists():
        create_log_key(keys, origin=DEFAULT_ORIGIN)
    signer = load_log_signer(keys)
    policy = CheckpointPolicy(signer, signer.name, 1000, CHECKPOINT_SECONDS, time.time)
    if config.ledger.postgres is not None:
        return PostgresStore.open(config.ledger.postgres, policy=policy,
                                  schema=config.ledger.schema_name)
    assert config.ledger.sqlite is not None
    path = base / config.ledger.sqlite
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteStore.open(path, policy=policy)


@dataclasses.dataclass(frozen=True, slots=True)
class OrphanedRun:
    """An attempt of a class with a harness, submitted with an artefact and without an
    outcome (see Runtime._reconcile)."""

    attempt_id: str
    task_class: str
    artefact_sha256: str | None
    began: bool
    requeued: bool


def orphaned_runs(store: LedgerStore, classes: Collection[str]) -> list[OrphanedRun]:
    """Every attempt of ``classes`` that was submitted with an artefact and has no outcome."""
    markers = (b'"attempt.', b'"what":"candidate"')
    initiated: dict[str, tuple[str, str | None]] = {}
    finished: set[str] = set()
    began: set[str] = set()
    requeued: set[str] = set()
    for _, body in store.scan():
        if not any(m in body for m in markers):
            continue
        fields = json.loads(body)
        kind, attempt = fields["kind"], fields["attempt"]
        data = fields["data"]
        if kind == EventKind.ATTEMPT_INITIATED.value and data.get("task_class") in classes:
            initiated[attempt] = (str(data["task_class"]), data.get("artefact_sha256"))
        elif kind in OUTCOME_KINDS:
            finished.add(attempt)
        elif kind == EventKind.ATTEMPT_REQUEUED.value:
            requeued.add(attempt)
        elif kind == EventKind.EVIDENCE_STORED.value and data.get("what") == "candidate":
            began.add(attempt)
    return [
        OrphanedRun(a, task_class, digest, a in began, a in requeued)
        for a, (task_class, digest) in initiated.items()
        if a not in finished and digest is not None
    ]


class Runtime:
    """The service's state.  Construct with :meth:`start`; :meth:`close` stops it."""

    def __init__(self, config: ServiceConfig, base: Path) -> None:
        self.config = config
        self.base = base
        self._ledger = LedgerWorker()
        self._harness: Dispatcher | None = None
        self._pending: set[Future[Any]] = set()
        self._stopping = threading.Event()
        self._timer = threading.Thread(target=self._checkpoint_loop, name="checkpoint-timer",
                                       daemon=True)
        self._pending_lock = threading.Lock()
        self.matrix = load_matrix()
        self.catalogue = Catalogue(load_catalogue())
        self.control_sets = MemoryControlSets(config.control_sets)
        self.schedule = ScheduleBook(CheckSchedule.create(config.verifiers or ("verifier",)))
        self.store: LedgerStore
        self.guard: AccessGuard
        self.register: ProvenanceRegister
        self.auth: Authenticator

    @classmethod
    def start(cls, config: ServiceConfig, base: Path) -> Runtime:
        runtime = cls(config, base)
        try:
            runtime._harness = runtime._dispatcher()
            runtime._ledger.submit(runtime._open, grouped=False).result()
            requeue = runtime._ledger.submit(runtime._reconcile, grouped=False).result()
        except BaseException:
            if runtime._harness is not None:
                runtime._harness.close()
            runtime._ledger.shutdown()
            raise
        for task_class, attempt_id, artefact in requeue:
            runtime.dispatch(task_class, attempt_id, artefact)
        runtime._timer.start()
        return runtime

    def _dispatcher(self) -> Dispatcher | None:
        """The configured dispatcher; None without workers.  Raises InputError (the key) or
        ExternalError (Ray)."""
        harness = self.config.harness
        if not harness.workers:
            return None
        if harness.backend == "local":
            return LocalDispatcher(harness.workers)
        key = load_principal_key(self.base / harness.principal_key)
        return RayDispatcher(RayConfig(
            harness.ray_address, harness.workers, harness.principal, key.private_seed(),
            WorkerOptions(unsafe_degraded=harness.unsafe_degraded)))

    def _checkpoint_behind(self) -> None:
        """On the ledger thread: sign a checkpoint if events arrived since the last one."""
        size = self.store.size()
        signed = self.store.checkpoints()
        if size and (not signed or signed[-1][0] < size):
            self.store.append([], force_checkpoint=True)

    def _checkpoint_loop(self) -> None:
        while not self._stopping.wait(CHECKPOINT_TIMER_SECONDS):
            try:
                self._ledger.submit(self._checkpoint_behind, grouped=False).result()
            except EvaluatorError as e:
                log.error("timed checkpoint: %s", e.diagnostics())

    def _reconcile(self) -> list[tuple[str, str, bytes]]:
        """Issue 11, spec 10.4: on start, no attempt queued for the harness before a
        crash is left ``initiated`` forever.  Each one whose run never began is queued again
        once (``attempt.requeued``, recorded before it runs); one whose run had begun (the
        harness stored its candidate), was already queued again, or whose artefact is gone
        ends ``errored`` with the reason.  Returns the runs to queue.

        Only this service runs harnesses for its ledger: one service per ledger."""
        if self._harness is None:
            return []  # no worker pool: the attempts wait for an external trusted harness
        orphans = orphaned_runs(self.store, task_classes())
        now = datetime.now(UTC)
        requeue: list[tuple[str, str, bytes]] = []
        ended: list[NewEvent] = []
        queued: list[NewEvent] = []
        for orphan in orphans:
            artefact = None
            if orphan.artefact_sha256 is not None:
                with contextlib.suppress(EvaluatorError, KeyError):
                    artefact = self.store.get_evidence(orphan.artefact_sha256)
            reason = (
                "the service stopped after the harness run began; it is not run twice"
                if orphan.began
                else "the run was lost in a restart once already"
                if orphan.requeued
                else "the submitted artefact is not in the evidence store"
                if artefact is None
                else None
            )
            if reason is not None or artefact is None:
                ended.append(NewEvent.make(
                    EventKind.ATTEMPT_ERRORED,
                    AttemptEnded(reason=reason, stage="service restart"),
                    actor="evaluator-service", at=now, attempt=orphan.attempt_id))
                continue
            queued.append(NewEvent.make(
                EventKind.ATTEMPT_REQUEUED,
                AttemptRequeued(
                    reason="the service restarted before the queued harness run began",
                    artefact_sha256=orphan.artefact_sha256),
                actor="evaluator-service", at=now, attempt=orphan.attempt_id))
            requeue.append((orphan.task_class, orphan.attempt_id, artefact))
        if ended or queued:
            self.store.append([*ended, *queued])
            log.warning("restart: %d harness run(s) queued again, %d ended errored",
                        len(queued), len(ended))
        return requeue

    def _open(self) -> None:
        self.store = open_store(self.config, self.base)
        self._ledger.store = self.store
        self.guard = AccessGuard(self.matrix, self.store)
        self.register = ProvenanceRegister(self.store, actor="evaluator-service")
        self._register_trusted()
        self.auth = Authenticator(self.config, self.register)

    def _register_trusted(self) -> None:
        """Spec 9.15: each trusted principal is a source with its Ed25519 key; a changed key
        is an amendment (a new revision), never an overwrite; a revoked one is quarantined."""
        sync_trusted_sources(self.register, self.config.trusted, now=datetime.now(UTC))

    # -- running on the ledger thread -------------------------------------------------------
    def call_sync(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the ledger thread and wait; its writes are durable on return."""
        result: T = self._ledger.submit(fn).result()
        return result

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the ledger thread (group commit) without blocking the event loop."""
        result: T = await asyncio.wrap_future(self._ledger.submit(fn))
        return result

    def policy_port(self, principal: Principal) -> PolicyPort:
        return PolicyPort(self.guard, principal, catalogue=self.catalogue)

    def trusted_port(self, principal: Principal) -> TrustedPort:
        return TrustedPort(self.guard, principal, register=self.register,
                           catalogue=self.catalogue, control_sets=self.control_sets,
                           schedule=self.schedule)

    def rewards(self, principal: Principal) -> RewardReader:
        return RewardReader(self.guard, principal)

    # -- the harnesses' worker pool ----------------------------------------------------------
    def dispatch(self, task_class: str, attempt_id: str, artefact: bytes) -> bool:
        """Queue a harness run for an attempt of ``task_class``; False when the pool is off or
        no harness is registered for the class (the attempt then waits for a trusted harness
        outside the service)."""
        if self._harness is None or task_class not in task_classes():
            return False
        future = self._harness.submit(
            lambda worker: self.run_harness(task_class, attempt_id, artefact, worker))
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return True

    def _forget(self, future: Future[Any]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def pending_runs(self) -> int:
        with self._pending_lock:
            return len(self._pending)

    def verify_report(self, request: dict[str, Any]) -> dict[str, Any]:
        """A harness worker's signed report request, through the trusted port as the harness
        principal (on the ledger thread).  Raises AccessDenied or InputError when refused."""
        principal = Principal(self.config.harness.principal, Role.HARNESS)
        return self.call_sync(
            lambda: self.trusted_port(principal).request("evidence", "append", request))

    def run_harness(self, task_class: str, attempt_id: str, artefact: bytes,
                    worker: WorkerHandle | None) -> None:
        """Run the harness for an attempt the policy port opened: the class's work here
        (``worker`` None) or on ``worker``, whose report the trusted port checks first."""
        out = self.base / self.config.harness.out
        work = out / ".candidates"
        work.mkdir(parents=True, exist_ok=True)
        candidate = work / f"{attempt_id}.artefact"
        candidate.write_bytes(artefact)
        try:
            store = open_store(self.config, self.base)
        except EvaluatorError as e:
            log.error("harness for %s: cannot open the ledger: %s", attempt_id, e.diagnostics())
            return
        executor = (None if worker is None
                    else RemoteExecutor(worker, task_class, attempt_id, self.verify_report))
        try:
            runner.run_class(task_class, candidate, store, out, RunOptions(
                attempt_id=attempt_id, unsafe_degraded=self.config.harness.unsafe_degraded,
                signer=load_log_signer(self.base / self.config.keys)), executor)
        except EvaluatorError as e:
            log.error("harness for %s: %s", attempt_id, e.diagnostics())
            self._end_unresolved(store, attempt_id, e.diagnostics())
        except Exception as e:  # a worker must never leave the attempt without an outcome
            log.exception("harness for %s crashed", attempt_id)
            self._end_unresolved(store, attempt_id, f"the harness crashed: {type(e).__name__}")
        finally:
            if executor is not None:
                executor.close()
            store.close()
            with contextlib.suppress(OSError):
                candidate.unlink()

    @staticmethod
    def _end_unresolved(store: LedgerStore, attempt_id: str, reason: str) -> None:
        """Fail closed: an attempt whose run broke ends ``errored``, never silently open."""
        with contextlib.suppress(EvaluatorError):
            if not any(e.fields["kind"] in OUTCOME_KINDS
                       for e in store.attempt_events(attempt_id)):
                store.append([NewEvent.make(
                    EventKind.ATTEMPT_ERRORED, AttemptEnded(reason=reason, stage="service"),
                    actor="evaluator-service", at=datetime.now(UTC), attempt=attempt_id)])

    def close(self) -> None:
        self._stopping.set()
        if self._timer.is_alive():
            self._timer.join(timeout=30)
        if self._harness is not None:
            self._harness.close()
        with contextlib.suppress(Exception):
            self._ledger.submit(self.store.close, grouped=False).result()
        self._ledger.shutdown()

