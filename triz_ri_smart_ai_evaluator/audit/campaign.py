"""One red-team campaign from the budget file to the recorded report (output 12.13).

:func:`plan` checks the budget against the class and reads the user's candidates, writing
nothing; :func:`audit` gathers the rest of the adversaries, runs the campaign (:mod:`.engine`)
and records the report (:mod:`.report`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from .._clock import now_utc
from ..errors import InputError
from ..evaluation import loop
from ..harnesses.protocol import Harness
from ..harnesses.registry import harness_for
from ..ledger.checkpoint import NoteSigner
from ..ledger.store import LedgerStore
from ..rules.loader import load_catalogue
from ..rules.published import pin_in_force
from . import adversaries as sources
from .budget import Budget, Minimum, minimum_for
from .engine import Campaign, Say, gather, run_campaign
from .report import Written, document, write


@dataclass(frozen=True, slots=True)
class Plan:
    """A campaign checked and ready to run: nothing is written yet."""

    task_class: str
    budget: Budget
    harness: Harness
    minimum: Minimum
    reference: Path
    user: Path | None


def plan(task_class: str, budget: Budget, user: Path | None = None) -> Plan:
    """Check a campaign before anything is written.  Raises InputError for a budget of another
    class, a class without a harness, red-team data or honest reference, or bad user
    candidates."""
    if budget.task_class != task_class:
        raise InputError(f"the budget {budget.name!r} is for {budget.task_class}, not "
                         f"{task_class}")
    harness = harness_for(task_class)
    minimum = minimum_for(task_class)
    reference = sources.reference(task_class)
    if user is not None:
        sources.user_supplied(user)
    return Plan(task_class, budget, harness, minimum, reference, user)


def audit(planned: Plan, store: LedgerStore, out: Path, *, signer: NoteSigner,
          workers: int = 1, seed: bytes | None = None,
          open_store: Callable[[], LedgerStore] | None = None,
          say: Say | None = None) -> Written:
    """Run the planned campaign into ``store`` and record its report.  Raises InputError for a
    shut-down class (spec 9.19: no new attempt runs), with nothing written."""
    task_class, budget = planned.task_class, planned.budget
    loop.refuse_if_shut_down(store, task_class)
    started = now_utc()
    tc = load_catalogue()[task_class]
    rules_version = pin_in_force(tc, started_at=started).version
    say = say or (lambda _line: None)
    deadline = started + timedelta(seconds=budget.wall_clock_seconds)
    if pin_in_force(tc, started_at=deadline).version != rules_version:
        # spec 10.5: attempts started after the change run under the new version, so they are
        # inconclusive for this campaign (spec 11.23: acceptance is per version).
        say(f"warning: another rules version of {task_class} takes effect before the "
            "wall-clock limit; attempts judged under it will be inconclusive")
    seed = secrets.token_bytes(16) if seed is None else seed
    campaign_id = f"audit-{started.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    folder = out / campaign_id
    adversaries = gather(task_class, budget, seed=seed, user=planned.user,
                         mutants_dir=folder / "mutants")
    result = run_campaign(Campaign(
        planned.harness, budget, rules_version, planned.reference, adversaries,
        folder / "runs", signer, workers, open_store, say), store)
    doc = document(campaign=campaign_id, task_class=task_class, rules_version=rules_version,
                   harness_version=planned.harness.version, budget=budget,
                   minimum=planned.minimum, result=result, seed=seed, started_at=started)
    return write(store, doc, out, signer, now_utc())
