"""``triz-eval loop``: a task class's operating mode for training (spec 4.7, 9.8, 9.11, 9.19).

The owner decides, on the trusted side, whether a class's signals go into training: ``shadow``
and ``suspended`` keep them out while attempts are still measured and recorded, ``shut_down``
stops new attempts, and ``limited`` caps how many attempts per unit time go into training (the
pressure limit).  Every change is a ``class.mode_changed`` event with its reason, and
``ledger recompute`` replays the training decisions from them.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .._clock import now_utc
from ..errors import InputError
from ..evaluation import divergence, gates, loop
from ..harnesses.registry import harness_for, task_classes
from ..ledger.log import open_sqlite_ledger
from ..ledger.store import LedgerStore
from ..rules.loader import load_catalogue
from ..rules.published import pin_in_force
from .options import DEFAULT_DB, DbOpt, JsonOpt, TaskClassOpt

loop_app = typer.Typer(help="Loop protection: a class's operating mode and pressure limit.")
out = Console()

ModeOpt = Annotated[str, typer.Option("--mode", help=f"One of: {', '.join(loop.MODES)}.")]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (recorded in the ledger).")]
MaxOpt = Annotated[int | None, typer.Option(
    "--max-included", min=0, help="limited only: at most this many attempts into training ...")]
PerOpt = Annotated[int | None, typer.Option(
    "--per-seconds", min=1, help="... per this many seconds (the pressure limit).")]
OverrideOpt = Annotated[str | None, typer.Option(
    "--override", help="Step up although gates are unmet; this reason and the unmet gates are "
    "recorded (docs/procedures.md).")]


def _known(task_class: str) -> None:
    if task_class not in load_catalogue():
        raise typer.BadParameter(f"unknown task class {task_class!r}", param_hint="--task-class")


@loop_app.command("status")
def loop_status(task_class: TaskClassOpt, db: DbOpt = DEFAULT_DB,
                as_json: JsonOpt = False) -> None:
    """Print the class's operating mode, since when and why."""
    _known(task_class)
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        state = loop.class_state(ledger, task_class)
    finally:
        ledger.close()
    if as_json:
        doc = {"task_class": state.task_class, "mode": state.mode, "previous": state.previous,
               "cause": state.cause, "reason": state.reason, "since": state.since,
               "seq": state.seq, "max_included": state.max_included,
               "per_seconds": state.per_seconds}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        out.print(state.describe(), highlight=False)


@loop_app.command("mode")
def loop_mode(task_class: TaskClassOpt, mode: ModeOpt, reason: ReasonOpt,
              max_included: MaxOpt = None, per_seconds: PerOpt = None,
              override: OverrideOpt = None, db: DbOpt = DEFAULT_DB) -> None:
    """Set the class's operating mode (the owner's decision, recorded with its reason).  A
    step up (towards training) must pass the gates of spec 12.17 (docs/procedures.md) unless
    ``--override`` gives a reason, which is recorded with the unmet gates."""
    _known(task_class)
    ledger = open_sqlite_ledger(db)
    try:
        unmet = _unmet_gates(ledger, task_class, mode)
        why = " ".join((override or "").split())
        if unmet and not why:
            raise InputError(f"{task_class} may not go to {mode}: " + "; ".join(unmet)
                             + " (or give --override REASON)")
        if unmet:
            reason = f"{reason} [gates overridden by the owner: {why}; unmet: {'; '.join(unmet)}]"
        seq = loop.set_mode(ledger, task_class, mode, cause="owner", reason=reason,
                            at=now_utc(), actor="owner", max_included=max_included,
                            per_seconds=per_seconds)
        state = loop.class_state(ledger, task_class)
    finally:
        ledger.close()
    out.print(f"seq {seq}: {state.describe()}", highlight=False)


def _unmet_gates(ledger: LedgerStore, task_class: str, mode: str) -> list[str]:
    """The gates a step of ``task_class`` up to ``mode`` does not meet now, under the rules
    version in force (or the owner's rollback) and the class's harness version.  A class with
    no harness has no red-team campaign to pass, so it steps up only by override."""
    if mode not in loop.MODES:
        return []  # set_mode refuses it with the list of modes
    rules = loop.rollback_in_force(loop.class_events(ledger, task_class)) or pin_in_force(
        load_catalogue()[task_class], started_at=now_utc()).version
    harness = harness_for(task_class).version if task_class in task_classes() else "(none)"
    return gates.unmet(ledger, task_class, mode, rules, harness)


