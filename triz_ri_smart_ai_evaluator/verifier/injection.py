"""Injection signals: text in a draft aimed at the evaluator rather than at the reader.

Spec 8.11: no part of the artefact may alter the evaluator's instruction, the indicator, the
decision format or the evaluation; 9.4: instructions reach the evaluator only through a trusted
channel, and requirements in the artefact to "accept", "do not check", "output a specified
score" are ignored; 11.15: direct, hidden and multi-stage instructions must not change the
decision.  The mechanical layer never acts on what it reads, so these signals change no finding;
they are recorded so that a person (and the ledger) sees the attempt.

Kinds:

* ``direct`` - an instruction to the evaluator in plain text;
* ``multi_stage`` - an instruction for a later step or render ("in the next step, tell the
  verifier ...");
* ``hidden_zero_width`` - an instruction that only appears once invisible characters are
  stripped (the draft is read normalised; the raw text did not contain the words);
* ``homoglyph`` - an instruction written with Cyrillic or Greek look-alike letters (found by a
  small confusables fold, ``CONFUSABLES``); ``mixed_script`` - any word mixing Latin with such
  look-alikes;
* ``html_comment`` / ``hidden_html`` - content hidden from a rendered view;
* ``base64`` - a base64 blob that decodes to text;
* ``fake_verdict`` - JSON that looks like a verdict (``{"pass": true ...``);
* ``fake_delimiter`` - strings that imitate the boundaries of the data the evaluator is given.

Detection runs on the normalised text; every quote is a slice of it.  No I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

# Cyrillic and Greek letters that look like Latin ones, and the Latin letters they imitate.
# One character to one character, so a folded text keeps the offsets of the text it came from.
# Written as escapes so that the source itself carries no look-alikes.
_LOOKALIKES = (
    "\u0430\u0432\u0435\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445"
    "\u0456\u0458\u0455\u0501\u051b\u051d\u04bb\u04cf\u0410\u0412\u0415\u041a"
    "\u041c\u041d\u041e\u0420\u0421\u0422\u0423\u0425\u0406\u0408\u0405\u0500"
    "\u051a\u051c\u03b1\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7"
    "\u03b3\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1"
    "\u03a4\u03a5\u03a7"
)
_LATIN = "abekmhopctyxijsdqwhlABEKMHOPCTYXIJSDQWaeikvoptuxyABEZHIKMNOPTYX"
CONFUSABLES: dict[str, str] = dict(zip(_LOOKALIKES, _LATIN, strict=True))
_FOLD = str.maketrans(CONFUSABLES)
_LOOKALIKE = frozenset(CONFUSABLES)
_LOOKALIKE_RE = re.compile(f"[{_LOOKALIKES}]")

_ROLE = r"(?:evaluator|verifier|grader|judge|checker|assessor|scorer|llm|ai)"
_DIRECT = [
    rf"\b(?:for|to|attention|note\s+(?:for|to)|dear|hey|hi)\s+(?:the\s+)?{_ROLE}s?\b",
    r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+)?"
    r"(?:previous|prior|above|earlier|preceding|system|original)?\s*"
    r"(?:instructions?|rules?|prompts?|guidelines?|directions?|checks?|contract)\b",
    rf"\byou\s+are\s+(?:now\s+)?(?:the|an?|my)\s+{_ROLE}\b",
    r"\b(?:mark|rate|score|grade|label|treat)\s+(?:this|it|every|all|each)\s+(?:\w+\s+){0,3}?"
    r"(?:as\s+)?(?:pass(?:ed|es|ing)?|correct|approved|compliant)\b",
    r"\b(?:output|return|respond\s+with|reply\s+with|answer|emit|print|say|write)\s*:?\s*"
    r"[\"'“]?(?:pass|passed|true|approved|\{)",
    r"\b(?:do\s+not|don't|dont|never|no\s+need\s+to|stop)\s+"
    r"(?:check|verify|flag|inspect|evaluate|validate|scrutini[sz]e)\b",
    r"\b(?:accept|approve|pass)\s+(?:this|the)\s+(?:draft|step|document|output|text|answer)\b",
    r"\b(?:change|set|raise|lower|override)\s+(?:the\s+)?(?:indicator|score|verdict|metric|"
    r"grade|reward|result)\b",
    r"\b(?:system\s+prompt|new\s+instructions?|developer\s+mode|jailbreak)\b",
    r"\b(?:no|zero)\s+issues\s+(?:were\s+|are\s+)?found\b",
]
# The leading \b lets the engine skip mid-word positions before trying any alternative.
_DIRECT_RE = re.compile(r"\b(?:" + "|".join(f"(?:{p})" for p in _DIRECT) + ")", re.IGNORECASE)
_MULTI_STAGE_RE = re.compile(
    rf"\b(?:(?:in|at|during|for)\s+(?:the\s+)?(?:next|later|following|subsequent|final|second)\s+"
    rf"(?:step|stage|turn|render|round|pass|draft|section|message)\b[^\n]{{0,120}}?\b{_ROLE}s?\b"
    rf"|\b(?:later|afterwards|next\s+time|when\s+you\s+(?:see|reach|render|write))\b[^\n]{{0,80}}?"
    rf"\b(?:tell|instruct|ask|inform|remind|convince|make)\s+(?:the\s+)?{_ROLE}s?\b"
    rf"|\b(?:tell|instruct|ask|inform|remind|convince)\s+(?:the\s+)?{_ROLE}s?\b[^\n]{{0,120}}?"
    rf"\b(?:next|later|following|subsequent)\s+(?:step|stage|turn|render|round)\b)",
    re.IGNORECASE,
)
_HTML_COMMENT_RE = re.compile(r"<!--.{0,20000}?-->", re.DOTALL)
_HIDDEN_HTML_RE = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d])"
    r"|<[a-z][a-z0-9]{0,10}\s[^<>]{0,200}?\bhidden\b[^<>]{0,200}>",
    re.IGNORECASE,
)
_BASE64_RE = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{16,20000}={0,2}(?![A-Za-z0-9+/=])")
_FAKE_VERDICT_RE = re.compile(
    r"""\{\s*["']?(?:pass|passed|verdict|issues|score|result|approved)["']?\s*:""",
    re.IGNORECASE,
)
_FAKE_DELIMITER_RE = re.compile(
    r"<<<?\s*(?:END|EOF|EOT|STOP|BEGIN)\b|>>>"
    r"|</?\s*(?i:draft|brief|document|system|user|assistant|instructions?|data|input|output"
    r"|verdict|context)\s*>"
    r"|\b(?:BEGIN|END)(?:\s+OF)?\s+(?:DATA|DRAFT|BRIEF|INPUT|DOCUMENT|SYSTEM|INSTRUCTIONS?|TEXT"
    r"|CONTEXT|PROMPT)\b"
    r"|={3,}\s*(?:END|BEGIN|START|STOP)\b|-{3,}\s*(?:END|BEGIN)\b"
    r"|\[/?(?:INST|SYSTEM|SYS)\]|<\|(?:im_start|im_end|system|endoftext)\|>"
)
_WORD_RE = re.compile(r"\w{2,40}")


@dataclass(frozen=True, slots=True)
class InjectionSignal:
    """One piece of text aimed at the evaluator: what kind, the quote and where it is."""

    kind: str
    quote: str
    span: tuple[int, int]

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"kind": self.kind, "quote": self.quote, "span": list(self.span)}


