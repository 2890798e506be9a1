"""Harness workers: a task class's own work done away from the service, reported back signed
(issue 16 item 4).

A :class:`HarnessWorker` runs on a node that can run the sandbox.  It probes isolation there,
materialises the candidate and runs it (the parts of :mod:`..harnesses.runner` an
:class:`~..harnesses.runner.Executor` does), keeping every piece of evidence the class stores
in memory instead of writing it anywhere.  It never opens the ledger.  When the run is over it
hands back a report (the class's outcome, its evidence, the files it wrote into the bundle)
with a request signed by the harness principal's key that names the report's SHA-256.

On the service, a :class:`RemoteExecutor` sends that signed request through the trusted port
first: the port checks the signature against the key the provenance register holds for the
principal (refusing a revoked or quarantined one, spec 9.11, 9.15) and records it on the
attempt.  Only then does the executor compare the report with the SHA-256 the signature
covers, read it, and hand its evidence to the runner, which writes every event.  The service
stays the ledger's only writer; a report that does not verify ends the attempt errored.

Ray's transport pickles arguments and results, and so does the report: the signature makes
the report attributable and refuses one changed after signing, but a cluster is still one
trust domain (docs/service.md, "Scale-out on Ray"; ADR 0014).
"""

from __future__ import annotations

import hashlib
import pickle
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from .._io import write_atomic
from ..access import Principal, Role
from ..access.trusted import sign_request
from ..errors import EvaluatorError, ExternalError
from ..harnesses.protocol import (
    Controls,
    Outcome,
    Prepared,
    RunContext,
    RunFields,
    RunOptions,
    quiet,
)
from ..harnesses.registry import harness_for
from ..provenance.confirmation import ComponentKey
from ..rules.versions import PinnedRules
from ..sandbox import IsolationSupport, probe_isolation

