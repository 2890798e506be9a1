"""The mechanical layer of the blind verifier: citations, URLs and prices, no model.

Summary, "what catches fabrication instead": honesty made mechanical wherever the domain allows.
The draft is checked against the brief's closed citation set and, in a research run, against the
approved evidence set.  These findings are final: no model verdict can override them (a model
may add violations of the contracts only it can judge, never remove one of these).

Findings (a finding is a violation; absence is never one, so a draft citing nothing, or only
part of the set, passes; style, tone, length and quality are never judged):

* ``invented_citation`` - a citation whose (standard, part, number, subs) is not in the set
  and is not explained as an alteration, or that names no standard at all;
* ``altered_citation`` - a citation of the set reproduced wrongly: another edition; or a
  quoted requirement next to it that is not the approved wording; or a number that carries the
  approved wording of another citation of the set;
* ``unverifiable_citation`` - a reference whose members cannot be listed without the standard's
  table of contents (an open range "Article 15 et seq.", a chapter or title, a range across
  parents "5.9-6.2", a reversed range or one of more than 50 members; issue 13 item 1);
* ``url_off_evidence`` / ``price_off_evidence`` - a URL or price not in the evidence set (with
  no evidence set, every URL and price is off evidence).

Rules of detail, each documented in ``docs/verifier-inputs.md``:

* edition: a citation without an edition takes the set's edition of that standard when the set
  has exactly one; a written (or context-inherited) edition must be one the set approves;
* a citation that is an enclosing level of an approved one ("Article 32" when the set has
  "Article 32(1)(b)", "clause 9.2" when it has "clause 9.2.1") is approved;
* a quotation is text in "...", “...”, «...», „...“ or single smart quotes (possibly wrapped over
  lines, never over a paragraph break), or a markdown ``>`` block quote, of at least
  ``MIN_QUOTE_WORDS`` words (shorter quoted terms are not treated as reproductions of a
  requirement).  It belongs to the citations of its sentence, or (issue 13 item 3) to those of
  the sentence before when it follows as described in ``_quote_blame``.  It must equal an
  approved wording of a citation it belongs to, or be a contiguous run of at least
  ``MIN_QUOTE_WORDS`` of its words, compared after normalisation and whitespace folding (line
  breaks and ``>`` prefixes; ellipses at either end and closing punctuation are ignored, and
  the first letter's case).  Fuzzy matching only chooses the nearest wording shown
  in the message; it never accepts.  When the brief gives no wording, the quote is not checked.

Injection signals (``injection``) are recorded next to the findings and never change them
(spec 8.11, 9.4, 11.15).  Citations are parsed from the text with URLs blanked and look-alike
letters folded, so that neither a URL path nor a Cyrillic "A" (U+0410) hides or forges a citation.
No I/O.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from .citations import EU, FW, ISO, Citation, FoundCitation, find_citations
from .evidence import FoundPrice, FoundUrl, find_prices, find_urls, price_matches, url_matches
from .injection import InjectionSignal, find_injections, fold_confusables
from .inputs import Brief, Draft
from .normalise import Normalised, normalise

MIN_QUOTE_WORDS = 4
FINDING_KINDS = ("invented_citation", "altered_citation", "unverifiable_citation",
                 "url_off_evidence",
                 "price_off_evidence")
_QUOTE_TOKENS = re.compile("[\"“”«»„\u2018\u2019\n]")
_LSQUO, _RSQUO = "\u2018", "\u2019"  # single smart quotes; the right one is also an apostrophe
_CLOSERS = {'"': '"', "“": "”", "«": "»", "„": "“”", _LSQUO: _RSQUO}
_QUOTE_MARKS = re.compile("[\"“”«»„\u2018]")
# A sentence ends after a heading line or a line ending a quotation; before a blank line or a
# line opening markdown structure (block quote, heading, table row, list item); at .!? before
# white space and a capital or a mark.
_SENTENCE_END = re.compile(
    r"(?m)^[ \t]*#[^\n]*(\n)|(?<=[”»“\u2019\"])[.!?]?[ \t]*(\n)"
    r"|\n(?=[ \t]*(?:\n|>|#|\||[-*+][ \t]|\d{1,3}[.)][ \t]))"
    r"|[.!?](?=\s[\s>]*[A-Z\"“\u2018«„(\[#*\-])")
_BLOCK_QUOTE = re.compile(r"(?m)^[ \t]*>[^\n]*(?:\n[ \t]*>[^\n]*)*")
_BLOCK_PREFIX = re.compile(r"\n[ \t]*(?:>[ \t]*)*")
# How a block quote's attribution opens when it follows the quotation ("- Annex A 5.9").
_ATTRIBUTION_LEAD = re.compile(r"[\s\-*_(\[]*(?:(?:source|from|see|cf\.?|per)\b[\s:,]*)?",
                               re.IGNORECASE)
# A sentence that refers back to the citation of the sentence before ("It reads: ...").
_REFERS_BACK = re.compile(
    r"[\W_]*(?:it|its|this|that|these|they|which|(?:the|this|that|these|its|their)\s+"
    r"(?:control|clause|article|recital|paragraph|point|annex|requirement|provision|text|"
    r"wording|standard|regulation|directive|section|rule|obligation)s?)\b", re.IGNORECASE)
_ELLIPSIS = "….  \t"


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation: its kind, the exact text from the normalised draft, where, and why."""

    kind: str
    quote: str
    span: tuple[int, int]
    detail: str

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"kind": self.kind, "quote": self.quote, "span": list(self.span),
                "detail": self.detail}


