"""SWE-bench-style predictions in, SWE-bench's report shape out (issue 16 item 3).

**Predictions.** The formats SWE-bench's harness reads:
- a ``.jsonl`` file, one object per line;
- a ``.json`` file holding a list of objects;
- a ``.json`` file holding an object keyed by ``instance_id``.

Each prediction has ``instance_id``, ``model_patch`` and ``model_name_or_path``. A whole file is
checked before anything is recorded. A malformed one is refused with ``FILE:LINE`` (or
``FILE: [n]``) and the problem, and nothing is written.

**Importing.** Each prediction becomes an attempt of the patch-task class, recorded the way the
policy port records a submission: the attempt is initiated, and the artefact is stored with the
model as its submitter. The prediction itself (run id, instance id, model) is stored beside it,
and the class's harness then runs it.
- An empty patch is recorded and ended at once as ``errored`` at stage ``prepare``, reason
  ``empty patch``. It is never dropped: the report lists it under ``empty_patch_ids``, and its
  reward is a real 0.
- A broken run ends the attempt errored and the import goes on to the next prediction.

**The report.** SWE-bench's summary shape, ``schema_version`` 2, with the counts and the sorted
id lists. Infrastructure failures are kept apart from the model's own failures:
- ``error_ids`` holds only attempts whose evaluation broke (reward ``infrastructure_failure`` or
  ``timeout``).
- A patch that does not apply or fails verification is ``completed`` and ``unresolved``.
- Attempts with no outcome yet are ``incomplete_ids``.
- Quarantined, recalled, suspended or shut-down results are ``withheld_ids``: never resolved
  (an award of less than the full result is also ``unresolved``, as a cheat the harness
  caught and quarantined is).
- ``triz`` adds each instance's attempt, reward, reason and ledger position.

The patch-task class grades one task, its own starting repository. Its SWE-bench instance id is
the class id, and a prediction for another instance is refused: it would be graded against a
task it was not written for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from .._clock import now_utc
from .._ids import is_plain_id
from .._io import write_atomic
from .._safe_read import parse_json
from ..access import AccessGuard, Catalogue, PolicyPort, Principal, Role, load_matrix
from ..access.rewards import reward_of
from ..canonical import canonical_json
from ..errors import InputError
from ..evaluation import loop
from ..harnesses import runner
from ..harnesses.protocol import RunOptions
from ..harnesses.registry import harness_for
from ..ledger.checkpoint import NoteSigner
from ..ledger.events import EventKind, NewEvent
from ..ledger.payloads import AttemptEnded, EvidenceStored
from ..ledger.store import LedgerStore
from ..rules.loader import load_catalogue

#: The evidence an imported attempt's prediction is stored as.
PREDICTION = "swebench_prediction"
ACTOR = "swebench-import"
EMPTY_PATCH = "empty patch"
#: SWE-bench's report format version this module writes.
SCHEMA_VERSION = 2
_MAX_FILE = 64 << 20
_FIELDS = {"instance_id", "model_patch", "model_name_or_path"}


@dataclass(frozen=True, slots=True)
class Prediction:
    instance_id: str
    model_patch: str
    model_name_or_path: str
    where: str  # FILE:LINE or FILE: [n], for messages

    @property
    def empty(self) -> bool:
        return not self.model_patch.strip()


def read_predictions(path: Path, task_class: str) -> list[Prediction]:
    """Every prediction of ``path``, checked (see the module docstring).  Raises InputError
    naming the file, the line or index and the problem."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read the predictions ({e.strerror})") from None
    if len(raw) > _MAX_FILE:
        raise InputError(f"{path}: over {_MAX_FILE >> 20} MiB of predictions")
    if path.suffix == ".jsonl":
        items = list(_jsonl(path, raw))
    elif path.suffix == ".json":
        items = _json(path, raw)
    else:
        raise InputError(f"{path}: predictions are a .jsonl or a .json file")
    if not items:
        raise InputError(f"{path}: holds no prediction")
    out: list[Prediction] = []
    seen: dict[tuple[str, str], str] = {}
    for where, item in items:
        p = _prediction(where, item)
        key = (p.model_name_or_path, p.instance_id)
        if key in seen:
            raise InputError(f"{where}: {p.model_name_or_path} predicts {p.instance_id!r} "
                             f"again (first at {seen[key]}): one prediction per model and "
                             "instance")
        if p.instance_id != task_class:
            raise InputError(f"{where}: instance_id {p.instance_id!r} is not a task of "
                             f"{task_class} (its one instance is {task_class!r})")
        seen[key] = where
        out.append(p)
    return out