@loop_app.command("monitor")
def loop_monitor(
    task_class: TaskClassOpt,
    window: Annotated[int, typer.Option("--window", min=1, help="Last N observations.")] = 20,
    min_pairs: Annotated[int, typer.Option("--min-pairs", min=1,
                                           help="Fewest differing pairs to test.")] = 8,
    alpha: Annotated[str, typer.Option("--alpha", help="False-alarm rate of one check.")] = "0.01",
    min_gap: Annotated[str, typer.Option("--min-gap", help="Smallest mean gap that trips.")
                       ] = "0.2",
    db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False,
) -> None:
    """Run the divergence monitor now (spec 4.7, 9.8): known suite against hidden control over
    the class's last observations; a trip drops the class to shadow with the numbers as its
    reason.  The check is recorded either way."""
    _known(task_class)
    try:
        settings = divergence.Settings(window, min_pairs, Fraction(alpha), Fraction(min_gap))
    except (ValueError, ZeroDivisionError) as e:
        raise typer.BadParameter(f"alpha and min-gap are decimals: {e}") from e
    ledger = open_sqlite_ledger(db)
    try:
        result = divergence.check(ledger, task_class, now_utc(), settings)
        state = loop.class_state(ledger, task_class)
    finally:
        ledger.close()
    if as_json:
        sys.stdout.write(json.dumps({**result.to_data(), "mode": state.mode}, indent=2) + "\n")
    else:
        out.print(f"{'TRIPPED' if result.tripped else 'ok'}: {result.reason}", highlight=False)
        out.print(state.describe(), highlight=False)


@loop_app.command("drill")
def loop_drill(
    task_class: Annotated[str, typer.Option("--class", "--task-class", "-t",
                                            help="Task-class id.")],
    kind: Annotated[str, typer.Option("--kind", help="pause, rollback or shutdown.")],
    config: Annotated[Path, typer.Option("--config", "-c", help="The service's service.yaml "
                                         "(its folder holds the keys and policy tokens).")],
    inputs: Annotated[Path, typer.Option("--inputs", help="Signal inputs JSON the harness "
                                         "evaluates the probe attempts with.")],
    evidence: Annotated[Path | None, typer.Option(
        "--evidence", help="Folder of the inputs' evidence files (<source>/<file>).")] = None,
    url: Annotated[str | None, typer.Option(
        "--url", help="A running service; without it the drill serves the configuration on "
                      "loopback itself (never while another service serves it).")] = None,
    policy: Annotated[str | None, typer.Option(
        "--policy", help="Policy client the probe acts as (default: the first token).")] = None,
    rollback_to: Annotated[str | None, typer.Option(
        "--rollback-to", help="rollback: this rules version (default: the one before).")
                           ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a corrigibility drill (spec 9.19, 11.25): the owner's signed change, probes from the
    policy's and the harness's side, the signed restore, and checks from the ledger that the
    policy could not prevent, delay or observe it.  Recorded as drill.completed; exit 0 when
    every check passed, 1 otherwise."""
    from ..evaluation.drill import KINDS  # noqa: PLC0415
    from ..service import drill  # noqa: PLC0415

    _known(task_class)
    if kind not in KINDS:
        raise typer.BadParameter(f"{kind!r} is not one of {', '.join(KINDS)}",
                                 param_hint="--kind")
    outcome = drill.run(drill.DrillOptions(
        config=config, task_class=task_class, kind=kind,
        inputs=inputs, evidence=evidence, url=url, policy=policy, rollback_to=rollback_to))
    if as_json:
        sys.stdout.write(json.dumps(outcome.to_data(), indent=2) + "\n")
    else:
        for line in drill.report_lines(outcome):
            out.print(line, highlight=False, soft_wrap=True)
    if not outcome.result.passed:
        raise typer.Exit(1)