@dataclass(frozen=True, slots=True)
class CitationStatus:
    """A citation found in the draft and what the check made of it."""

    citation: Citation
    quote: str
    span: tuple[int, int]
    status: str  # "approved" | "altered" | "invented" | "unverifiable"
    entry: str | None  # id of the brief entry it was matched to
    resolved_by: str

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"citation": str(self.citation), "quote": self.quote, "span": list(self.span),
                "status": self.status, "entry": self.entry, "resolved_by": self.resolved_by}


@dataclass(frozen=True, slots=True)
class EvidenceStatus:
    """A URL or price found in the draft, its canonical form and whether it is on evidence."""

    kind: str  # "url" | "price"
    quote: str
    span: tuple[int, int]
    canonical: str
    on_evidence: bool

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"kind": self.kind, "quote": self.quote, "span": list(self.span),
                "canonical": self.canonical,
                "status": "on_evidence" if self.on_evidence else "off_evidence"}


@dataclass(frozen=True, slots=True)
class MechanicalReport:
    """Everything the mechanical layer found in one draft.  ``passed`` iff no findings."""

    step: str
    findings: tuple[Finding, ...]
    citations: tuple[CitationStatus, ...]
    evidence: tuple[EvidenceStatus, ...]
    normalisation: Normalised
    injection: tuple[InjectionSignal, ...]

    @property
    def passed(self) -> bool:
        """True iff the draft has no mechanical finding."""
        return not self.findings

    def to_json(self) -> dict[str, object]:
        """A JSON-able dict for the ledger."""
        return {
            "step": self.step,
            "passed": self.passed,
            "findings": [f.to_json() for f in self.findings],
            "citations": [c.to_json() for c in self.citations],
            "evidence": [e.to_json() for e in self.evidence],
            "normalisation": self.normalisation.to_json(),
            "injection": [s.to_json() for s in self.injection],
        }


@dataclass(frozen=True, slots=True)
class _Entry:
    id: str
    citation: Citation
    wording: str | None  # normalised and whitespace-collapsed


@dataclass(frozen=True)
class _BriefIndex:
    entries: tuple[_Entry, ...]
    by_key: dict[tuple[object, ...], list[_Entry]]
    editions: dict[str, frozenset[str | None]]
    fallback: dict[str, str]
    standards: dict[str, tuple[str, ...]]
    urls: frozenset[str]
    prices: frozenset[tuple[str, Decimal]]
    worded: tuple[_Entry, ...] = field(default=())


def _collapse(text: str) -> str:
    return " ".join(normalise(text).text.split())


