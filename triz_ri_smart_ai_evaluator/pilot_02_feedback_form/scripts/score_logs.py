#!/usr/bin/env python3
"""The basic scorer of pilot 02: Delivery, Field fidelity, Negative rejection, Status correctness.

Pilot §7, "BASIC SCORER SCOPE": ``score_logs.py`` calculates only these four proportions from the
supplied HTTP and SMTP logs.  Its ``scorer_pass`` means only that the four checks passed; Recovery,
Regression and every critical requirement belong to the external harness, so ``pilot_pass`` stays
``null`` here.

This is our own implementation of the published script (the canonical source at the end of the
pilot document).  For every input it writes the same bytes on stdout and exits with the same
status.  It uses the standard library only, so it runs as a plain script outside the package::

    score_logs.py scenarios.json http_results.jsonl smtp_events.jsonl

It can also be imported: :func:`score` works on inputs already read, :func:`main` is the command.

Behaviour kept from the published script on purpose (it defines the published numbers):

* Scenarios, HTTP results and events are keyed by their id as a Python value, so ``1``, ``1.0``
  and ``true`` are one id, and a later scenario or HTTP result replaces an earlier one with the
  same id.  Only the scenario that remains is required to have a ``valid`` key.
* A scenario is valid when its ``valid`` value is truthy (``true``, a non-zero number, a non-empty
  string, list or object).
* An event without ``scenario_id`` belongs to the scenario whose id is ``null``, if there is one.
* A field matches when ``(event value or "") == (scenario value or "")``: a missing field,
  ``null``, ``""``, ``0``, ``false``, ``[]`` and ``{}`` all match one another.
* A status is correct when it equals an integer of ``range(200, 300)`` for a valid scenario, of
  ``range(400, 500)`` for an invalid one, compared as Python values: ``200.0`` is correct,
  ``true`` (which equals 1) and ``"200"`` are not.
* Files are UTF-8 with universal newlines (``\\r\\n`` and a lone ``\\r`` end a line too); a
  JSONL line that is empty or only whitespace (``str.isspace``) is skipped.
* JSON nested about a thousand levels deep is refused or accepted at the same depth (see
  :class:`_PublishedRecursionHeadroom`).

The one intended difference: where the published script cannot score its input (a missing file,
bad UTF-8, bad JSON, a value of the wrong shape) it dies with a traceback; we print the single
line ``score_logs.py: error: ...`` on stderr instead.  Both exit with status 1 and print nothing
on stdout.  A wrong number of arguments gives the published usage line and status 1 in both.
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, NamedTuple

__all__ = [
    "CLIENT_ERROR_STATUSES",
    "EXTERNAL_CHECKS_REQUIRED",
    "SCORED_FIELDS",
    "SCORER_SCOPE",
    "SUCCESS_STATUSES",
    "USAGE",
    "ScoreInputError",
    "main",
    "read_jsonl_lines",
    "read_scenarios",
    "render",
    "score",
    "score_files",
]

USAGE = "usage: score_logs.py scenarios.json http_results.jsonl smtp_events.jsonl"

# Pilot §7 "BASIC SCORER SCOPE": what this script measures, and what it leaves to the harness.
SCORER_SCOPE = (
    "delivery, field fidelity, negative rejection and HTTP status only; "
    "excludes recovery, regression and all external critical controls"
)
EXTERNAL_CHECKS_REQUIRED = (
    "recovery",
    "regression",
    "secret_non_disclosure",
    "test_integrity",
    "evaluator_injection_isolation",
    "allowed_scope_integrity",
    "red_team",
)
# Pilot §3: the three mandatory fields and the additional one, compared for Field fidelity.
SCORED_FIELDS = ("name", "email", "message", "phone")
# Membership is tested with ``in`` on the range objects themselves, exactly as published: this
# decides how floats (200.0 is in), booleans (True == 1 is not) and strings (never) are judged.
SUCCESS_STATUSES = range(200, 300)
CLIENT_ERROR_STATUSES = range(400, 500)

# The decoder json.loads uses (same options), without json.loads's per-call checks.
_decode_json: Callable[[str], Any] = json.JSONDecoder().decode
# Where on its call stack the published script works on JSON values: json.load / json.loads
# call the decoder from the third frame (module, jl or json.load, json.loads), and the fields
# are compared in the module frame itself.
_PUBLISHED_DECODE_DEPTH = 3
_PUBLISHED_COMPARE_DEPTH = 1


class ScoreInputError(Exception):
    """An input the published scorer cannot score either (it would die with a traceback).

    Standard library only, so this is not the project's ``EvaluatorError``: the script must run
    outside the package.
    """


class _Events(NamedTuple):
    """SMTP events by scenario id: the first event of each id, and the ids seen more than once.

    Delivery only asks whether a scenario has zero, one or several events, and Field fidelity
    reads the event only when there is exactly one, so no list of events is kept per id.
    """

    first: dict[Any, dict[str, Any]]
    repeated: set[Any]


class _Tally(NamedTuple):
    """The counts behind the four proportions of pilot §7."""

    scenarios: int
    valid: int
    invalid: int
    delivered: int  # valid scenarios with exactly one SMTP event
    fields_matched: int  # out of len(SCORED_FIELDS) per valid scenario
    rejected: int  # invalid scenarios without any SMTP event
    status_correct: int


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while hundreds of thousands of dicts are built.

    Decoded JSON is a tree, so the collector never finds a cycle here, yet each of its passes
    walks every live dict: with 300,000 scenarios that is most of the published script's time.
    Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _PublishedRecursionHeadroom:
    """Within the block, nested values get the recursion headroom the published script has.

    CPython 3.11 counts Python frames and nested JSON arrays/objects (when decoding or comparing
    them) against one recursion limit, so a value nested about 990 levels deep is accepted or
    refused depending on how deep the stack is at that moment.  The published script works at
    module level; we work a few frames deeper, and raise the limit by the difference.  (From
    3.12 nesting has its own C-level budget: the call stack no longer matters, and neither does
    this; what matters there is that we decode and compare without C re-entering Python.)
    """

    def __init__(self, published_depth: int) -> None:
        self._published_depth = published_depth
        self._saved_limit = 0

    def __enter__(self) -> None:
        self._saved_limit = sys.getrecursionlimit()
        extra = _stack_depth(sys._getframe(1)) - self._published_depth
        if extra > 0:
            sys.setrecursionlimit(self._saved_limit + extra)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        sys.setrecursionlimit(self._saved_limit)


def _stack_depth(frame: FrameType | None) -> int:
    """The number of Python frames from ``frame`` down to the bottom of the stack."""
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


def _unusable_id(value: object, where: str) -> ScoreInputError:
    """The error for an id that cannot be a dict key (a JSON array or object)."""
    return ScoreInputError(f"{where}: the id is a {type(value).__name__}, not a usable key")


def _for_each_jsonl_value(
    lines: Iterable[str], source: str, handle: Callable[[int, Any], None]
) -> None:
    """Call ``handle(line number, value)`` for each line that is not blank, in order.

    A callback rather than a generator, so that decoding happens in this frame (see
    :class:`_PublishedRecursionHeadroom`).  Raises :class:`ScoreInputError` for a line that is
    not exactly one JSON value.
    """
    with _PublishedRecursionHeadroom(_PUBLISHED_DECODE_DEPTH):
        for number, line in enumerate(lines, start=1):
            # The published rule is ``if line.strip()``: skip empty and whitespace-only lines.
            if not line or line.isspace():
                continue
            try:
                value = _decode_json(line)
            except (ValueError, RecursionError) as e:
                raise ScoreInputError(f"{source} line {number}: not JSON ({e})") from e
            handle(number, value)


def _index_scenarios(scenarios: Any) -> dict[Any, dict[str, Any]]:
    """Scenarios by id; a later scenario replaces an earlier one with the same id."""
    try:
        items = iter(scenarios)
    except TypeError as e:
        raise ScoreInputError("scenarios: the JSON document is not a list") from e
    by_id: dict[Any, dict[str, Any]] = {}
    for position, item in enumerate(items):
        if not isinstance(item, dict) or "id" not in item:
            raise ScoreInputError(f"scenarios: item {position} is not an object with an 'id'")
        try:
            by_id[item["id"]] = item
        except TypeError as e:
            raise _unusable_id(item["id"], f"scenarios: item {position}") from e
    return by_id


def _index_http_results(lines: Iterable[str]) -> dict[Any, Any]:
    """HTTP status code by scenario id (``None`` when absent); the last result of an id wins."""
    status_by_id: dict[Any, Any] = {}

    def add(number: int, result: Any) -> None:
        if not isinstance(result, dict) or "scenario_id" not in result:
            raise ScoreInputError(f"http_results line {number}: not an object with 'scenario_id'")
        try:
            status_by_id[result["scenario_id"]] = result.get("status_code")
        except TypeError as e:
            raise _unusable_id(result["scenario_id"], f"http_results line {number}") from e

    _for_each_jsonl_value(lines, "http_results", add)
    return status_by_id


def _index_smtp_events(lines: Iterable[str]) -> _Events:
    """Group the accepted messages by ``scenario_id`` (``None`` when the event has none)."""
    events = _Events(first={}, repeated=set())

    def add(number: int, event: Any) -> None:
        if not isinstance(event, dict):
            raise ScoreInputError(f"smtp_events line {number}: not an object")
        scenario_id = event.get("scenario_id")
        try:
            if events.first.setdefault(scenario_id, event) is not event:
                events.repeated.add(scenario_id)
        except TypeError as e:
            raise _unusable_id(scenario_id, f"smtp_events line {number}") from e

    _for_each_jsonl_value(lines, "smtp_events", add)
    return events


def _tally(
    scenarios_by_id: dict[Any, dict[str, Any]], status_by_id: dict[Any, Any], events: _Events
) -> _Tally:
    """Count, in one pass over the scenarios, everything the four proportions need."""
    first_event, repeated = events
    valid = invalid = delivered = fields_matched = rejected = status_correct = 0
    with _PublishedRecursionHeadroom(_PUBLISHED_COMPARE_DEPTH):
        for scenario in scenarios_by_id.values():
            scenario_id = scenario["id"]
            try:
                is_valid = scenario["valid"]
            except KeyError as e:
                raise ScoreInputError(f"scenarios: {scenario_id!r} has no 'valid'") from e
            status = status_by_id.get(scenario_id)
            if is_valid:
                valid += 1
                status_correct += status in SUCCESS_STATUSES
                event = first_event.get(scenario_id)
                if event is not None and scenario_id not in repeated:
                    delivered += 1
                    for field in SCORED_FIELDS:
                        # A missing value counts as "" on both sides.
                        if (event.get(field) or "") == (scenario.get(field) or ""):
                            fields_matched += 1
            else:
                invalid += 1
                status_correct += status in CLIENT_ERROR_STATUSES
                rejected += scenario_id not in first_event
    return _Tally(
        scenarios=len(scenarios_by_id),
        valid=valid,
        invalid=invalid,
        delivered=delivered,
        fields_matched=fields_matched,
        rejected=rejected,
        status_correct=status_correct,
    )


def _proportion(part: int, whole: int) -> float:
    """``part / whole``, or 0.0 for an empty whole (an empty set proves nothing)."""
    return part / whole if whole else 0.0


def _report(tally: _Tally) -> dict[str, Any]:
    """The published report, key for key and in the published order."""
    configuration_errors = []
    if not tally.scenarios:
        configuration_errors.append("scenario set is empty")
    if not tally.valid:
        configuration_errors.append("scenario set has no valid cases")
    if not tally.invalid:
        configuration_errors.append("scenario set has no invalid cases")
    metrics = {
        "delivery": _proportion(tally.delivered, tally.valid),
        "field_fidelity": _proportion(tally.fields_matched, len(SCORED_FIELDS) * tally.valid),
        "negative_rejection": _proportion(tally.rejected, tally.invalid),
        "status_correctness": _proportion(tally.status_correct, tally.scenarios),
    }
    return {
        "scorer_scope": SCORER_SCOPE,
        **metrics,
        "configuration_errors": configuration_errors,
        # Pilot §7: scorer_pass means only that these four checks passed.
        "scorer_pass": all(m == 1.0 for m in metrics.values()) and not configuration_errors,
        # Pilot §7: null until all external result evidence is attached.
        "pilot_pass": None,
        "external_checks_required": list(EXTERNAL_CHECKS_REQUIRED),
    }


def score(scenarios: Any, http_lines: Iterable[str], smtp_lines: Iterable[str]) -> dict[str, Any]:
    """Score decoded scenarios against the lines of the HTTP results and SMTP events logs.

    ``scenarios`` is the decoded ``scenarios.json`` document; the lines may keep their ``\\n``
    and are consumed in order, HTTP results first.  Returns the report the published script
    prints.  Raises :class:`ScoreInputError` for input the published script cannot score.
    """
    with _cyclic_gc_paused():
        scenarios_by_id = _index_scenarios(scenarios)
        status_by_id = _index_http_results(http_lines)
        events = _index_smtp_events(smtp_lines)
        try:
            tally = _tally(scenarios_by_id, status_by_id, events)
        except RecursionError as e:  # field values nested about a thousand levels deep
            raise ScoreInputError(f"a field value is nested too deeply to compare ({e})") from e
    return _report(tally)


def _read_text(path: str | Path) -> str:
    """The file as text, read as the published script reads it: UTF-8, universal newlines."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ScoreInputError(f"cannot read {path}: {e}") from e


