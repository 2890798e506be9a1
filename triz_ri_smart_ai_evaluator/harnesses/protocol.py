"""What a task class's harness supplies, and what the generic runner gives it (issue 14 item 1).

The runner (:mod:`.runner`) owns the order every executable class shares (spec 10.4, pilot 2-6,
DESIGN "the flow of one attempt"): it fixes the candidate's digest, records
``attempt.initiated``, commits to a fresh secret seed and only then lets the class draw its
control set, hands the class a :class:`RunContext` to run and store evidence through, applies
the class's stopping conditions (quarantine before any award), computes the signal through the
one calculator, and writes the publication bundle with its signed ``MANIFEST``.

A class supplies only what is its own: how a candidate is materialised, how controls are drawn
from a seed (leaving out the cases earlier runs revealed, :mod:`..evaluation.controls`), and
how the candidate is run and judged (sandbox, driver, receivers, checks, metrics).  It never
writes ledger events itself; it stores evidence through the context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..rules.versions import PinnedRules
from ..signal.inputs import AttemptInputs
from ..signal.result import Signal

#: ``progress(stage, done, total)``: what a long run is doing, for a progress bar.
Progress = Callable[[str, int, int], None]


def quiet(_stage: str, _done: int, _total: int) -> None:
    """No progress output."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A materialised candidate.

    ``digest`` identifies the candidate (recorded in an ``attempt.initiated`` the runner writes
    and in the summary); ``artefact_sha256`` is the SHA-256 of the artefact exactly as handed
    in, which must equal what the policy port recorded for an attempt it opened (None: the
    artefact has no single byte form, such as a directory, and cannot match one);
    ``artefact`` is what is stored as the ``candidate`` evidence and published; ``state`` is the
    class's own (for example the candidate's tree); ``evidence`` are extra fields of the
    candidate's ``evidence.stored`` event."""

    digest: str
    artefact_sha256: str | None
    artefact: bytes
    state: Any = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Controls:
    """A control set drawn from the run's secret seed: ``data`` is stored as the
    ``control_set`` evidence, ``count`` is its number of cases, ``state`` is the class's own.

    ``cases`` is the fingerprint (:func:`~..evaluation.controls.fingerprint`) of each drawn
    case, in order, exactly ``count`` of them; ``skipped`` is how many cases the draw passed
    over because an earlier run had revealed them (spec 9.6 "rotated").  The runner keeps both
    hidden until the award and then reveals them in ``control.revealed``; a set whose ``cases``
    do not number ``count`` or name a retired case ends the attempt errored (fail closed)."""

    data: bytes
    count: int
    state: Any = None
    cases: tuple[str, ...] = ()
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class Observation:
    """One attempt's pass fraction on the known (public) suite beside its fresh hidden control
    (spec 4.7, 9.8, 11.16): what the divergence monitor compares.  Fractions are
    ``"part/whole"`` strings; a suite with no case is not an observation (give None)."""

    known: str
    hidden: str


@dataclass(slots=True)
class Outcome:
    """What the class's run concluded.

    ``inputs`` go to the signal calculator (evidence digests in them must be ones stored
    through the context).  ``findings`` are the critical layer's checks as dictionaries with
    at least ``id`` and ``state`` ("passed", "failed", or "not measured"); ``metrics`` map a
    name to a ``"part/whole"`` fraction; ``quarantine`` names every stopping condition that
    fired.  ``files`` are the publication bundle's files, each already stored as evidence
    through the context (the runner writes them and adds ``summary.json``, ``signal.json`` and
    the signed ``MANIFEST``); ``summary`` is merged into ``summary.json`` and ``decision`` into
    the ``verifier.decision`` event."""

    inputs: AttemptInputs
    isolation: str  # "full", or "degraded"
    degraded_reason: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)
    quarantine: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] = field(default_factory=dict)
    #: The class's own, for its :meth:`Harness.publish`.
    state: Any = None
    #: Known suite against hidden control, for the divergence monitor (None: not measured).
    observation: Observation | None = None
    #: seconds of the harness's own sub-phases of ``execute`` (``"execute.sandbox"``, ...),
    #: merged into ``summary.json``'s ``phases`` beside the runner's (issue 16 item 5)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class RunFields:
    """What every :class:`RunContext` holds: the runner's own, and a harness worker's that
    keeps the evidence for the service (issue 16 item 4)."""

    attempt_id: str
    seed: bytes
    seed_commitment: str
    work: Path
    bundle: Path
    options: RunOptions
    rules: PinnedRules
    red_team: Mapping[str, Any] | None