def _index(brief: Brief) -> _BriefIndex:
    entries = tuple(_Entry(c.id, c.canonical, _collapse(c.wording) if c.wording else None)
                    for c in brief.citations)
    by_key: dict[tuple[object, ...], list[_Entry]] = {}
    editions: dict[str, set[str | None]] = {}
    for e in entries:
        by_key.setdefault(e.citation.key, []).append(e)
        editions.setdefault(e.citation.standard, set()).add(e.citation.edition)
    standards = {k: tuple(sorted({e.citation.standard for e in entries if e.citation.kind == k}))
                 for k in (ISO, EU, FW)}
    return _BriefIndex(
        entries=entries,
        by_key=by_key,
        editions={s: frozenset(v) for s, v in editions.items()},
        fallback={k: v[0] for k, v in standards.items() if len(v) == 1},
        standards=standards,
        urls=frozenset(e.canonical_url for e in brief.evidence),
        prices=frozenset(p for e in brief.evidence for p in e.canonical_prices),
        worded=tuple(e for e in entries if e.wording),
    )


_CACHE: list[tuple[Brief, _BriefIndex]] = []


def _brief_index(brief: Brief) -> _BriefIndex:
    """The brief's index, kept for the last brief seen (a gate checks many drafts per brief)."""
    # One read of the entry: another thread may replace it between two reads (the service
    # checks drafts of several briefs at once), and a mismatched index would misjudge.
    entry = _CACHE[0] if _CACHE else None
    if entry is not None and entry[0] is brief:
        return entry[1]
    index = _index(brief)
    _CACHE[:] = [(brief, index)]
    return index


# -- quotations ---------------------------------------------------------------------------------

def find_quotes(text: str) -> list[tuple[int, int]]:
    """Spans of quoted text (inside the marks), in order.  Linear time.

    A quotation may wrap over lines (issue 13 item 3) but never crosses a paragraph break (a
    line that is blank, or only ``>``): an opener left open there is not a quotation.  A single
    smart quote (U+2018) opens only at the start of a word and not before a digit ("U+2018 90s"),
    and U+2019 closes only at the end of a word, so the apostrophes of "don't" and "it's" written
    with U+2019 are never marks.
    """
    quotes: list[tuple[int, int]] = []
    opener: tuple[str, int] | None = None
    line_start = 0
    n = len(text)
    for m in _QUOTE_TOKENS.finditer(text):
        c, p = m.group(), m.start()
        if c == "\n":
            if opener is not None and not text[line_start:p].strip(" \t>"):
                opener = None  # a paragraph break ends an unclosed quotation
            line_start = p + 1
        elif opener is None:
            if c in _CLOSERS and (c != _LSQUO or _opens_single(text, p, n)):
                opener = (c, p)
        elif c in _CLOSERS[opener[0]] and (c != _RSQUO or _closes_single(text, p, n)):
            quotes.append((opener[1] + 1, p))
            opener = None
    return quotes


def _opens_single(text: str, p: int, n: int) -> bool:
    before = text[p - 1] if p else " "
    after = text[p + 1] if p + 1 < n else " "
    return not before.isalnum() and not after.isspace() and not after.isdigit()


def _closes_single(text: str, p: int, n: int) -> bool:
    after = text[p + 1] if p + 1 < n else " "
    return not text[p - 1].isspace() and not after.isalnum()


def _block_quotes(text: str) -> list[tuple[int, int]]:
    """Spans of markdown ``>`` block quotes (from the first letter after ``>`` to the end of the
    last line) holding no quotation marks and no citation-like digits checked elsewhere."""
    if ">" not in text:
        return []
    spans = []
    for m in _BLOCK_QUOTE.finditer(text):
        body = m.group()
        if _QUOTE_MARKS.search(body):
            continue  # the marked quotation inside is read as such
        lead = len(body) - len(body.lstrip(" \t>"))
        spans.append((m.start() + lead, m.end()))
    return spans


def _fold(quote: str) -> str:
    """A quotation as one line: line breaks and the ``>`` prefixes of a block quote folded."""
    return _BLOCK_PREFIX.sub(" ", quote)