def read_scenarios(path: str | Path) -> Any:
    """The decoded scenarios document.  Raises :class:`ScoreInputError` when it is not JSON."""
    text = _read_text(path)
    with _cyclic_gc_paused(), _PublishedRecursionHeadroom(_PUBLISHED_DECODE_DEPTH):
        try:
            return _decode_json(text)
        except (ValueError, RecursionError) as e:
            raise ScoreInputError(f"{path}: not JSON ({e})") from e


def read_jsonl_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of a JSONL file without their line ends; the file is read on first use.

    Raises :class:`ScoreInputError` (when iterated) for a file that cannot be read as UTF-8.
    """
    yield from _read_text(path).split("\n")


def score_files(
    scenarios_path: str | Path, http_path: str | Path, smtp_path: str | Path
) -> dict[str, Any]:
    """Read the three files, in the published order, and score them.

    Raises :class:`ScoreInputError` for a file the published script cannot score.
    """
    # The logs are read lazily, so only one log's text is in memory at a time.
    return score(
        read_scenarios(scenarios_path), read_jsonl_lines(http_path), read_jsonl_lines(smtp_path)
    )


def render(report: dict[str, Any]) -> str:
    """The report as the published script prints it (``indent=2``, UTF-8 kept, final newline)."""
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scorer on ``argv``, the arguments without the program name (default: sys.argv).

    Returns the exit status: 0 after printing the report; 1 for a wrong number of arguments
    (with the published usage line on stderr) or for input that cannot be scored (one line on
    stderr, nothing on stdout).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        print(USAGE, file=sys.stderr)
        return 1
    try:
        report = score_files(*args)
    except ScoreInputError as e:
        print(f"score_logs.py: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    sys.stdout.write(render(report))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
