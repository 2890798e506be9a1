"""The citation parser: framework citations in a normalised draft, in one canonical form.

Security-critical core of the mechanical layer (summary "citations against a closed list"): a
citation the parser misses is a citation no check sees.  It knows *shapes*, never catalogues: it
does not know which clauses or articles exist, only how people write references to them.  A small
table of standard-name aliases (``ISO_STANDARDS``, ``EU_ACTS``, ``NAMED_ACTS``) maps spellings to
one canonical name; an ISO number or EU act that is not in the table still parses, under the
name as written.

Accepted shapes (each a citation; lists give one citation per member)::

    clause 9.2 | cl. 9.2 | § 9.2 | clauses 9.2 and 9.3 | sub-clause 9.2.1 | clause 6.1.3(d)
    Annex A 5.9 | Annex A.5.9 | Annex A control 5.9 | control A.5.9 | A.5.9 | A.8.1.1
    Article 32(1)(b) | Art. 32 (1) (b) | Articles 5 and 32 | Recital 39
    section 9.2 / sec. 9.2  -- only with a standard written right next to it
    ISO/IEC 27002:2022 5.9  -- a dotted number right after an ISO standard is a clause

A standard written right before ("ISO 27001:2022 §9.2", "GDPR Art. 32") or right after ("Art.
32(1)(b) GDPR", "clause 9.2 of ISO/IEC 27001:2022", "Article 32 of the GDPR") is explicit.

**Resolution rule for bare references** ("clause 9.2", "A.5.9", "Article 5"): the standard (and
its edition, if written) is the one named most recently before the reference in the text whose
kind fits (ISO-style standards take clauses and Annex controls, EU acts take articles and
recitals; "§" takes either); failing that, the caller's ``fallback`` for that kind (the mechanical
layer passes the brief's only standard of that kind); failing that the citation is *unresolved*
(standard ``""``), which the mechanical layer treats as invented.  "clause 4 of this policy"
and the like are references into the document itself and are not citations.

Every pattern is linear: bounded repetitions, no nested unbounded quantifiers, and lists are
parsed by a loop that always moves forward.  This module does no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass

ISO = "iso"
EU = "eu"
KINDS = (ISO, EU)
PARTS = {"clause": ISO, "annex": ISO, "article": EU, "recital": EU}

# ISO number -> (canonical name, what "control N" means for it).  Extend freely.
ISO_STANDARDS: dict[str, tuple[str, str]] = {
    "27001": ("ISO/IEC 27001", "annex"),
    "27002": ("ISO/IEC 27002", "clause"),  # in 27002 a control *is* a clause
    "27005": ("ISO/IEC 27005", "clause"),
    "27017": ("ISO/IEC 27017", "clause"),
    "27701": ("ISO/IEC 27701", "clause"),
    "42001": ("ISO/IEC 42001", "annex"),
    "9001": ("ISO 9001", "clause"),
    "14001": ("ISO 14001", "clause"),
    "22301": ("ISO 22301", "clause"),
}
# EU act number -> short canonical name.
EU_ACTS: dict[str, str] = {
    "2016/679": "GDPR",
    "2022/2555": "NIS2",
    "2022/2554": "DORA",
    "2024/1689": "EU AI Act",
}
# A spelled-out or short name (whitespace collapsed, as matched) -> canonical name.
NAMED_ACTS: dict[str, str] = {
    "GDPR": "GDPR",
    "RODO": "GDPR",
    "General Data Protection Regulation": "GDPR",
    "NIS2": "NIS2",
    "NIS 2": "NIS2",
    "NIS2 Directive": "NIS2",
    "NIS 2 Directive": "NIS2",
    "DORA": "DORA",
    "EU AI Act": "EU AI Act",
    "AI Act": "EU AI Act",
}

_STD = (
    r"(?P<iso>(?<![\w/])ISO(?P<iec>[ ]?/[ ]?IEC)?[ -]?(?P<isonum>\d{3,5}(?:-\d{1,2})?)(?!\d)"
    r"(?:[ ]?:[ ]?(?P<isoed>(?:19|20)\d\d)(?!\d))?)"
    r"|(?P<act>(?<!\w)(?P<acttype>Regulation|Directive)[ ]?\((?P<actorg>EU|EC)\)[ ]?(?:No\.?[ ])?"
    r"(?P<actnum>\d{1,4}/\d{1,4})(?!\d))"
    r"|(?P<named>(?<!\w)(?:GDPR|RODO|General[ ]Data[ ]Protection[ ]Regulation"
    r"|NIS[ ]?2(?:[ ]Directive)?|DORA|(?:EU[ ])?AI[ ]Act)(?!\w))"
)
# A shared (?<!\w) in front lets the engine skip mid-word positions before any alternative.
_STD_RE = re.compile(rf"(?<!\w)(?:{_STD})")
_ANCHOR_RE = re.compile(
    rf"(?<!\w)(?:{_STD}"
    r"|(?<!\.)(?i:(?P<kw>clauses?|sub-?clauses?|sections?|articles?|recitals?|annex|controls?)"
    r"(?!\w)|(?P<kwdot>cl|sec|arts?)\.)"
    r"|(?P<bare>(?<!\.)A\.(?=\d)))"
    r"|(?P<para>§§?)"
)
_SP = re.compile(r"[ \t]{0,3}")
_ISO_NUM = re.compile(r"(\d{1,2}(?:\.\d{1,3}){0,5})(?!\d)(?!\.\d)(?:[ ]?\(([a-z])\))?")
_ART_NUM = re.compile(r"(\d{1,3})(?!\d)(?![.,]\d)(?![A-Za-z])")
_ART_SUB = re.compile(r"[ ]?\([ ]?(\d{1,3}|[a-z]|[ivx]{2,5})[ ]?\)")
_SEP = re.compile(r"[ ]?,[ ]?(?:and[ ]|or[ ])?|[ ](?:and|or|&)[ ]")
_UNIT = re.compile(
    r"[ ]?(?:%|(?i:per[ ]?cent|days?|weeks?|months?|years?|hours?|minutes?|times|employees"
    r"|users|people|staff|items|assets|records)(?!\w))"
)
_ANNEX_HEAD = re.compile(
    r"[ ]?([A-Z])(?:\.|(?:[ ]?,)?[ ](?:(?i:controls?)[ ])?(?:[A-Z]\.)?)(?=\d)"
)
_LETTER_PREFIX = re.compile(r"[A-Z]\.")
_CONTROL_HEAD = re.compile(r"[ ]?(A\.)?(?=\d)")
_AFTER_STD_NUM = re.compile(r"[ ]?(?:,[ ])?(?=\d{1,2}\.\d)")
_SUFFIX = re.compile(r"[ ]?,?[ ]?\(?(?:(?i:of|in|under|from)[ ](?:(?i:the)[ ])?)?")
_SELF_REFERENCE = re.compile(
    r"[ ]?,?[ ]?(?i:of|in)[ ](?i:this|our|the|that)[ ](?i:document|policy|outline|contract"
    r"|agreement|procedure|plan|report|section|chapter|draft|charter|guide|handbook|manual"
    r"|brief|template|appendix)(?!\w)"
)
_NOT_ANNEX_CONTEXT = re.compile(
    r"(?i:appendix|table|figure|fig\.|exhibit|schedule|step|version|page)[ ]?$"
)
_PREFIX_GAP = re.compile(r"[ ,:(]{0,3}")


@dataclass(frozen=True, slots=True)
class Citation:
    """A framework citation in canonical form.  ``str()`` gives its one canonical spelling.

    ``standard`` is ``""`` for a reference that could not be attributed to any standard.
    ``annex`` is the annex letter when ``part == "annex"``, else None.
    """

    standard: str
    edition: str | None
    part: str
    number: str
    subs: tuple[str, ...] = ()
    annex: str | None = None

    @property
    def key(self) -> tuple[str, str, str | None, str, tuple[str, ...]]:
        """Everything but the edition: what must be in the closed set."""
        return (self.standard, self.part, self.annex, self.number, self.subs)

    @property
    def kind(self) -> str:
        """``"iso"`` for clause/annex citations, ``"eu"`` for articles and recitals."""
        return PARTS[self.part]

    def is_within(self, other: Citation) -> bool:
        """True if this citation is ``other`` or one of its enclosing levels.

        "Article 32" is within "Article 32(1)(b)"; "clause 9.2" is within "clause 9.2.1".
        """
        if (self.standard, self.part, self.annex) != (other.standard, other.part, other.annex):
            return False
        if self.number == other.number:
            return other.subs[: len(self.subs)] == self.subs
        return not self.subs and other.number.startswith(self.number + ".")

    def __str__(self) -> str:
        std = f"{self.standard}:{self.edition}" if self.edition else self.standard
        subs = "".join(f"({s})" for s in self.subs)
        label = {"clause": "clause", "article": "Article", "recital": "Recital"}.get(self.part)
        where = f"Annex {self.annex} {self.number}" if label is None else f"{label} {self.number}"
        return f"{std} {where}{subs}".strip()


@dataclass(frozen=True, slots=True)
class FoundCitation:
    """A citation found in a text: the canonical value, the raw text and where it is.

    ``resolved_by`` says where the standard came from: ``explicit`` (written next to it),
    ``context`` (named earlier in the text), ``fallback`` (the caller's default for the kind)
    or ``unresolved``.
    """

    citation: Citation
    raw: str
    span: tuple[int, int]
    resolved_by: str


@dataclass(frozen=True, slots=True)
class _Mention:
    start: int
    end: int
    standard: str
    edition: str | None
    kind: str
    control_part: str


@dataclass(frozen=True, slots=True)
class _Member:
    number: str
    subs: tuple[str, ...]
    start: int
    end: int


def _skip_space(text: str, pos: int) -> int:
    m = _SP.match(text, pos)
    return pos if m is None else m.end()


def _mention(m: re.Match[str]) -> _Mention:
    if m.group("iso"):
        num = m.group("isonum")
        name, control = ISO_STANDARDS.get(num, ("", "clause"))
        if not name:
            name = f"ISO/IEC {num}" if m.group("iec") else f"ISO {num}"
        return _Mention(m.start(), m.end(), name, m.group("isoed"), ISO, control)
    if m.group("act"):
        num = m.group("actnum")
        name = EU_ACTS.get(num) or f"{m.group('acttype')} ({m.group('actorg')}) {num}"
        return _Mention(m.start(), m.end(), name, None, EU, "article")
    name = NAMED_ACTS[" ".join(m.group("named").split())]
    return _Mention(m.start(), m.end(), name, None, EU, "article")


class _Scanner:
    """One pass over one text.  Holds the standard mentions for context resolution."""

    def __init__(self, text: str, fallback: Mapping[str, str]) -> None:
        self.text = text
        self.fallback = fallback
        self.mentions = [_mention(m) for m in _STD_RE.finditer(text)]
        self.by_start = {m.start: m for m in self.mentions}
        self.ends = {k: [m.end for m in self.mentions if m.kind == k] for k in KINDS}
        self.kind_mentions = {k: [m for m in self.mentions if m.kind == k] for k in KINDS}
        self.all_ends = [m.end for m in self.mentions]

    # -- numbers -----------------------------------------------------------------------------

    def iso_list(self, pos: int, *, need_dot: bool, letter_prefix: bool) -> list[_Member]:
        """``9.2``, ``9.2 and 9.3``, ``5.9, A.5.10 and 5.11``; empty if no number at ``pos``."""
        text = self.text
        m = _ISO_NUM.match(text, pos)
        if m is None or (need_dot and "." not in m.group(1)):
            return []
        dotted = "." in m.group(1)
        members = [_Member(m.group(1), (m.group(2),) if m.group(2) else (), m.start(), m.end())]
        while True:
            s = _SEP.match(text, members[-1].end)
            if s is None:
                break
            p = s.end()
            if letter_prefix and (lp := _LETTER_PREFIX.match(text, p)) is not None:
                p = lp.end()
            n = _ISO_NUM.match(text, p)
            if n is None or (dotted and "." not in n.group(1)) or _UNIT.match(text, n.end()):
                break
            members.append(_Member(n.group(1), (n.group(2),) if n.group(2) else (), p, n.end()))
        return members

    def art_member(self, pos: int, *, with_subs: bool) -> _Member | None:
        text = self.text
        m = _ART_NUM.match(text, pos)
        if m is None:
            return None
        subs: list[str] = []
        end = m.end()
        while with_subs and len(subs) < 6 and (s := _ART_SUB.match(text, end)) is not None:
            subs.append(s.group(1))
            end = s.end()
        return _Member(m.group(1), tuple(subs), pos, end)

    def art_list(self, pos: int, *, with_subs: bool) -> list[_Member]:
        first = self.art_member(pos, with_subs=with_subs)
        if first is None:
            return []
        members = [first]
        while (s := _SEP.match(self.text, members[-1].end)) is not None:
            n = self.art_member(s.end(), with_subs=with_subs)
            if n is None or _UNIT.match(self.text, n.end):
                break
            members.append(n)
        return members

    # -- standards ---------------------------------------------------------------------------

    def prefix(self, start: int) -> _Mention | None:
        """The mention written right before ``start`` (only spaces, ",", ":" or "(" between)."""
        # Mentions never overlap, so their order by start is also their order by end.
        i = bisect.bisect_right(self.all_ends, start) - 1
        if i < 0:
            return None
        m = self.mentions[i]
        gap = _PREFIX_GAP.fullmatch(self.text, m.end, start)
        return m if gap is not None else None

    def suffix(self, end: int) -> _Mention | None:
        s = _SUFFIX.match(self.text, end)
        return self.by_start.get(s.end()) if s is not None else None

    def context(self, start: int, kind: str | None) -> _Mention | None:
        """The most recent mention ending at or before ``start`` whose kind fits."""
        if kind is None:
            i = bisect.bisect_right(self.all_ends, start) - 1
            return self.mentions[i] if i >= 0 else None
        i = bisect.bisect_right(self.ends[kind], start) - 1
        return self.kind_mentions[kind][i] if i >= 0 else None

    # -- one reference -----------------------------------------------------------------------

    def emit(self, start: int, members: list[_Member], kind: str | None, part: str | None,
             letter: str | None, *, needs_standard: bool = False) -> list[FoundCitation]:
        """Resolve the standard for a list of members and build the citations.

        ``part`` None means "what 'control N' means for the standard"; ``kind`` None means
        either kind ("§").
        """
        text = self.text
        end = members[-1].end
        if _SELF_REFERENCE.match(text, end):
            return []
        pre = self.prefix(start)
        post = self.suffix(end)
        how = "explicit"
        std: _Mention | None = None
        if post is not None and (kind is None or post.kind == kind):
            std = post
        elif pre is not None and (kind is None or pre.kind == kind):
            std = pre
        elif needs_standard:
            return []
        else:
            std = self.context(start, kind)
            how = "context"
        standard, edition = ("", None) if std is None else (std.standard, std.edition)
        std_kind = kind if std is None else std.kind
        if std is None:
            if kind is not None and kind in self.fallback:
                standard, how = self.fallback[kind], "fallback"
            elif kind is None and len(self.fallback) == 1:
                std_kind, standard = next(iter(self.fallback.items()))
                how = "fallback"
            else:
                how = "unresolved"
        if part is None:  # "control N": the standard says what it means
            control = std.control_part if std is not None else "annex"
            if std is None and standard:
                control = next((c for n, c in ISO_STANDARDS.values() if n == standard), "clause")
            part, letter = (control, "A") if control == "annex" else ("clause", None)
        if part == "§":
            part = "article" if std_kind == EU else "clause"
        if PARTS[part] == EU and any("." in m.number for m in members):
            return []
        if std is not None and std.kind != PARTS[part]:
            standard, edition, how = "", None, "unresolved"
        out: list[FoundCitation] = []
        first = pre.start if pre is not None and std is pre else start
        for i, m in enumerate(members):
            s = first if i == 0 else m.start
            e = m.end
            if len(members) == 1 and post is not None and std is post:
                e = post.end
            c = Citation(standard, edition, part, m.number, m.subs,
                         letter if part == "annex" else None)
            out.append(FoundCitation(c, text[s:e], (s, e), how))
        return out

    def anchor(self, a: re.Match[str]) -> tuple[list[FoundCitation], int]:
        """Parse the reference starting at anchor ``a``: citations and where parsing ended."""
        text = self.text
        start = a.start()
        if a.group("kw") is not None or a.group("kwdot") is not None:
            word = (a.group("kw") or a.group("kwdot")).lower()
            pos = _skip_space(text, a.end())
            if word.startswith("annex"):
                head = _ANNEX_HEAD.match(text, a.end())
                if head is None:
                    return [], a.end()
                members = self.iso_list(head.end(), need_dot=False, letter_prefix=True)
                return self.done(start, members, ISO, "annex", head.group(1))
            if word.startswith("control"):
                head = _CONTROL_HEAD.match(text, a.end())
                if head is None:
                    return [], a.end()
                members = self.iso_list(head.end(), need_dot=True, letter_prefix=True)
                annex = head.group(1) is not None
                return self.done(start, members, ISO, "annex" if annex else None,
                                 "A" if annex else None)
            if word.startswith(("art", "recital")):
                is_article = word.startswith("art")
                members = self.art_list(pos, with_subs=is_article)
                return self.done(start, members, EU, "article" if is_article else "recital",
                                 None)
            members = self.iso_list(pos, need_dot=False, letter_prefix=False)
            return self.done(start, members, ISO, "clause", None,
                             needs_standard=word.startswith("sec"))
        if a.group("para") is not None:
            pos = _skip_space(text, a.end())
            members = self.iso_list(pos, need_dot=False, letter_prefix=False)
            # A dotted number is an ISO-style clause whatever was named last.
            kind = ISO if any("." in m.number for m in members) else None
            return self.done(start, members, kind, "§", None)
        if a.group("bare") is not None:
            if _NOT_ANNEX_CONTEXT.search(text, max(0, start - 12), start):
                return [], a.end()
            members = self.iso_list(a.end(), need_dot=True, letter_prefix=False)
            return self.done(start, members[:1], ISO, "annex", "A")
        # A standard: a dotted number right after it is a clause ("ISO/IEC 27002:2022 5.9").
        mention = self.by_start.get(start)
        after = _AFTER_STD_NUM.match(text, a.end())
        if mention is None or mention.kind != ISO or after is None:
            return [], a.end()
        members = self.iso_list(after.end(), need_dot=True, letter_prefix=False)
        return self.done(a.end(), members, ISO, "clause", None)

    def done(self, start: int, members: list[_Member], kind: str | None, part: str | None,
             letter: str | None, *, needs_standard: bool = False
             ) -> tuple[list[FoundCitation], int]:
        if not members:
            return [], start + 1
        found = self.emit(start, members, kind, part, letter, needs_standard=needs_standard)
        return found, members[-1].end

    def scan(self) -> tuple[FoundCitation, ...]:
        found: list[FoundCitation] = []
        consumed = 0
        for a in _ANCHOR_RE.finditer(self.text):
            if a.start() < consumed:
                continue
            citations, end = self.anchor(a)
            if citations:
                found.extend(citations)
                consumed = end
        return tuple(found)


def find_citations(text: str, *, fallback: Mapping[str, str] | None = None
                   ) -> tuple[FoundCitation, ...]:
    """Every citation in ``text`` (already normalised), in order.  Never raises.

    ``fallback`` maps a kind (``"iso"``, ``"eu"``) to the standard a bare reference of that kind
    resolves to when the text names none before it (see the module docstring).
    """
    return _Scanner(text, fallback or {}).scan()


def find_mentions(text: str) -> tuple[tuple[str, str | None, tuple[int, int]], ...]:
    """Every standard named in ``text``: (canonical name, edition or None, span)."""
    return tuple((m.standard, m.edition, (m.start, m.end))
                 for m in (_mention(x) for x in _STD_RE.finditer(text)))


def parse_citation(text: str) -> Citation:
    """Parse a text that is exactly one citation naming its standard, e.g. a brief entry.

    Raises ValueError (so that it can serve as a pydantic validator) when the text is not
    exactly one explicit citation.
    """
    stripped = text.strip().rstrip(".")
    found = find_citations(stripped)
    if not found:
        raise ValueError(f"not a citation: {text!r}")
    if len(found) > 1:
        raise ValueError(f"more than one citation in {text!r}")
    one = found[0]
    if one.resolved_by != "explicit":
        raise ValueError(f"citation names no standard: {text!r}")
    if one.span != (0, len(stripped)):
        raise ValueError(f"unexpected text around the citation in {text!r}")
    return one.citation