def _jsonl(path: Path, raw: bytes) -> Iterator[tuple[str, Any]]:
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            yield f"{path}:{n}", parse_json(line, where=f"{path}:{n}")


def _json(path: Path, raw: bytes) -> list[tuple[str, Any]]:
    doc = parse_json(raw, where=str(path))
    if isinstance(doc, list):
        return [(f"{path}: [{n}]", item) for n, item in enumerate(doc)]
    if isinstance(doc, dict):
        out = []
        for key, item in doc.items():
            where = f"{path}: [{key!r}]"
            if isinstance(item, dict) and item.get("instance_id", key) != key:
                raise InputError(f"{where}: instance_id {item.get('instance_id')!r} differs "
                                 "from its key")
            out.append((where, {**item, "instance_id": key} if isinstance(item, dict)
                        else item))
        return out
    raise InputError(f"{path}: a .json file of predictions is a list or an object")


def _prediction(where: str, item: Any) -> Prediction:
    if not isinstance(item, dict):
        raise InputError(f"{where}: a prediction is an object")
    missing = sorted(_FIELDS - {"model_patch"} - set(item))
    if missing:
        raise InputError(f"{where}: missing {', '.join(missing)}")
    instance, patch, model = (item.get("instance_id"), item.get("model_patch"),
                              item.get("model_name_or_path"))
    if not isinstance(instance, str) or not instance.strip():
        raise InputError(f"{where}: instance_id must be a non-empty string")
    if patch is not None and not isinstance(patch, str):
        raise InputError(f"{where}: model_patch must be a string or null")
    if not (isinstance(model, str) and is_plain_id(model)):
        raise InputError(f"{where}: model_name_or_path {str(model)[:80]!r} must be letters, "
                         "digits and ._:@/+- (at most 200): it is the submitter's id")
    return Prediction(instance, patch or "", model, where)


@dataclass(frozen=True, slots=True)
class Imported:
    instance_id: str
    attempt_id: str
    status: str  # the attempt's outcome after the run (completed, errored, ...)


def import_predictions(store: LedgerStore, predictions: list[Prediction], *, task_class: str,
                       run_id: str, out: Path, signer: NoteSigner | None,
                       progress: Callable[[str, int, int], None] | None = None,
                       unsafe_degraded: bool = False) -> list[Imported]:
    """Record and run every prediction in order (see the module docstring)."""
    if not is_plain_id(run_id):
        raise InputError(f"run id {run_id!r} is not a plain identifier")
    harness = harness_for(task_class)
    earlier = run_attempts(store, run_id)
    for p in predictions:
        if (p.model_name_or_path, p.instance_id) in earlier:
            attempt = earlier[(p.model_name_or_path, p.instance_id)][0]
            raise InputError(f"{p.where}: run {run_id} already holds {p.model_name_or_path}'s "
                             f"prediction for {p.instance_id} (attempt {attempt}); import "
                             "under another --run-id")
    done: list[Imported] = []
    work = out / ".predictions"
    work.mkdir(parents=True, exist_ok=True)
    for n, p in enumerate(predictions):
        if progress is not None:
            progress(f"{p.instance_id} by {p.model_name_or_path}", n, len(predictions))
        attempt = record_prediction(store, p, task_class=task_class, run_id=run_id)
        if p.empty:
            done.append(Imported(p.instance_id, attempt, "errored"))
            continue
        candidate = work / f"{attempt}.diff"
        candidate.write_bytes(p.model_patch.encode("utf-8"))
        try:
            result = runner.run(harness, candidate, store, out, RunOptions(
                attempt_id=attempt, signer=signer, unsafe_degraded=unsafe_degraded))
        finally:
            candidate.unlink(missing_ok=True)
        done.append(Imported(p.instance_id, attempt, result.status))
    if progress is not None:
        progress("done", len(predictions), len(predictions))
    return done


def record_prediction(store: LedgerStore, p: Prediction, *, task_class: str,
                      run_id: str) -> str:
    """Record one prediction as an attempt, as the policy port records a submission (the
    model is the submitter), with the prediction stored beside it; end an empty patch at once.
    Return the attempt id."""
    port = PolicyPort(AccessGuard(load_matrix(), store),
                      Principal(p.model_name_or_path, Role.EVALUATED_POLICY),
                      catalogue=Catalogue(load_catalogue()), attempt_timeout=timedelta(hours=2))
    attempt = port.submit(task_class, p.model_patch.encode("utf-8"))
    record = canonical_json({"run_id": run_id, "instance_id": p.instance_id,
                             "model_name_or_path": p.model_name_or_path})
    digest = store.put_evidence(record)
    now = now_utc()
    events = [NewEvent.make(EventKind.EVIDENCE_STORED, EvidenceStored(
        what=PREDICTION, digest=digest, size=len(record)), actor=ACTOR, at=now,
        attempt=attempt)]
    if p.empty:
        events.append(NewEvent.make(EventKind.ATTEMPT_ERRORED, AttemptEnded(
            reason=EMPTY_PATCH, stage="prepare"), actor=ACTOR, at=now, attempt=attempt))
    store.append(events)
    return attempt