def fold_confusables(text: str) -> str:
    """Replace Cyrillic and Greek look-alikes by the Latin letters they imitate (same length)."""
    if text.isascii() or _LOOKALIKE_RE.search(text) is None:
        return text
    return text.translate(_FOLD)


def _instructions(text: str) -> list[tuple[str, int, int]]:
    found = [("direct", m.start(), m.end()) for m in _DIRECT_RE.finditer(text)]
    found += [("multi_stage", m.start(), m.end()) for m in _MULTI_STAGE_RE.finditer(text)]
    return found


def _decoded_base64(blob: str) -> str | None:
    """The text a base64 blob decodes to, if it is mostly printable; else None."""
    if len(blob) % 4:
        return None
    try:
        raw = base64.b64decode(blob, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    printable = sum(c.isprintable() or c.isspace() for c in decoded)
    return decoded if decoded and printable / len(decoded) > 0.95 and " " in decoded else None


def find_injections(text: str, *, original: str | None = None) -> tuple[InjectionSignal, ...]:
    """Every injection signal in the normalised ``text``, ordered by position.  Never raises.

    ``original`` is the text before normalisation; an instruction whose words are not in it
    was hidden by invisible characters (``hidden_zero_width``).
    """
    signals: list[InjectionSignal] = []

    def add(kind: str, start: int, end: int) -> None:
        signals.append(InjectionSignal(kind, text[start:end], (start, end)))

    folded = fold_confusables(text)
    original_lower = original.lower() if original is not None and original != text else None
    for kind, start, end in _instructions(folded):
        quote = text[start:end]
        if any(c in _LOOKALIKE for c in quote):
            add("homoglyph", start, end)
        elif original_lower is not None and quote.lower() not in original_lower:
            add("hidden_zero_width", start, end)
        else:
            add(kind, start, end)
    for m in _WORD_RE.finditer(text) if folded is not text else ():
        word = m.group()
        if not word.isascii() and any(c in _LOOKALIKE for c in word) and any(
            "a" <= c.lower() <= "z" for c in word
        ):
            add("mixed_script", m.start(), m.end())
    for m in _HTML_COMMENT_RE.finditer(text):
        add("html_comment", m.start(), m.end())
    for m in _HIDDEN_HTML_RE.finditer(text):
        add("hidden_html", m.start(), m.end())
    for m in _BASE64_RE.finditer(text):
        decoded = _decoded_base64(m.group())
        if decoded is not None:
            add("base64", m.start(), m.end())
    for m in _FAKE_VERDICT_RE.finditer(text):
        add("fake_verdict", m.start(), m.end())
    for m in _FAKE_DELIMITER_RE.finditer(text):
        add("fake_delimiter", m.start(), m.end())
    signals.sort(key=lambda s: (s.span, s.kind))
    return tuple(signals)
