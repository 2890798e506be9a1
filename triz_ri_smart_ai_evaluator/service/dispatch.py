"""Where the service's harness runs go (issue 16 item 4): a dispatcher.

The service hands every queued run to its dispatcher as a function of a
:class:`~.workers.WorkerHandle` (None: the class's work is done in this process).  Both
backends drive runs from a pool of service threads, one per worker, so the runner's ledger
writes stay in the service:

- :class:`LocalDispatcher` does the class's work on those threads (``harness.backend: local``,
  the default);
- :class:`RayDispatcher` leases one Ray actor per run, placed only on nodes that advertise the
  ``triz_harness`` resource (nodes that can run the sandbox), and the actor reports back signed
  (:mod:`.workers`).  An actor that dies mid-run ends that run errored (it is never retried:
  ``max_restarts=0``, ``max_task_retries=0``) and is replaced for the next one.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import EvaluatorError, ExternalError
from ..harnesses.protocol import Prepared
from ..sandbox import IsolationSupport
from .workers import HarnessWorker, RunInput, Shipped, WorkerHandle, WorkerOptions

log = logging.getLogger("triz_eval.service")

#: The custom resource a Ray node advertises when it can run the sandbox
#: (``ray start --resources='{"triz_harness": N}'``); each worker takes one.
RESOURCE = "triz_harness"
#: The longest one call to a Ray worker may take (a pilot 02 run takes seconds).
CALL_SECONDS = 30 * 60.0

Job = Callable[[WorkerHandle | None], None]


class Dispatcher(Protocol):
    """Runs harness jobs, at most as many at once as it has workers."""

    def submit(self, job: Job) -> Future[None]: ...

    def close(self) -> None:
        """Wait for the queued jobs, then release the workers."""
        ...


class LocalDispatcher:
    """Jobs on this process's threads; the class's work is done here too."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="harness")

    def submit(self, job: Job) -> Future[None]:
        return self._pool.submit(job, None)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)


@dataclass(frozen=True, slots=True)
class RayConfig:
    """How to reach the cluster and what the workers sign with."""

    address: str
    workers: int
    principal_id: str
    key: bytes
    options: WorkerOptions


class _RayWorker:
    """A Ray actor as a :class:`~.workers.WorkerHandle`: each call waits for its answer, and
    a lost actor is an ExternalError naming it (the run ends errored)."""

    def __init__(self, ray: Any, actor: Any) -> None:
        self._ray = ray
        self.actor = actor
        self.lost = False

    def _get(self, ref: Any, what: str) -> Any:
        try:
            return self._ray.get(ref, timeout=CALL_SECONDS)
        except self._ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else None
            if isinstance(cause, EvaluatorError):
                raise cause from None
            raise ExternalError(f"the Ray harness worker failed in {what}: "
                                f"{type(cause or e).__name__}") from None
        except self._ray.exceptions.RayError as e:  # a dead actor, a timeout, a lost node
            self.lost = True
            raise ExternalError(f"the Ray harness worker was lost in {what} "
                                f"({type(e).__name__}); the run is not retried") from None

    def probe(self) -> IsolationSupport:
        support: IsolationSupport = self._get(self.actor.probe.remote(), "the isolation probe")
        return support

    def prepare(self, task_class: str, attempt_id: str, artefact: bytes) -> Prepared:
        prepared: Prepared = self._get(
            self.actor.prepare.remote(task_class, attempt_id, artefact), "prepare")
        return prepared

    def execute(self, given: RunInput) -> Shipped:
        shipped: Shipped = self._get(self.actor.execute.remote(given), "execute")
        return shipped

    def discard(self, attempt_id: str) -> None:
        if not self.lost:
            with contextlib.suppress(ExternalError):
                self._get(self.actor.discard.remote(attempt_id), "discard")


class RayDispatcher:
    """Jobs driven from this process, the class's work on Ray actors.  Raises ExternalError
    when Ray is not installed, the cluster cannot be reached, or no node advertises
    :data:`RESOURCE` (nothing could ever run: fail closed rather than queue forever)."""

    def __init__(self, config: RayConfig) -> None:
        try:
            import ray  # noqa: PLC0415 -- the ray extra is optional
        except ImportError:
            raise ExternalError("harness.backend is ray but Ray is not installed (pip install "
                                "'triz-ri-smart-ai-evaluator[ray]')") from None
        self._ray = ray
        try:
            ray.init(address=config.address, log_to_driver=False, logging_level=logging.WARNING,
                     configure_logging=False)
            offered = ray.cluster_resources().get(RESOURCE, 0)  # type: ignore[no-untyped-call]
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ...
            raise ExternalError(f"cannot join the Ray cluster at {config.address}: "
                                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                                ) from None
        if offered < 1:
            ray.shutdown()
            raise ExternalError(f"no node of the Ray cluster at {config.address} advertises "
                                f"the {RESOURCE} resource: start the sandbox-capable nodes with "
                                f"--resources='{{\"{RESOURCE}\": N}}'")
        self._actor_class = ray.remote(HarnessWorker).options(
            resources={RESOURCE: 1}, num_cpus=1, max_restarts=0, max_task_retries=0,
            max_concurrency=1)
        self._config = config
        self._idle: queue.Queue[_RayWorker] = queue.Queue()
        for _ in range(config.workers):
            self._idle.put(self._new())
        self._pool = ThreadPoolExecutor(max_workers=config.workers,
                                        thread_name_prefix="harness-ray")

    def _new(self) -> _RayWorker:
        c = self._config
        return _RayWorker(self._ray, self._actor_class.remote(c.principal_id, c.key, c.options))

    def submit(self, job: Job) -> Future[None]:
        return self._pool.submit(self._leased, job)

    def _leased(self, job: Job) -> None:
        worker = self._idle.get()
        try:
            job(worker)
        finally:
            if worker.lost:
                log.warning("a Ray harness worker was lost; starting a new one")
                with contextlib.suppress(Exception):
                    self._ray.kill(worker.actor)
                worker = self._new()
            self._idle.put(worker)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
        while not self._idle.empty():
            with contextlib.suppress(Exception):
                self._ray.kill(self._idle.get_nowait().actor)
        with contextlib.suppress(Exception):
            self._ray.shutdown()