class RunContext(Protocol):
    """What the runner lends the class for one run."""

    @property
    def attempt_id(self) -> str: ...

    @property
    def seed(self) -> bytes: ...

    @property
    def seed_commitment(self) -> str: ...

    @property
    def work(self) -> Path:
        """A private folder of this run, removed after it."""
        ...

    @property
    def bundle(self) -> Path:
        """The attempt's publication bundle folder (the class may write files there)."""
        ...

    @property
    def options(self) -> RunOptions: ...

    @property
    def rules(self) -> PinnedRules:
        """The rules the attempt is judged under (pinned when it started, spec 10.5): a class
        measures only the indicators and checklist items these rules declare."""
        ...

    @property
    def red_team(self) -> Mapping[str, Any] | None:
        """The ledger's latest passing ``audit.report`` for this class under these rules and
        this harness version (spec 11.23; pilot 11), or None: no campaign passed for them."""
        ...

    def evidence(self, what: str, data: bytes, **extra: Any) -> str:
        """Store ``data`` as content-addressed evidence of this attempt; return its digest."""
        ...

    def progress(self, stage: str, done: int, total: int) -> None: ...


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a run needs besides the candidate (the same for every class)."""

    #: Control-set size; None: the class's minimum (``Harness.min_size``).
    size: int | None = None
    seed: bytes | None = None  # None: a fresh secret seed (tests pass one to reproduce)
    unsafe_degraded: bool = False
    self_checks: bool = True
    start_timeout: float = 20.0
    progress: Progress = quiet
    #: An attempt already opened (by the policy port) to run the candidate for; None: open one.
    attempt_id: str | None = None
    #: The log key's signer for the bundle's MANIFEST; None: the MANIFEST says unsigned.
    signer: Any = None


@runtime_checkable
class Harness(Protocol):
    """One task class's executable parts.  Register an instance under the entry-point group
    :data:`~.registry.GROUP` with the task class id as its name."""

    #: The catalogue id of the class this harness evaluates.
    task_class: str
    #: Recorded as the verifier of every attempt it runs (``verifier_version``).
    version: str
    #: One line for ``--help`` and the docs: what a candidate is.
    artefact: str
    #: Prefix of the attempt ids this harness opens (``p02``, ``dfx``).
    id_prefix: str
    #: Domain-separation tag of the seed commitment, ``sha256(tag || seed)``.
    seed_tag: bytes
    #: Whether the run needs the sandbox (the runner probes isolation first when it does).
    sandboxed: bool
    #: Smallest control-set size the class accepts.
    min_size: int

    def prepare(self, candidate: Path, work: Path) -> Prepared:
        """Materialise the candidate under ``work``.  Raises InputError for a candidate the
        class cannot take (nothing is written to the ledger then)."""
        ...

    def draw_controls(self, seed: bytes, size: int, retired: frozenset[str]) -> Controls:
        """The control set of one run, a pure function of the seed, the size and ``retired``
        (the fingerprints of the class's revealed cases, spec 9.6, 11.16).  A drawn case whose
        fingerprint is retired is never returned: the class draws further from the same
        seeded stream instead and counts the skip in ``Controls.skipped``.  Where the control
        cases sit among the run's other work must not be predictable without the seed (a
        seeded shuffle)."""
        ...

    def execute(self, ctx: RunContext, prepared: Prepared, controls: Controls) -> Outcome:
        """Run the candidate and judge it.  Raises EvaluatorError when the run cannot be
        completed; the runner then ends the attempt as errored (fail closed)."""
        ...

    def publish(self, bundle: Path, outcome: Outcome, summary: Mapping[str, Any],
                signal: Signal) -> None:
        """Write the class's human-readable report into ``bundle`` (after the award)."""
        ...


@dataclass(slots=True)
class RunResult:
    """What a run produced: the attempt, its signal, and where the bundle is."""

    attempt_id: str
    candidate_digest: str
    status: str  # "completed" or "errored"
    signal: Signal | None
    summary: dict[str, Any]
    bundle: Path
    findings: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)
