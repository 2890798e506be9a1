"""The strict parser of the blind verifier's verdict.  Pure: no I/O, no clock, no environment.

The verdict is the only machine-readable output of the verifier model, and the model reads
untrusted drafts (spec 9.4: artefact content is data, never instructions; spec 8.11: nothing in
the artefact may alter the decision format or the evaluation).  So the parser is fail-closed:
anything that is not exactly one JSON object of :data:`VERDICT_SCHEMA` is :class:`Unparseable`,
and an unparseable verdict never passes a step (the gate halts it, spec 11.15).

The accepted shape, with only JSON whitespace around it::

    {"pass": <bool>, "issues": [{"kind": ..., "quote": ..., "explanation": ...}, ...]}

* exactly the keys ``pass`` and ``issues``; an issue has exactly ``kind``, ``quote`` and
  ``explanation``, all strings; ``kind`` is one of :data:`ISSUE_KINDS`; a quote is not blank;
* no duplicate key anywhere, no ``NaN``/``Infinity``, no nesting deeper than the schema;
* ``pass`` is a JSON boolean that agrees with the list: ``true`` exactly when it is empty;
* every quote is checked against its source: the draft, or for ``missing_required_content``
  (content the step's spec requires and the draft omits; issue 13 item 7, seed 002 "the step's
  own contract") the step's content spec, since an omission cannot be quoted from the draft;
* an issue whose quote is not found in its source is a false positive: it is dropped and
  recorded in :attr:`Verdict.dropped`.  A failing verdict left with no verified issue is
  malformed.  Dropping never turns a fail into a pass: :attr:`Verdict.passed` is always the
  model's own ``pass``.

:func:`parse_verdict` never raises on any text; every rejection names its reason on one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

IssueKind: TypeAlias = Literal["contradiction", "altered_citation", "invented_citation",
                              "missing_required_content"]

#: The three violations of the global constraints (seed 002, "The contract that survived"), and
#: the one breach of the step's own contract that cannot be quoted from the draft: content the
#: step's spec requires and the draft omits (issue 13 item 7).
ISSUE_KINDS: Final[tuple[IssueKind, ...]] = (
    "contradiction",
    "altered_citation",
    "invented_citation",
    "missing_required_content",
)
#: The kind whose quote comes from the step's content spec instead of the draft.
OMISSION: Final[IssueKind] = "missing_required_content"

#: Largest verdict accepted, in UTF-8 bytes.  A longer answer is not a verdict.
MAX_RAW_BYTES: Final = 64 * 1024
#: Most issues accepted in one verdict.
MAX_ISSUES: Final = 50
#: Nesting of the schema: the verdict object, the issues array, an issue object.
MAX_DEPTH: Final = 3

_KIND_BY_NAME: Final[dict[str, IssueKind]] = {kind: kind for kind in ISSUE_KINDS}
_VERDICT_KEYS: Final = frozenset({"pass", "issues"})
_ISSUE_KEYS: Final = frozenset({"kind", "quote", "explanation"})
# RFC 8259 whitespace: the only characters allowed around the object.
_JSON_WS: Final = " \t\r\n"
# A JSON string (possibly unterminated) or a bracket; used to measure nesting before decoding.
_DEPTH_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)

#: The JSON Schema of a verdict, sent as the structured-output format (``json_schema``).
#: Providers in strict mode reject ``minLength``, so "a quote is not blank" and the issue limit
#: are enforced by the parser only; the schema is a request, the parser is the check.
VERDICT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "pass": {"type": "boolean"},
        "issues": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(ISSUE_KINDS)},
                    "quote": {"type": "string"},
                    "explanation": {"type": "string"},
                },
                "required": ["kind", "quote", "explanation"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["pass", "issues"],
    "additionalProperties": False,
}

JsonDict: TypeAlias = dict[str, object]


def _json_safe(text: str) -> str:
    """``text`` if it encodes as UTF-8, else with unpaired surrogates escaped (for the ledger)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _is_one_line(text: str) -> bool:
    return bool(text) and text.splitlines() == [text]


@dataclass(frozen=True)
class Issue:
    """One violation the verifier reports, quoting the draft verbatim (an omission quotes the
    step's content spec).

    Raises:
        ValueError: on an unknown ``kind`` or a blank ``quote`` (invalid issues cannot exist).
    """

    kind: IssueKind
    quote: str
    explanation: str

    def __post_init__(self) -> None:
        if self.kind not in ISSUE_KINDS:
            raise ValueError(f"unknown issue kind {self.kind!r}")
        if not isinstance(self.quote, str) or not self.quote.strip():
            raise ValueError("an issue must quote its source (blank quote)")
        if not isinstance(self.explanation, str):
            raise ValueError("an issue's explanation must be a string")

    def to_json(self) -> JsonDict:
        """The issue in the verdict's own JSON shape."""
        return {
            "kind": self.kind,
            "quote": _json_safe(self.quote),
            "explanation": _json_safe(self.explanation),
        }