def _sentence_bounds(text: str, quotes: Sequence[tuple[int, int]]) -> list[int]:
    """Sorted positions where a sentence ends; none inside a quotation.

    A sentence ends at ``.``, ``!`` or ``?`` before white space and a capital (or a mark), at a
    paragraph break, before a line that starts markdown structure (``>``, ``#``, a list item, a
    table row), and after a heading or a line that ends with a closing quotation mark; a single
    line break inside prose does not end it, so a citation and its quotation wrapped over lines
    stay one sentence (issue 13 item 3).
    """
    starts = [q[0] for q in quotes]
    bounds = [0]
    for m in _SENTENCE_END.finditer(text):
        p = m.start(m.lastindex) if m.lastindex else m.start()
        i = bisect.bisect_right(starts, p) - 1
        if i >= 0 and quotes[i][0] <= p < quotes[i][1]:
            continue
        if text[bounds[-1]:p + 1].isspace():
            bounds[-1] = p + 1  # no empty sentences: a blank line joins the next one
        else:
            bounds.append(p + 1)
    bounds.append(len(text) + 1)
    return bounds


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(_ELLIPSIS).rstrip(",;:").strip(_ELLIPSIS)


def accepts(wording: str, quote: str) -> bool:
    """True if ``quote`` reproduces ``wording``: all of it, or >= MIN_QUOTE_WORDS contiguous words.

    Both are compared after whitespace collapsing; ellipses at either end, closing punctuation
    and the case of the first letter are ignored.  Nothing fuzzy.
    """
    w, q = _clean(wording), _clean(quote)
    if not q:
        return False
    variants = {q, q[0].swapcase() + q[1:]}
    if w in variants:
        return True
    if len(q.split()) < MIN_QUOTE_WORDS:
        return False
    for v in variants:
        start = w.find(v)
        while start != -1:
            end = start + len(v)
            if (start == 0 or not w[start - 1].isalnum()) and (
                end == len(w) or not w[end].isalnum()
            ):
                return True
            start = w.find(v, start + 1)
    return False


def _nearest_wording(index: _BriefIndex, quote: str) -> str:
    words = _clean(quote).split()
    best = max(index.worded, key=lambda e: difflib.SequenceMatcher(
        None, words, (e.wording or "").split(), autojunk=False).ratio())
    return f"nearest approved wording is {best.citation} ({best.id}): \u201c{best.wording}\u201d"


# -- citations ----------------------------------------------------------------------------------

def _lookup(index: _BriefIndex, c: Citation) -> list[_Entry]:
    exact = index.by_key.get(c.key)
    if exact:
        return exact
    return [e for e in index.entries if c.is_within(e.citation)]


def _with_edition(index: _BriefIndex, c: Citation) -> Citation:
    editions = index.editions.get(c.standard, frozenset())
    if c.edition is None and len(editions) == 1:
        (only,) = editions
        if only is not None:
            return Citation(c.standard, only, c.part, c.number, c.subs, c.annex)
    return c