#: A report larger than this is refused unread (the bundle of a pilot 02 run is ~1 MB).
MAX_REPORT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What a worker needs of :class:`~..harnesses.protocol.RunOptions` (no callables, no
    keys: it crosses the wire)."""

    unsafe_degraded: bool = False
    self_checks: bool = True
    start_timeout: float = 20.0

    def run_options(self, size: int | None) -> RunOptions:
        return RunOptions(size=size, unsafe_degraded=self.unsafe_degraded,
                          self_checks=self.self_checks, start_timeout=self.start_timeout,
                          progress=quiet)


@dataclass(frozen=True, slots=True)
class RunInput:
    """What the runner has fixed before the candidate runs (the seed stays secret to the
    worker; the control set is drawn, and committed to, on the service)."""

    attempt_id: str
    seed: bytes
    seed_commitment: str
    controls: Controls
    rules: PinnedRules
    red_team: Mapping[str, Any] | None
    size: int | None


@dataclass(frozen=True, slots=True)
class Shipped:
    """A worker's answer: the signed request naming the report, and the report's bytes."""

    request: dict[str, Any]
    report: bytes


@dataclass(frozen=True, slots=True)
class _Report:
    outcome: Outcome
    evidence: list[tuple[str, bytes, dict[str, Any]]]
    bundle: dict[str, bytes]


@dataclass(slots=True)
class _Buffered(RunFields):
    """The :class:`~..harnesses.protocol.RunContext` a worker lends the class: evidence is
    kept, in order, for the service to store."""

    kept: list[tuple[str, bytes, dict[str, Any]]] = field(default_factory=list)

    def evidence(self, what: str, data: bytes, **extra: Any) -> str:
        self.kept.append((what, bytes(data), dict(extra)))
        return hashlib.sha256(data).hexdigest()

    def progress(self, stage: str, done: int, total: int) -> None:
        """Progress stays on the worker."""


class HarnessWorker:
    """One harness worker (a Ray actor, or an object in this process).  ``key`` is the raw
    Ed25519 private key of the harness principal ``principal_id``."""

    def __init__(self, principal_id: str, key: bytes, options: WorkerOptions) -> None:
        self._principal = Principal(principal_id, Role.HARNESS)
        self._key = ComponentKey.from_private_bytes(key)
        self._options = options
        self._runs: dict[str, tuple[str, Path, Prepared]] = {}

    def probe(self) -> IsolationSupport:
        return probe_isolation()

    def prepare(self, task_class: str, attempt_id: str, artefact: bytes) -> Prepared:
        """Materialise the candidate here and keep it for :meth:`execute`; the service gets
        it without the class's own state.  Raises InputError for a candidate the class
        cannot take."""
        self.discard(attempt_id)
        root = Path(tempfile.mkdtemp(prefix="trz-worker-"))
        try:
            # as the runner's private folder: the sandbox uid may traverse, not list
            for folder in (root, root / "in", root / "work", root / "bundle"):
                folder.mkdir(mode=0o711, exist_ok=True)
                folder.chmod(0o711)
            candidate = root / "in" / f"{attempt_id}.artefact"
            candidate.write_bytes(artefact)
            prepared = harness_for(task_class).prepare(candidate, root / "work")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        self._runs[attempt_id] = (task_class, root, prepared)
        return Prepared(prepared.digest, prepared.artefact_sha256, prepared.artefact,
                        None, dict(prepared.evidence))

    def execute(self, given: RunInput) -> Shipped:
        """Run the prepared candidate and report, signed.  Raises EvaluatorError when the run
        cannot be completed (the attempt then ends errored)."""
        held = self._runs.get(given.attempt_id)
        if held is None:
            raise EvaluatorError(f"the worker holds no prepared candidate for "
                                 f"{given.attempt_id}")
        task_class, root, prepared = held
        try:
            bundle = root / "bundle"
            ctx = _Buffered(given.attempt_id, given.seed, given.seed_commitment, root / "work",
                            bundle, self._options.run_options(given.size), given.rules,
                            given.red_team)
            outcome = harness_for(task_class).execute(ctx, prepared, given.controls)
            written = {str(p.relative_to(bundle)): p.read_bytes()
                       for p in sorted(bundle.rglob("*")) if p.is_file()}
            report = pickle.dumps(_Report(outcome, ctx.kept, written),
                                  protocol=pickle.HIGHEST_PROTOCOL)
        finally:
            self.discard(given.attempt_id)
        payload = {"attempt_id": given.attempt_id,
                   "report": {"sha256": hashlib.sha256(report).hexdigest(),
                              "size": len(report), "evidence": len(ctx.kept)}}
        return Shipped(sign_request(self._key, self._principal, "evidence", "append", payload),
                       report)

    def discard(self, attempt_id: str) -> None:
        """Forget a prepared candidate (and its files)."""
        held = self._runs.pop(attempt_id, None)
        if held is not None:
            shutil.rmtree(held[1], ignore_errors=True)


class WorkerHandle(Protocol):
    """A harness worker as the service calls it (in this process, or a Ray actor)."""

    def probe(self) -> IsolationSupport: ...

    def prepare(self, task_class: str, attempt_id: str, artefact: bytes) -> Prepared: ...

    def execute(self, given: RunInput) -> Shipped: ...

    def discard(self, attempt_id: str) -> None: ...


#: Sends a worker's signed request through the trusted port; raises when it is refused.
Verify = Callable[[dict[str, Any]], Mapping[str, Any]]


class RemoteExecutor:
    """The runner's :class:`~..harnesses.runner.Executor` over a harness worker, for one
    attempt.  Every answer of the worker is checked before the runner records any of it."""

    def __init__(self, worker: WorkerHandle, task_class: str, attempt_id: str,
                 verify: Verify) -> None:
        self._worker = worker
        self._task_class = task_class
        self._attempt_id = attempt_id
        self._verify = verify

    def probe(self) -> IsolationSupport:
        return self._worker.probe()

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        del work  # the worker materialises the candidate on its own node
        return self._worker.prepare(self._task_class, self._attempt_id, candidate.read_bytes())

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        del prepared  # the worker kept its own, with the class's state
        shipped = self._worker.execute(RunInput(
            ctx.attempt_id, ctx.seed, ctx.seed_commitment, controls, ctx.rules, ctx.red_team,
            ctx.options.size))
        report = self._accepted(shipped)
        for what, data, extra in report.evidence:
            ctx.evidence(what, data, **extra)
        for name, data in report.bundle.items():
            write_atomic(ctx.bundle / _inside(name), data)
        return report.outcome

    def close(self) -> None:
        """Let the worker drop what it still holds for the attempt (a run that broke early)."""
        self._worker.discard(self._attempt_id)

    def _accepted(self, shipped: Shipped) -> _Report:
        """The report, read only after the trusted port accepted the signed request for this
        attempt and the bytes are the ones it names.  Raises EvaluatorError otherwise."""
        request = shipped.request
        if not isinstance(request, dict) or request.get("attempt_id") != self._attempt_id:
            raise ExternalError(f"the harness worker's report is not for attempt "
                                f"{self._attempt_id}")
        self._verify(request)  # AccessDenied / InputError: the run ends errored
        named = request["report"]
        if len(shipped.report) > MAX_REPORT_BYTES or len(shipped.report) != named["size"] or \
                hashlib.sha256(shipped.report).hexdigest() != named["sha256"]:
            raise ExternalError("the harness worker's report is not the one its signature "
                                "names (SHA-256 or size differ)")
        report = pickle.loads(shipped.report)  # noqa: S301 -- signed by the harness, checked above
        if not isinstance(report, _Report) or not isinstance(report.outcome, Outcome) or \
                len(report.evidence) != named["evidence"]:
            raise ExternalError("the harness worker's report does not hold a run's outcome")
        return report


def _inside(name: str) -> str:
    """A bundle file name from a worker: relative, without ``..``.  Raises ExternalError."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ExternalError(f"the harness worker's bundle names a file outside it: {name!r}")
    return str(path)