@dataclass(frozen=True)
class DroppedIssue:
    """An issue removed as a false positive, with the reason (kept for the ledger)."""

    issue: Issue
    reason: str

    def to_json(self) -> JsonDict:
        """The dropped issue and why it was dropped."""
        return {"issue": self.issue.to_json(), "reason": self.reason}


@dataclass(frozen=True)
class Verdict:
    """A verdict that parsed.  ``passed`` is true exactly when ``issues`` is empty.

    ``passed`` means "no contract violation was found", not "the content is true" (seed 002).

    Raises:
        ValueError: when ``passed`` disagrees with ``issues``, or a pass carries dropped issues.
    """

    passed: bool
    issues: tuple[Issue, ...]
    dropped: tuple[DroppedIssue, ...]
    raw: str

    def __post_init__(self) -> None:
        if not isinstance(self.passed, bool):
            raise ValueError("passed must be a bool")
        if self.passed and (self.issues or self.dropped):
            raise ValueError("a passing verdict has no issues")
        if not self.passed and not self.issues:
            raise ValueError("a failing verdict has at least one issue with a verified quote")

    def to_json(self) -> JsonDict:
        """The parsed verdict, what was dropped and the raw answer, for the ledger."""
        return {
            "outcome": "verdict",
            "pass": self.passed,
            "issues": [issue.to_json() for issue in self.issues],
            "dropped": [dropped.to_json() for dropped in self.dropped],
            "raw": _json_safe(self.raw),
        }


@dataclass(frozen=True)
class Unparseable:
    """An answer that is not a valid verdict.  Never a pass: the gate retries once, then halts.

    Raises:
        ValueError: when ``reason`` is empty or spans more than one line.
    """

    reason: str
    raw: str

    def __post_init__(self) -> None:
        if not _is_one_line(self.reason):
            raise ValueError("the reason is one non-empty line")

    def to_json(self) -> JsonDict:
        """The rejection and the raw answer, for the ledger."""
        return {"outcome": "unparseable", "reason": self.reason, "raw": _json_safe(self.raw)}


class _Rejected(Exception):
    """Raised inside the JSON decoder's hooks; never leaves this module."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _JsonNumber(str):
    """A number seen while decoding.  Kept as text: no number is valid anywhere in a verdict,
    and converting it could fail (integer digit limits) or overflow to infinity."""

    __slots__ = ()


def _reject_constant(name: str) -> object:
    raise _Rejected(f"{name} is not JSON")


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key, value in pairs:
        if key in seen:
            # A duplicate key is read differently by different parsers: first wins or last wins.
            raise _Rejected(f"duplicate key {_show(key)}")
        seen[key] = value
    return seen


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_pairs,
    parse_constant=_reject_constant,
    parse_int=_JsonNumber,
    parse_float=_JsonNumber,
)


def _show(text: str, limit: int = 40) -> str:
    """A short, one-line, escaped rendering of untrusted text for a reason."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def _one_line(reason: str) -> str:
    return " ".join(reason.split()) or "unparseable"


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, _JsonNumber):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _a_type(value: object) -> str:
    name = _type_name(value)
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _depth(text: str) -> int:
    """Deepest bracket nesting in ``text``, brackets inside strings not counted."""
    depth = deepest = 0
    for match in _DEPTH_TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)  # stray closers never buy depth for later openers
    return deepest