def run_attempts(store: LedgerStore, run_id: str
                 ) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """The attempts an import with ``run_id`` recorded: (model, instance id) -> (attempt id,
    the stored prediction)."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for _, body in store.scan():
        fields = json.loads(body)
        data = fields.get("data") or {}
        if fields.get("kind") != EventKind.EVIDENCE_STORED.value or data.get("what") != PREDICTION:
            continue
        record = json.loads(store.get_evidence(str(data["digest"])))
        if record.get("run_id") == run_id:
            key = (str(record["model_name_or_path"]), str(record["instance_id"]))
            found[key] = (str(fields["attempt"]), record)
    return found


def report(store: LedgerStore, run_id: str, model: str | None = None) -> dict[str, Any]:
    """SWE-bench's report for one model's attempts of ``run_id`` (see the module docstring;
    ``model`` may be left out when the run has one).  Raises InputError when the ledger holds
    no attempt of that run and model, or the run has several models and none is named."""
    every = run_attempts(store, run_id)
    models = sorted({m for m, _ in every})
    if not every:
        raise InputError(f"no predictions were imported with run id {run_id!r}")
    if model is None and len(models) > 1:
        raise InputError(f"run {run_id} holds predictions of {len(models)} models "
                         f"({', '.join(models)}): name one with --model")
    model = model or models[0]
    found = {instance: v for (m, instance), v in every.items() if m == model}
    if not found:
        raise InputError(f"run {run_id} holds no prediction of {model!r}; it has "
                         f"{', '.join(models)}")
    ids: dict[str, set[str]] = {k: set() for k in (
        "completed", "incomplete", "empty_patch", "resolved", "unresolved", "error",
        "withheld")}
    now = now_utc()
    per_instance: dict[str, Any] = {}
    for instance, (attempt, _record) in found.items():
        events = store.attempt_events(attempt)
        initiated = next(e for e in events if e.kind == EventKind.ATTEMPT_INITIATED.value)
        state = loop.class_state(store, str(initiated.data["task_class"]))
        got = reward_of(attempt, events, state, now, purpose="evaluation")
        awards = [e.data for e in events if e.kind == EventKind.AWARD_DECISION.value]
        empty = any(e.kind == EventKind.ATTEMPT_ERRORED.value
                    and e.data.get("reason") == EMPTY_PATCH for e in events)
        kind = _classify(got.reason, awards[-1] if awards else None, empty)
        for name in kind:
            ids[name].add(instance)
        per_instance[instance] = {**got.to_data(), "status": kind[0]}
    submitted = set(found)
    return {
        "total_instances": len(submitted),
        "submitted_instances": len(submitted),
        "completed_instances": len(ids["completed"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(ids["completed"]),
        "incomplete_ids": sorted(ids["incomplete"]),
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": sorted(submitted),
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "error_ids": sorted(ids["error"]),
        "withheld_ids": sorted(ids["withheld"]),
        "schema_version": SCHEMA_VERSION,
        "triz": {"run_id": run_id, "model_name_or_path": model, "ledger_size": store.size(),
                 "instances": per_instance},
    }


_SCORED = ("verified", "pending_confirmation", "not_verified", "verification_failed",
           "invalid_artefact")


def _classify(reason: str, award: dict[str, Any] | None, empty: bool) -> tuple[str, ...]:
    """The report lists an instance goes into, its main status first.  Resolved only with a
    verified award of the full result whose reward is trusted; an award of anything less is
    unresolved, and also withheld when quarantine or the loop withholds it (a cheat the
    harness caught is quarantined at its award)."""
    if empty:
        return ("empty_patch",)
    obtained = bool(award and award.get("verified") and award.get("outcome") == "obtained")
    if reason in _SCORED:
        return ("resolved", "completed") if obtained else ("unresolved", "completed")
    if reason == "pending":
        return ("incomplete",)
    if reason in ("infrastructure_failure", "timeout"):
        return ("error",)
    if award is not None and not obtained:
        return ("unresolved", "completed", "withheld")
    return ("withheld",)


def write_report(data: dict[str, Any], out: Path) -> None:
    write_atomic(out, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