def _quote_blame(text: str, index: _BriefIndex, found: Sequence[FoundCitation],
                 citations: Sequence[Citation]) -> dict[int, str]:
    """For each citation (by position in ``found``), why a quotation next to it is altered.

    A quotation belongs to the citations of its own sentence; failing those (issue 13 item 3),
    an inline quotation belongs to the citations of the sentence before when that sentence ends
    with ``:``, or its own sentence is only the quotation or opens with a reference back ("It",
    "This control", ...); a ``>`` block quote belongs to a citation written right before it (or
    a sentence ending with ``:``), else to one that opens the sentence right after it.
    """
    blame: dict[int, str] = {}
    if not found or not index.worded:
        return blame  # no wording to compare with: no quotation is checked
    inline = find_quotes(text)
    blocks = _block_quotes(text)
    if blocks and inline:
        ends = [q[1] for q in inline]
        blocks = [b for b in blocks if not _inside(inline, ends, b[0])]
    if not inline and not blocks:
        return blame
    quotes = sorted(inline + blocks)
    block_starts = {b[0] for b in blocks}
    bounds = _sentence_bounds(text, quotes)
    starts = [f.span[0] for f in found]

    def cited(lo: int, hi: int, qs: int, qe: int) -> list[int]:
        # The citations of text[lo:hi] outside the quotation, at most _NEAREST on each side of
        # it: a sentence with hundreds of citations and quotations stays linear.
        a, d = bisect.bisect_left(starts, lo), bisect.bisect_left(starts, hi)
        b, c = min(bisect.bisect_left(starts, qs), d), max(bisect.bisect_left(starts, qe), a)
        return [*range(max(a, b - _NEAREST), b), *range(c, min(d, c + _NEAREST))]

    for qs, qe in quotes:
        quote = _fold(text[qs:qe])
        if len(quote.split()) < MIN_QUOTE_WORDS:
            continue
        i = bisect.bisect_right(bounds, qs) - 1
        lo, hi = bounds[i], bounds[i + 1]
        is_block = qs in block_starts
        if is_block and bisect.bisect_left(starts, qs) < bisect.bisect_left(starts, qe):
            continue  # prose with its own citations, set off as a block: not a reproduction
        near = cited(lo, hi, qs, qe)
        if not near and i > 0:
            before = cited(bounds[i - 1], lo, qs, qe)
            if before and (_introduces(text, bounds[i - 1], lo) or (
                    _right_after(text, found[before[-1]].span[1], qs) if is_block
                    else _refers_back(text, lo, hi, qs, qe))):
                near = before
        if not near and is_block and i + 2 < len(bounds):
            after = cited(bounds[i + 1], bounds[i + 2], qs, qe)
            if after and _ATTRIBUTION_LEAD.fullmatch(text, bounds[i + 1],
                                                    found[after[0]].span[0]):
                near = after[:1]
        if not near:
            continue
        near.sort(key=lambda j: min(abs(found[j].span[1] - qs), abs(found[j].span[0] - qe)))
        matched = [e for e in index.worded if accepts(e.wording or "", quote)]
        cited_entries = [(j, e) for j in near for e in _lookup(index, citations[j]) if e.wording]
        if any(e in matched for _, e in cited_entries):
            continue
        if matched:
            j = near[0]
            blame.setdefault(j, f"the quoted requirement is the approved wording of "
                                f"{matched[0].citation} ({matched[0].id}), not of {citations[j]}")
        elif cited_entries:
            j, e = cited_entries[0]
            blame.setdefault(j, f"quoted wording \u201c{_clean(quote)}\u201d is not the approved "
                                f"wording of {e.citation} ({e.id}); "
                                f"{_nearest_wording(index, quote)}")
    return blame


#: How many citations on each side of a quotation it may belong to (the nearest ones).
_NEAREST = 8


def _inside(quotes: Sequence[tuple[int, int]], ends: Sequence[int], p: int) -> bool:
    k = bisect.bisect_right(ends, p)
    return k < len(quotes) and quotes[k][0] <= p


def _introduces(text: str, lo: int, hi: int) -> bool:
    """The sentence ``text[lo:hi]`` ends with a colon: it introduces what follows."""
    return text[lo:hi].rstrip(" \t\n>*_").endswith(":")


def _right_after(text: str, end: int, qs: int) -> bool:
    """Nothing but punctuation and markup between a citation's end and a block quote."""
    return not any(ch.isalnum() for ch in text[end:qs])


def _refers_back(text: str, lo: int, hi: int, qs: int, qe: int) -> bool:
    """The quotation's sentence is only the quotation, or opens with a reference back."""
    rest = text[lo:qs] + text[qe:hi]
    if not any(ch.isalnum() for ch in rest):
        return True
    return _REFERS_BACK.match(text, lo, qs) is not None