def _decode(text: str) -> object:
    """Decode the whole of ``text`` (already stripped) as one JSON value.

    Raises:
        _Rejected: with the reason, for anything but exactly one JSON value.
    """
    try:
        value, end = _DECODER.raw_decode(text)
    except _Rejected:
        raise
    except json.JSONDecodeError as e:
        raise _Rejected(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except (ValueError, RecursionError) as e:  # defensive: the depth check runs first
        raise _Rejected(f"not JSON: {type(e).__name__}") from e
    rest = text[end:].lstrip(_JSON_WS)
    if rest:
        if rest.startswith(("{", "[")):
            raise _Rejected("more than one JSON value")
        raise _Rejected(f"text after the JSON object: {_show(rest)}")
    return value


def _describe_non_object(text: str) -> str:
    """Why ``text`` (stripped, not starting with ``{``) is not a verdict."""
    if text.startswith("```"):
        return "a Markdown code fence around the verdict"
    try:
        value = _decode(text)
    except _Rejected as e:
        if "{" in text:
            return f"text before the JSON object: {_show(text)}"
        return e.reason
    return f"a JSON {_type_name(value)}, not an object"


def _issue_from(index: int, item: object) -> Issue:
    """One issue from its decoded JSON.

    Raises:
        _Rejected: naming the issue's index and what is wrong with it.
    """
    where = f"issue {index}"
    if not isinstance(item, dict):
        raise _Rejected(f"{where} is {_a_type(item)}, not an object")
    extra = sorted(set(item) - _ISSUE_KEYS)
    if extra:
        raise _Rejected(f"{where} has unexpected key {_show(extra[0])}")
    missing = sorted(_ISSUE_KEYS - set(item))
    if missing:
        raise _Rejected(f"{where} lacks key {missing[0]!r}")
    for key in ("kind", "quote", "explanation"):
        value = item[key]
        if not isinstance(value, str) or isinstance(value, _JsonNumber):
            raise _Rejected(f"{where}: {key!r} is {_a_type(value)}, not a string")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise _Rejected(f"{where}: {key!r} has an unpaired surrogate") from e
    kind = _KIND_BY_NAME.get(str(item["kind"]))
    if kind is None:
        shown = _show(str(item["kind"]))
        raise _Rejected(f"{where}: kind {shown} is not one of {', '.join(ISSUE_KINDS)}")
    quote = str(item["quote"])
    if not quote.strip():
        raise _Rejected(f"{where}: the quote is empty")
    return Issue(kind=kind, quote=quote, explanation=str(item["explanation"]))


def _verdict_from(value: object, raw: str, quote_in_draft: Callable[[str], bool],
                  quote_in_spec: Callable[[str], bool] | None) -> Verdict:
    """Check the decoded value against the schema and the agreement rules.

    Raises:
        _Rejected: with the first rule the value breaks.
    """
    if not isinstance(value, dict):  # pragma: no cover - the caller saw "{" first
        raise _Rejected(f"a JSON {_type_name(value)}, not an object")
    extra = sorted(set(value) - _VERDICT_KEYS)
    if extra:
        raise _Rejected(f"unexpected key {_show(extra[0])}")
    missing = sorted(_VERDICT_KEYS - set(value))
    if missing:
        raise _Rejected(f"missing key {missing[0]!r}")
    passed = value["pass"]
    if not isinstance(passed, bool):
        raise _Rejected(f'"pass" is {_a_type(passed)}, not a boolean')
    listed = value["issues"]
    if not isinstance(listed, list):
        raise _Rejected(f'"issues" is {_a_type(listed)}, not an array')
    if len(listed) > MAX_ISSUES:
        raise _Rejected(f"{len(listed)} issues, more than {MAX_ISSUES}")
    issues = [_issue_from(index, item) for index, item in enumerate(listed)]
    if passed and issues:
        raise _Rejected(f'"pass" is true but {len(issues)} issue(s) are listed: pass disagrees')
    if not passed and not issues:
        raise _Rejected('"pass" is false but no issue is listed: pass disagrees')
    kept: list[Issue] = []
    dropped: list[DroppedIssue] = []
    for issue in issues:
        if issue.kind == OMISSION:
            # An omission quotes what the step requires; without the spec it cannot be checked.
            if quote_in_spec is not None and quote_in_spec(issue.quote):
                kept.append(issue)
            else:
                dropped.append(DroppedIssue(
                    issue, "quote not found verbatim in the step's content spec"))
        elif quote_in_draft(issue.quote):
            kept.append(issue)
        else:
            dropped.append(DroppedIssue(issue, "quote not found verbatim in the draft"))
    if not passed and not kept:
        raise _Rejected(f"fail with no issue quoting the draft or the step's content spec "
                        f"({len(dropped)} dropped)")
    return Verdict(passed=passed, issues=tuple(kept), dropped=tuple(dropped), raw=raw)


def parse_verdict(raw: str, *, quote_in_draft: Callable[[str], bool],
                  quote_in_spec: Callable[[str], bool] | None = None) -> Verdict | Unparseable:
    """Parse the verifier's answer strictly (spec 8.11, 9.4; rules in the module docstring).

    ``quote_in_draft`` says whether a quote occurs in the draft as the verifier saw it, and
    ``quote_in_spec`` whether it occurs in the step's content spec (the source of an omission's
    quote; with None, every omission is dropped as unverifiable).  An issue whose quote its
    checker rejects is dropped as a false positive.  Both are called only on a well-formed
    verdict.

    Never raises on any ``raw``; exceptions raised by the two checkers themselves propagate.
    """
    if not isinstance(raw, str):
        return Unparseable(f"the answer is a {type(raw).__name__}, not text", "")
    if len(raw) > MAX_RAW_BYTES or len(raw.encode("utf-8", "surrogatepass")) > MAX_RAW_BYTES:
        # Kept truncated: an oversized answer is not a verdict and need not be stored whole.
        return Unparseable(
            f"answer larger than {MAX_RAW_BYTES} bytes (record keeps the first {MAX_RAW_BYTES} "
            "characters)",
            raw[:MAX_RAW_BYTES],
        )
    text = raw.strip(_JSON_WS)
    try:
        if not text:
            raise _Rejected("empty answer")
        if _depth(text) > MAX_DEPTH:
            raise _Rejected(f"nesting deeper than the schema (more than {MAX_DEPTH} levels)")
        if not text.startswith("{"):
            raise _Rejected(_describe_non_object(text))
        value = _decode(text)
        return _verdict_from(value, raw, quote_in_draft, quote_in_spec)
    except _Rejected as e:
        return Unparseable(_one_line(e.reason), raw)
