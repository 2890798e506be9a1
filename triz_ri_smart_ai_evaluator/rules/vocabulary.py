"""The declared vocabularies that keep proxies and impressions out of a task class.

No I/O.  Spec 3.3 forbids rewarding a proxy instead of the result (length of the response, number
of steps, formatted sections, a confident tone, tools called, tests written without checking the
product, documents found without checking relevance, undefined "usefulness").  Spec 3.8, 7.6 and
11.12 forbid turning an impression into a measurement.  Each rule below is a family of spellings,
matched on text folded to lower case with punctuation, hyphens and underscores as spaces, so
``response_length``, "Response-length" and "length of the answer" are one proxy, not three.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Term(NamedTuple):
    """One forbidden family: what the spec calls it, and the pattern over folded text."""

    name: str
    pattern: re.Pattern[str]


def _term(name: str, pattern: str) -> Term:
    return Term(name, re.compile(pattern))


_TEXT = r"(response|answer|reply|output|completion|message|text|essay|report)s?"

#: spec 3.3: process and presentation characteristics that may not stand in for the result.
PROXY_TERMS: tuple[Term, ...] = (
    _term(
        "length of the response",
        rf"\b({_TEXT} (length|size)|length of (the |a )?{_TEXT}"
        r"|(word|token|character|char|line|sentence|paragraph) counts?"
        r"|(number|count|amount) of (words|tokens|characters|chars|lines|sentences|paragraphs)"
        r"|verbosity|long(er)? (answers|responses))\b",
    ),
    _term(
        "number of steps",
        r"\b((number|count|amount) of (steps|turns|actions|iterations|messages)"
        r"|(step|turn|action|iteration) counts?|steps taken)\b",
    ),
    _term(
        "number of formatted sections",
        r"\b((number|count) of (formatted )?(sections|headings|headers|bullets|bullet points"
        r"|tables|lists)|(section|heading|header|bullet) counts?|formatting( quality)?"
        r"|markdown (quality|structure))\b",
    ),
    _term(
        "a confident tone",
        r"\b(confident|confidence of (the )?tone|tone|assertive(ness)?|sounds? (sure|certain"
        r"|confident)|self reported confidence)\b",
    ),
    _term(
        "number of tools called",
        r"\b((number|count) of (tools?|tool calls|api calls|function calls|calls)"
        r"|tool (call|use|usage) counts?|tools? (called|used)|tool calls)\b",
    ),
    _term(
        "number of tests written without checking the product",
        r"\b((number|count) of (tests|test cases|unit tests) (written|added|created)"
        r"|tests (written|added|created)|test counts?)\b",
    ),
    _term(
        "number of documents found without checking relevance",
        r"\b((number|count) of (documents|docs|sources|results|citations|links|references)"
        r" (found|retrieved|returned|cited|listed)|documents (found|retrieved)"
        r"|(document|retrieval|citation|link) counts?)\b",
    ),
    _term(
        'subjective "usefulness"',
        r"\b(useful(ness)?|helpful(ness)?|perceived (quality|value))\b",
    ),
)

#: spec 3.8, 7.6, 11.12: words that say the "measurement" is somebody's impression.
IMPRESSION_TERMS: tuple[Term, ...] = (
    _term("impression", r"\b(impressions?|impressed)\b"),
    _term("subjective judgement", r"\b(subjective(ly)?|gut( feel(ing)?)?|intuition|instinct)\b"),
    _term("feeling", r"\b(feels?|feeling|felt|overall feeling|vibes?)\b"),
    _term("opinion", r"\b(opinions?|in (my|our|their) view|thinks?|believes?)\b"),
    _term("liking", r"\b(liked|likes|like it|likeable|likable|pleased|enjoy(ed|s)?)\b"),
    _term("appearance", r"\b(looks? (good|right|fine|nice|great|ok|okay)|seems? (good|right"
                        r"|fine|ok|okay)|appears? (good|right|fine))\b"),
    _term("rating by taste", r"\b(thumbs? (up|down)|star rating|rated by (feel|taste)"
                             r"|eyeball(ed|ing)?|at a glance)\b"),
)

_FOLD = re.compile(r"[^a-z0-9]+")


def fold(text: str) -> str:
    """Lower case, every run of punctuation, hyphens, underscores and spaces as one space."""
    return " " + _FOLD.sub(" ", text.lower()).strip() + " "


def find_term(text: str, terms: tuple[Term, ...]) -> Term | None:
    """The first term of ``terms`` that ``text`` uses, or None."""
    folded = fold(text)
    for term in terms:
        if term.pattern.search(folded):
            return term
    return None