def _check_citations(text: str, index: _BriefIndex, found: Sequence[FoundCitation]
                     ) -> tuple[list[CitationStatus], list[Finding]]:
    citations = [_with_edition(index, f.citation) for f in found]
    blame = _quote_blame(text, index, found, citations)
    statuses: list[CitationStatus] = []
    findings: list[Finding] = []
    for j, (f, c) in enumerate(zip(found, citations, strict=True)):
        quote = text[f.span[0]:f.span[1]]
        entries = _lookup(index, c) if c.standard else []
        status, detail, entry_id = "approved", "", entries[0].id if entries else None
        if f.problem is not None:
            # Issue 13 item 1: a range that cannot be listed from the closed set fails closed.
            status, detail = "unverifiable", f"{' '.join(quote.split())}: {f.problem}"
        elif not c.standard:
            status = "invented"
            known = index.standards.get(c.kind, ())
            detail = (f"{c} names no standard and none can be inferred"
                      + (f" (the brief cites {', '.join(known)})" if known else ""))
        elif not entries:
            status = "altered" if j in blame else "invented"
            detail = blame.get(j, f"{c} is not in the brief's citation set")
        elif c.edition is not None and not any(e.citation.edition in (None, c.edition)
                                               for e in entries):
            status = "altered"
            approved = ", ".join(sorted({str(e.citation) for e in entries}))
            detail = f"{c} has edition {c.edition}; the brief approves {approved}"
        elif j in blame:
            status, detail = "altered", blame[j]
        statuses.append(CitationStatus(c, quote, f.span, status, entry_id, f.resolved_by))
        if status != "approved":
            findings.append(Finding(f"{status}_citation", quote, f.span, detail))
    return statuses, findings


# -- evidence -----------------------------------------------------------------------------------

def _check_urls(index: _BriefIndex, urls: Sequence[FoundUrl]
                ) -> tuple[list[EvidenceStatus], list[Finding]]:
    statuses: list[EvidenceStatus] = []
    findings: list[Finding] = []
    for u in urls:
        ok = u.canonical is not None and url_matches(u.canonical, index.urls)
        statuses.append(EvidenceStatus("url", u.raw, u.span, u.canonical or "", ok))
        if not ok:
            why = ("the run has no evidence set" if not index.urls
                   else "not in the approved evidence set")
            findings.append(Finding("url_off_evidence", u.raw, u.span,
                                    f"{u.canonical or u.raw} is {why}"))
    return statuses, findings


def _check_prices(index: _BriefIndex, brief: Brief, prices: Sequence[FoundPrice]
                  ) -> tuple[list[EvidenceStatus], list[Finding]]:
    # issue 13 item 5: currency, amount (multiplier applied) and a written unit must all agree
    # with one approved price; each end of a range is a price of its own
    approved = [a for e in brief.evidence for a in e.approved_prices]
    statuses: list[EvidenceStatus] = []
    findings: list[Finding] = []
    for p in prices:
        ok = price_matches(p, approved)
        shown = f"{p.currency} {p.amount}" + (f" per {p.unit}" if p.unit else "")
        statuses.append(EvidenceStatus("price", p.raw, p.span, shown, ok))
        if not ok:
            units = sorted({a.unit or "" for a in approved if p.unit and a.unit
                            and (a.currency, a.amount) == p.canonical})
            why = ("the run has no evidence set" if not index.prices and not index.urls
                   else f"approved only per {' or per '.join(units)}" if units
                   else "not a price in the approved evidence set")
            findings.append(Finding("price_off_evidence", p.raw, p.span, f"{shown} is {why}"))
    return statuses, findings


def _blank(text: str, spans: Sequence[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for s, e in spans:
        parts.append(text[last:s])
        parts.append(" " * (e - s))
        last = e
    parts.append(text[last:])
    return "".join(parts)


def check_draft(brief: Brief, draft: Draft) -> MechanicalReport:
    """Run the mechanical checks of one draft against its brief.

    Raises InputError if the draft's step is not a step of the brief; otherwise never raises.
    """
    brief.step(draft.step)
    index = _brief_index(brief)
    norm = normalise(draft.text)
    text = norm.text
    urls = find_urls(text)
    masked = _blank(text, [u.span for u in urls])
    found = find_citations(fold_confusables(masked), fallback=index.fallback,
                           frameworks=index.standards.get(FW, ()))
    statuses, findings = _check_citations(text, index, found)
    url_status, url_findings = _check_urls(index, urls)
    price_status, price_findings = _check_prices(index, brief, find_prices(masked))
    all_findings = findings + url_findings + price_findings
    all_findings.sort(key=lambda f: (f.span, f.kind))
    evidence = sorted(url_status + price_status, key=lambda e: e.span)
    return MechanicalReport(
        step=draft.step,
        findings=tuple(all_findings),
        citations=tuple(statuses),
        evidence=tuple(evidence),
        normalisation=norm,
        injection=find_injections(text, original=draft.text),
    )
