"""The citation parser: framework citations in a normalised draft, in one canonical form.

Security-critical core of the mechanical layer (summary "citations against a closed list"): a
citation the parser misses is a citation no check sees.  It knows *shapes*, never catalogues: it
does not know which clauses or articles exist, only how people write references to them.  Small
tables of standard-name aliases (``ISO_STANDARDS``, ``EU_ACTS``, ``NAMED_ACTS``) map spellings to
one canonical name; an ISO number or EU act that is not in the table still parses, under the
name as written.  Other frameworks (NIST SP 800-53, NIST CSF, SOC 2, PCI DSS, ...) come from the
data file ``standards.yaml`` (issue 13 item 4), read once (see ``load_standards``).

Accepted shapes (each a citation; lists and closed ranges give one citation per member)::

    clause 9.2 | cl. 9.2 | § 9.2 | clauses 9.2 and 9.3 | sub-clause 9.2.1 | clause 6.1.3(d)
    Annex A 5.9 | Annex A.5.9 | Annex A control 5.9 | control A.5.9 | A.5.9 | A.8.1.1
    Article 32(1)(b) | Art. 32 (1) (b) | Art 33 | Articles 5 and 32 | Recital 39 | Article XXXIII
    Article 32, paragraph 2 | paragraph 1, point (d) of Article 33 | Article 5.1(e) | Article 33.1
    Art. 33 Abs. 1 lit. d DSGVO | article 33, paragraphe 1, point d) du RGPD | art. 33 ust. 1
    Annex A 5.9-5.11 | 5.9 to 5.15 | 5.9/5.12 | as well as 5.12 | Articles 12 to 22
    32(1)(b)-(d) | 32(1)(b) and (d) | Points (b) and (c) of Article 32(1)
    NIST SP 800-53 Rev. 5 CM-8 | AC-2(1) | NIST CSF 2.0 ID.AM-01 | SOC 2 CC6.1 | HIPAA § 164.312
    section 9.2 / sec. 9.2  -- only with a standard written right next to it
    ISO/IEC 27002:2022 5.9  -- a dotted number right after an ISO standard is a clause

A standard written right before ("ISO 27001:2022 §9.2", "GDPR Art. 32") or right after ("Art.
32(1)(b) GDPR", "clause 9.2 of ISO/IEC 27001:2022", "article 33 du RGPD") is explicit.

**Ranges** (issue 13 item 1): a closed range is expanded into its members when only the last
component varies ("5.9-5.11" is 5.9, 5.10, 5.11; "32(1)(b)-(d)" is (b), (c), (d)).  A range
that cannot be expanded without the standard's table of contents ("5.9-6.2"), a reversed one, one
of more than ``MAX_RANGE`` members, and an open one ("Article 15 et seq.", "ff.", "Chapter III",
"Title II", "Section 2 of Chapter IV") is found with a ``problem``: the mechanical layer reports
it as ``unverifiable_citation`` (it fails closed; it is never passed).

**Reading** (issue 13 items 2 and 3): citations are read from a view of the text in which runs
of whitespace and markdown markup (``*``, ``_``, backticks, a ``>`` at a line start) are one
space and Arabic-Indic digits are ASCII (NFKC already folds full-width ones); spans and raw text
always point into the text given.

**Resolution rule for bare references** ("clause 9.2", "A.5.9", "Article 5"): the standard (and
its edition, if written) is the one named most recently before the reference in the text whose
kind fits (ISO-style standards take clauses and Annex controls, EU acts take articles and
recitals; "§" takes either); failing that, the caller's ``fallback`` for that kind (the mechanical
layer passes the brief's only standard of that kind); failing that the citation is *unresolved*
(standard ``""``), which the mechanical layer treats as invented.  A bare control id of another
framework ("CM-8") takes the most recent standard named whose shapes fit it, else the caller's
``frameworks`` standard whose shapes fit it, else the standard its shape alone identifies
("ID.AM-01" is NIST CSF), else (after a keyword such as "control") it is unresolved.  "clause 4
of this policy" and the like are references into the document itself and are not citations.

Every pattern is linear: bounded repetitions, no nested unbounded quantifiers, and lists are
parsed by a loop that always moves forward.  The shapes in ``standards.yaml`` are checked to use
bounded repetitions only.  Parsing does no I/O; ``load_standards`` reads the packaged table once.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from triz_ri_smart_ai_evaluator._safe_read import parse_yaml
from triz_ri_smart_ai_evaluator.errors import InputError

ISO = "iso"
EU = "eu"
FW = "fw"  # another framework: an entry of standards.yaml, or a generic "<body> ... section N"
KINDS = (ISO, EU, FW)
PARTS = {"clause": ISO, "annex": ISO, "article": EU, "recital": EU, "chapter": EU, "title": EU,
         "control": FW, "section": FW}
#: The most members a closed range may expand into (issue 13 item 1); a larger one is reported.
MAX_RANGE = 50

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
# A spelled-out, short or national name (as matched, whitespace collapsed) -> canonical name.
# Issue 13 item 2: the common national names of the GDPR and NIS2.
NAMED_ACTS: dict[str, str] = {
    "GDPR": "GDPR",
    "RODO": "GDPR",
    "DSGVO": "GDPR",
    "DS-GVO": "GDPR",
    "RGPD": "GDPR",
    "AVG": "GDPR",
    "General Data Protection Regulation": "GDPR",
    "Datenschutz-Grundverordnung": "GDPR",
    "NIS2": "NIS2",
    "NIS 2": "NIS2",
    "NIS-2": "NIS2",
    "NIS2 Directive": "NIS2",
    "NIS 2 Directive": "NIS2",
    "NIS2-Richtlinie": "NIS2",
    "NIS-2-Richtlinie": "NIS2",
    "DORA": "DORA",
    "EU AI Act": "EU AI Act",
    "AI Act": "EU AI Act",
}


def _alternation(names: Collection[str]) -> str:
    """Literal names as one alternation factored by common prefixes (a trie), longer first.

    The engine tries the branches of an alternation one by one at every word start; a trie
    tries one branch per first letter, which keeps a long table of names cheap to scan.
    """
    def build(words: list[str]) -> str:
        heads: dict[str, list[str]] = {}
        ends = False
        for w in words:
            if w:
                heads.setdefault(w[0], []).append(w[1:])
            else:
                ends = True
        alts = [("[ ]" if c == " " else re.escape(c)) + build(rest)
                for c, rest in sorted(heads.items())]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if ends:
            return f"(?:{body})?"
        return body

    return build(sorted(set(names))) or "(?!)"


# -- the standards table (issue 13 item 4) ------------------------------------------------------

_SHAPE_TOKEN = re.compile(
    r"\\[dDwW.\-()\[\]/]|\[[^\[\]\\]{1,40}\]|\[\\d\]|\(\?:|[)|?]|\{\d{1,2}(?:,\d{1,2})?\}"
    r"|[A-Za-z0-9 \-/:#§.]"
)
_BARE = ("shape", "context", "never")
_NAME_START = re.compile(r"[A-Z0-9]")
# The words that open a reference (matched in any case).  Issue 13 item 2: national forms.
_KEYWORDS = (
    "clause", "clauses", "sub-clause", "sub-clauses", "subclause", "subclauses", "section",
    "sections", "article", "articles", "recital", "recitals", "annex", "control", "controls",
    "artikel", "artículo", "artículos", "articulo", "articulos", "articolo", "articoli",
    "artykuł", "chapter", "chapters", "title", "titles", "kapitel", "chapitre",
)
_LEVEL_WORDS = (
    "paragraph", "paragraphs", "para.", "paras.", "subparagraph", "subparagraphs",
    "sub-paragraph", "sub-paragraphs", "point", "points", "letter", "letters", "subpoint",
    "subpoints", "sub-point", "sub-points", "indent", "indents",
)


@dataclass(frozen=True, slots=True)
class Shape:
    """One shape of a framework's control ids (a bounded regex), and how a lone id counts."""

    pattern: str
    regex: re.Pattern[str]
    subs: bool
    bare: str


@dataclass(frozen=True, slots=True)
class Standard:
    """A framework of ``standards.yaml``: its name, aliases, edition grammar and id shapes."""

    name: str
    aliases: tuple[str, ...]
    edition_markers: tuple[str, ...]
    edition_format: str
    shapes: tuple[Shape, ...]

    def accepts(self, control_id: str) -> Shape | None:
        """The shape ``control_id`` has in this standard, if any."""
        return next((s for s in self.shapes if s.regex.fullmatch(control_id)), None)


@dataclass(frozen=True, slots=True)
class StandardsTable:
    """The parsed ``standards.yaml``: frameworks, id keywords, generic bodies and keywords."""

    standards: tuple[Standard, ...]
    keywords: tuple[str, ...]
    generic_bodies: tuple[str, ...]
    generic_keywords: tuple[str, ...]


def _shape_regex(pattern: str, where: str) -> re.Pattern[str]:
    pos = 0
    while pos < len(pattern):
        m = _SHAPE_TOKEN.match(pattern, pos)
        if m is None:
            raise InputError(f"{where}: not allowed in a shape at {pos}: {pattern[pos:pos + 10]!r}"
                             " (literals, [...], (?:...), | and bounded repetition only)")
        pos = m.end()
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise InputError(f"{where}: {e}") from e
    if regex.fullmatch("") is not None:
        raise InputError(f"{where}: the shape matches the empty string")
    return regex


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise InputError(f"{where}: must be a non-empty list of non-empty strings")
    return tuple(value)


def load_standards(text: str, *, where: str = "standards.yaml") -> StandardsTable:
    """Parse a standards table (the format of the packaged ``standards.yaml``).  No I/O.

    Raises InputError (one line naming ``where`` and the field) if the table is malformed or a
    shape is not a bounded pattern.
    """
    doc = parse_yaml(text, where=where)
    if not isinstance(doc, dict) or doc.get("format") != "triz-standards/1":
        raise InputError(f"{where}: format: must be triz-standards/1")
    unknown = set(doc) - {"format", "standards", "keywords", "generic"}
    if unknown:
        raise InputError(f"{where}: unknown fields {sorted(unknown)}")
    standards: list[Standard] = []
    for i, entry in enumerate(doc.get("standards") or []):
        at = f"{where}: standards[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "aliases", "edition", "shapes"}:
            raise InputError(f"{at}: must be a mapping of name, aliases, edition, shapes")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{at}.name: must be a non-empty string")
        aliases = tuple(dict.fromkeys((name, *_strings(entry.get("aliases", [name]),
                                                        f"{at}.aliases"))))
        if not all(_NAME_START.match(a) for a in aliases):
            raise InputError(f"{at}.aliases: each must start with a capital letter or a digit")
        edition = entry.get("edition") or {}
        if not isinstance(edition, dict) or set(edition) - {"markers", "format"}:
            raise InputError(f"{at}.edition: must be a mapping of markers and format")
        markers = tuple(edition.get("markers", ()))
        if not all(isinstance(m, str) and len(m) <= 12 for m in markers):
            raise InputError(f"{at}.edition.markers: must be short strings")
        fmt = edition.get("format", "{}")
        if not isinstance(fmt, str) or fmt.count("{}") != 1:
            raise InputError(f"{at}.edition.format: must contain one {{}}")
        shapes: list[Shape] = []
        for j, s in enumerate(entry.get("shapes") or []):
            sat = f"{at}.shapes[{j}]"
            if not isinstance(s, dict) or set(s) - {"pattern", "subs", "bare"}:
                raise InputError(f"{sat}: must be a mapping of pattern, subs, bare")
            pattern, bare = s.get("pattern"), s.get("bare", "never")
            if not isinstance(pattern, str) or len(pattern) > 200:
                raise InputError(f"{sat}.pattern: must be a string of at most 200 characters")
            if bare not in _BARE:
                raise InputError(f"{sat}.bare: must be one of {', '.join(_BARE)}")
            shapes.append(Shape(pattern, _shape_regex(pattern, f"{sat}.pattern"),
                                bool(s.get("subs", False)), bare))
        if not shapes:
            raise InputError(f"{at}.shapes: at least one shape")
        standards.append(Standard(name, aliases, markers, fmt, tuple(shapes)))
    generic = doc.get("generic") or {}
    if not isinstance(generic, dict) or set(generic) - {"bodies", "keywords"}:
        raise InputError(f"{where}: generic: must be a mapping of bodies and keywords")
    if not all(_NAME_START.match(b) for b in generic.get("bodies", ["NIST"])):
        raise InputError(f"{where}: generic.bodies: each must start with a capital or a digit")
    return StandardsTable(
        standards=tuple(standards),
        keywords=_strings(doc.get("keywords", ["control"]), f"{where}: keywords"),
        generic_bodies=_strings(generic.get("bodies", ["NIST"]), f"{where}: generic.bodies"),
        generic_keywords=_strings(generic.get("keywords", ["section"]),
                                  f"{where}: generic.keywords"),
    )


@functools.cache
def default_standards() -> StandardsTable:
    """The packaged ``standards.yaml``, read and validated once per process."""
    text = resources.files(__package__).joinpath("standards.yaml").read_text("utf-8")
    return load_standards(text)


# -- patterns -----------------------------------------------------------------------------------

_ISO_STD = (
    r"(?P<iso>(?<![\w/])ISO(?P<iec>[ ]?/[ ]?IEC)?[ -]?(?P<isonum>\d{3,5}(?:-\d{1,2})?)(?!\d)"
    r"(?:[ ]?:[ ]?(?P<isoed>(?:19|20)\d\d)(?!\d))?)"
    r"|(?P<act>(?<!\w)(?P<acttype>Regulation|Directive)[ ]?\((?P<actorg>EU|EC)\)[ ]?(?:No\.?[ ])?"
    r"(?P<actnum>\d{1,4}/\d{1,4})(?!\d))"
    rf"|(?P<named>(?<!\w)(?:{_alternation(NAMED_ACTS)})(?!\w))"
)
_SP = re.compile(r"[ \t]{0,3}")
_ISO_NUM = re.compile(r"(\d{1,2}(?:\.\d{1,3}){0,5})(?!\d)(?!\.\d)(?:[ ]?\(([a-z])\))?")
# Issue 13 item 2: "Article 5.1(e)" and "Article 33.1" give paragraphs 1.
_ART_NUM = re.compile(r"(\d{1,3})(?!\d)(?:\.(\d{1,2})(?!\d)(?:\.(\d{1,2})(?!\d))?)?"
                      r"(?![.,]\d)(?![A-Za-z])")
_ROMAN = re.compile(r"(?=[IVXLC])(C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3}))(?![\w])")
_ART_SUB = re.compile(r"[ ]?\([ ]?(\d{1,3}|[a-z]|[ivx]{2,5})[ ]?\)")
_SUB_ONLY = re.compile(r"\([ ]?(\d{1,3}|[a-z]|[ivx]{2,5})[ ]?\)")
# Issue 13 item 2: the long and national forms of the levels below an article.
_PARA_TRAIL = re.compile(
    r"(?:[ ]?,)?[ ](?i:paragraphs?|paras?\.?|paragraphe|absatz|abs\.|ust\.|apartado|paragrafo"
    r"|lid)[ ]?\(?(\d{1,2})\)?(?!\d)(?![.,]\d)(?!\w)"
)
_POINT_TRAIL = re.compile(
    r"(?:[ ]?,)?[ ](?i:points?|letters?|lit\.|buchst\.|buchstabe|lettera|letra|litera|onder|pkt\.?"
    r"|sub-?points?|indents?)[ ]?(?:\(([a-z]|[ivx]{1,5}|\d{1,2})\)|([a-z]|[ivx]{1,5}|\d{1,2})\)?)"
    r"(?![\w(])"
)
_SEP = re.compile(
    r"[ ]?,[ ]?(?:and[ ]|or[ ]|und[ ]|et[ ])?|[ ]?/[ ]?"
    r"|[ ](?:and|or|&|and/or|as[ ]well[ ]as|plus|und|sowie|et|oraz|ou)[ ]"
)
# Issue 13 item 1: a closed range between two members.
_RANGE = re.compile(r"[ ]?-[ ]?|[ ](?i:to|through|thru|bis|à)[ ]")
# Issue 13 item 1: an open range; "f." (German: and the next one) is closed.
_OPEN = re.compile(r"[ ]?,?[ ]?(?:(?P<next>f\.)|et[ ]seq\.?|et[ ]sqq\.?|ff\.?|and[ ]following"
                   r"|and[ ]the[ ]following|et[ ]suiv\.?|i[ ]nast\.?|y[ ]ss\.?|onwards)(?!\w)")
_UNIT = re.compile(
    r"[ ]?(?:%|(?i:per[ ]?cent|days?|weeks?|months?|years?|hours?|minutes?|times|employees"
    r"|users|people|staff|items|assets|records|million|thousand|pages|offices)(?!\w))"
)
_ANNEX_HEAD = re.compile(
    r"[ ]?([A-Z])(?:\.|(?:[ ]?,)?[ ](?:(?i:controls?)[ ])?(?:[A-Z]\.)?)(?=\d)"
)
_LETTER_PREFIX = re.compile(r"[A-Z]\.")
_CONTROL_HEAD = re.compile(r"[ ]?(A\.)?(?=\d)")
_AFTER_STD_NUM = re.compile(r"[ ]?(?:,[ ])?(?=\d{1,2}\.\d)")
_SUFFIX = re.compile(
    r"[ ]?,?[ ]?\(?(?:(?i:of|in|under|from|du|de[ ]la|des|del|della|der|van[ ]de)[ ]"
    r"(?:(?i:the)[ ])?)?"
)
_SELF_REFERENCE = re.compile(
    r"[ ]?,?[ ]?(?i:of|in)[ ](?i:this|our|the|that)[ ](?i:document|policy|outline|contract"
    r"|agreement|procedure|plan|report|section|chapter|draft|charter|guide|handbook|manual"
    r"|brief|template|appendix)(?!\w)"
)
_NOT_ANNEX_CONTEXT = re.compile(
    r"(?i:appendix|table|figure|fig\.|exhibit|schedule|step|version|page)[ ]?$"
)
_PREFIX_GAP = re.compile(r"[ ,:(]{0,3}")
# Issue 13 item 2: "paragraph 1, point (d) of Article 33": the levels come before the article.
_LEVEL_HEAD = re.compile(
    r"(?:(?P<para>(?i:paragraphs?|paras?\.|sub-?paragraphs?))|(?P<point>(?i:points?|letters?"
    r"|sub-?points?|indents?)))[ ]?"
)
_LEVEL_VALUE = re.compile(r"\(?(\d{1,2}|[a-z]|[ivx]{2,5})\)(?![\w(])|(\d{1,2})(?![\w.(])")
_LEVEL_JOIN = re.compile(r"[ ]?,[ ]?|[ ](?i:of)[ ](?:(?i:the)[ ])?")
_ARTICLE_WORD = re.compile(r"(?i:articles?|arts?\.|artikel|article)[ ]?")
_RECITAL_WORD = re.compile(r"(?i:recitals?)[ ]?")
_CHAPTER_NUM = re.compile(r"[ ]?(?:(\d{1,2})(?![\w]|\.\d)|(?=[IVXLC])(C{0,3}(?:XC|XL|L?X{0,3})"
                          r"(?:IX|IV|V?I{0,3}))(?![\w]))")
_SECTION_OF = re.compile(r"(?i:sections?)[ ]\d{1,2}[ ](?i:of)[ ]$")
_FW_ID_GAP = re.compile(r"[ ]?[,:]?[ ]?")
_ID_AFTER = re.compile(r"[ ,:]{1,3}(?:[A-Z]{0,3}\d|[A-Za-z]{3,12}\.?[ ]?[A-Z]{0,3}\d)")
_GENERIC_ID = re.compile(r"(?:[A-Z]{1,4}[ ]?)?\d{1,4}(?:[.-]\d{1,4}){0,4}(?:\.[a-z])?"
                         r"(?![\w-]|\.\w)")

# Issue 13 items 2 and 3: Arabic-Indic and extended Arabic-Indic digits read as ASCII (NFKC
# leaves them alone; it already folds full-width ones).
_DIGITS = {cp: str(d) for base in (0x0660, 0x06F0) for d, cp in enumerate(range(base, base + 10))}
_ARABIC_DIGIT = re.compile("[\u0660-\u0669\u06f0-\u06f9]")
# One character class first, so that the engine skips plain text fast.  (normalise() has
# already folded the odd spaces to " ".)
_LAYOUT = re.compile("[\t\n\r\f\v\x1c-\x1f\x85\u2028\u2029*_`> ]{2,}"
                     "|[\t\n\r\f\v\x1c-\x1f\x85\u2028\u2029*_`>]")


def _roman(numeral: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
    total = 0
    for i, c in enumerate(numeral):
        v = values[c]
        total += -v if i + 1 < len(numeral) and values[numeral[i + 1]] > v else v
    return total


def _roman_sub(value: str) -> int | None:
    m = re.fullmatch(r"(?=[ivx])(x{0,3})(ix|iv|v?i{0,3})", value)
    return _roman(value.upper()) if m is not None else None


def _to_roman_sub(n: int) -> str:
    out = ""
    for v, s in ((10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while n >= v:
            out, n = out + s, n - v
    return out


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
        """``"iso"`` for clause/annex, ``"eu"`` for articles and recitals, ``"fw"`` else."""
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
        subs = "".join(f"({s})" for s in self.subs)
        if self.kind == FW:
            kw = " section" if self.part == "section" else ""
            name = f"{self.standard} {self.edition}" if self.edition else self.standard
            return f"{name}{kw} {self.number}{subs}".strip()
        std = f"{self.standard}:{self.edition}" if self.edition else self.standard
        label = {"clause": "clause", "article": "Article", "recital": "Recital",
                 "chapter": "Chapter", "title": "Title"}.get(self.part)
        where = f"Annex {self.annex} {self.number}" if label is None else f"{label} {self.number}"
        return f"{std} {where}{subs}".strip()


@dataclass(frozen=True, slots=True)
class FoundCitation:
    """A citation found in a text: the canonical value, the raw text and where it is.

    ``resolved_by`` says where the standard came from: ``explicit`` (written next to it),
    ``context`` (named earlier in the text), ``fallback`` (the caller's default for the kind),
    ``shape`` (a control id only one framework uses) or ``unresolved``.  ``problem`` is set
    when the reference cannot be checked against a closed set without the standard's table of
    contents (an open, reversed, too large or cross-parent range, a chapter or title; issue 13
    item 1): then ``citation`` is its first member and the reference fails closed.
    """

    citation: Citation
    raw: str
    span: tuple[int, int]
    resolved_by: str
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class _Mention:
    start: int
    end: int
    standard: str
    edition: str | None
    kind: str
    control_part: str
    spec: Standard | None = None


@dataclass(frozen=True, slots=True)
class _Member:
    number: str
    subs: tuple[str, ...]
    start: int
    end: int
    problem: str | None = None


@dataclass(frozen=True)
class _Grammar:
    """The patterns that depend on the standards table, compiled once per table."""

    table: StandardsTable
    std_re: re.Pattern[str]
    anchor_re: re.Pattern[str]
    by_alias: dict[str, Standard]
    editions: dict[str, re.Pattern[str]]
    fw_keyword: re.Pattern[str]
    generic_keyword: re.Pattern[str]


@functools.lru_cache(maxsize=4)
def _grammar(table: StandardsTable) -> _Grammar:
    by_alias = {a: s for s in table.standards for a in s.aliases}
    gkw = _alternation([k for k in table.generic_keywords if k != "§"])
    designator = (r"[ ](?!(?:ISO|IEC)(?![\w])|(?i:" + gkw + r")(?![\w]))"
                  r"(?:[A-Z][A-Za-z0-9]{0,11}(?:-[A-Za-z0-9]{1,6}){0,2}"
                  r"|\d{1,5}(?:[-.:]\d{1,4}){0,2}[A-Za-z]?)")
    std = (_ISO_STD
           + rf"|(?P<fw>(?<!\w)(?:{_alternation(by_alias)})(?![\w]))"
           + rf"|(?P<gen>(?<!\w)(?:{_alternation(table.generic_bodies)})(?:{designator}){{0,3}}"
           r"(?![\w]))")
    fwkw = _alternation([k for k in table.keywords if k not in ("control", "controls",
                                                                 "section", "sections", "sec.",
                                                                 "§")])
    bare_shapes = [s.pattern for st in table.standards for s in st.shapes
                   if s.bare != "never"]
    fwtok = "|".join(f"(?:{p})" for p in bare_shapes) or "(?!)"
    kw = _alternation(_KEYWORDS)
    level = _alternation(_LEVEL_WORDS)
    # Names of standards and bare ids start with a capital or a digit: the guard spares the
    # engine their branches at the start of every other word.
    anchor = (
        rf"(?<!\w)(?:(?=[A-Z0-9])(?:{std}"
        r"|(?P<bare>(?<!\.)A\.(?=\d))"
        rf"|(?P<fwtok>(?<![.-])(?:{fwtok})(?![\w-]|\.\d)))"
        rf"|(?<!\.)(?i:(?P<kw>{kw})(?!\w)|(?P<kwdot>cl|sec|arts?)\.|(?P<kwart>arts?)(?=[ ]\d))"
        rf"|(?P<fwkw>(?i:{fwkw}))(?![\w])"
        rf"|(?P<level>(?i:{level})[ ]?(?=\(?(?:\d{{1,2}}|[a-z]|[ivx]{{2,5}})\)?[ ,])))"
        r"|(?P<para>§§?)"
    )
    editions = {}
    for s in table.standards:
        if s.edition_markers:
            markers = "|".join(re.escape(m) for m in sorted(s.edition_markers, key=len,
                                                             reverse=True))
            editions[s.name] = re.compile(
                rf"[ ]?,?[ ]?(?:{markers})(\d{{1,2}}(?:\.\d{{1,2}}){{0,2}})(?![\w-]|\.\d)")
    kw_all = _alternation(table.keywords)
    return _Grammar(
        table=table,
        std_re=re.compile(rf"(?<!\w)(?:{std})"),
        anchor_re=re.compile(anchor),
        by_alias=by_alias,
        editions=editions,
        fw_keyword=re.compile(rf"(?i:{kw_all})(?![\w])[ ]?"),
        generic_keyword=re.compile(rf"[ ]?,?[ ]?(?i:{_alternation(table.generic_keywords)})"
                                   r"(?![\w])[ ]?"),
    )


@functools.cache
def _default_grammar() -> _Grammar:
    return _grammar(default_standards())


def _skip_space(text: str, pos: int) -> int:
    m = _SP.match(text, pos)
    return pos if m is None else m.end()


def _mention(g: _Grammar, m: re.Match[str], text: str) -> _Mention:
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
    if m.group("named"):
        name = NAMED_ACTS[" ".join(m.group("named").split())]
        return _Mention(m.start(), m.end(), name, None, EU, "article")
    if m.group("fw"):
        spec = g.by_alias[" ".join(m.group("fw").split())]
        end, edition = m.end(), None
        ed_re = g.editions.get(spec.name)
        e = ed_re.match(text, end) if ed_re is not None else None
        if e is not None:
            # A bare edition ("NIST CSF 2.0") must not be the first id of a standard whose ids
            # are numbers ("PCI DSS 8.3.1"): there it counts only when an id or keyword follows.
            bare = e.group().lstrip(" ,")[:1].isdigit()
            numeric_ids = any(s.pattern.startswith("\\d") for s in spec.shapes)
            if not (bare and numeric_ids) or _ID_AFTER.match(text, e.end()):
                end, edition = e.end(), spec.edition_format.format(e.group(1))
        return _Mention(m.start(), end, spec.name, edition, FW, "control", spec)
    return _Mention(m.start(), m.end(), " ".join(m.group("gen").split()), None, FW, "section")


def _expand_dotted(lo: str, hi: str) -> tuple[list[str], str | None]:
    """Issue 13 item 1: "5.9"-"5.11" -> 5.9, 5.10, 5.11; only the last component may vary."""
    a, b = lo.split("."), hi.split(".")
    if len(a) != len(b) or a[:-1] != b[:-1]:
        return [], (f"the range {lo}-{hi} crosses parents; its members cannot be listed "
                    "without the standard's table of contents")
    x, y = int(a[-1]), int(b[-1])
    return _bounded(lo, hi, [".".join([*a[:-1], str(i)]) for i in range(x, y + 1)], x, y)


def _bounded(lo: str, hi: str, members: list[str], x: int, y: int
             ) -> tuple[list[str], str | None]:
    if y < x:
        return [], f"the range {lo}-{hi} is reversed"
    if y - x + 1 > MAX_RANGE:
        return [], f"the range {lo}-{hi} has {y - x + 1} members (more than {MAX_RANGE})"
    return members, None


def _expand_sub(lo: str, hi: str) -> tuple[list[str], str | None]:
    """(b)-(d) -> b, c, d; (i)-(iii) -> i, ii, iii; (1)-(3) -> 1, 2, 3."""
    if lo.isdigit() and hi.isdigit():
        x, y = int(lo), int(hi)
        return _bounded(lo, hi, [str(i) for i in range(x, y + 1)], x, y)
    rlo, rhi = _roman_sub(lo), _roman_sub(hi)
    if rlo is not None and rhi is not None and (len(lo) > 1 or len(hi) > 1 or lo + hi in (
            "iv", "ix", "vx", "ii")):
        return _bounded(lo, hi, [_to_roman_sub(i) for i in range(rlo, rhi + 1)], rlo, rhi)
    if len(lo) == 1 and len(hi) == 1 and lo.isalpha() and hi.isalpha():
        x, y = ord(lo), ord(hi)
        return _bounded(lo, hi, [chr(i) for i in range(x, y + 1)], x, y)
    return [], f"the range ({lo})-({hi}) cannot be expanded"


def _expand_id(lo: str, hi: str) -> tuple[list[str], str | None]:
    """"AC-2"-"AC-4" or "CC6.1"-"CC6.3": the trailing number varies, its width is kept."""
    a = re.fullmatch(r"(.{0,20}?)(\d{1,4})", lo)
    b = re.fullmatch(r"(.{0,20}?)(\d{1,4})", hi)
    if a is None or b is None or a.group(1) != b.group(1):
        return [], (f"the range {lo}-{hi} cannot be expanded without the standard's table of "
                    "contents")
    x, y, width = int(a.group(2)), int(b.group(2)), len(a.group(2))
    return _bounded(lo, hi, [f"{a.group(1)}{i:0{width}d}" for i in range(x, y + 1)], x, y)


def _expanded(lo: _Member, numbers: list[str], hi: _Member, *, sub_level: bool
              ) -> list[_Member]:
    """The members of a closed range; the inner ones span the whole range text."""
    out: list[_Member] = []
    for k, n in enumerate(numbers):
        number, subs = (lo.number, (*lo.subs[:-1], n)) if sub_level else (n, ())
        if k == 0:
            # A one-member range ("5-5") spans its whole text, so the list scan moves on.
            out.append(_Member(number, subs, lo.start, hi.end if len(numbers) == 1 else lo.end))
        else:
            start = hi.start if k == len(numbers) - 1 else lo.start
            out.append(_Member(number, subs, start, hi.end))
    return out


class _Scanner:
    """One pass over one text.  Holds the standard mentions for context resolution."""

    def __init__(self, text: str, fallback: Mapping[str, str], frameworks: Collection[str],
                 grammar: _Grammar) -> None:
        self.text = text
        self.g = grammar
        self.fallback = fallback
        self.specs = [s for s in grammar.table.standards if s.name in frameworks]
        # One pass: a standard's name is an anchor too (anchors never overlap a name).
        self.anchors = list(grammar.anchor_re.finditer(text))
        self.mentions = [_mention(grammar, m, text) for m in self.anchors
                         if m.group("iso") or m.group("act") or m.group("named") or m.group("fw")
                         or m.group("gen")]
        self.by_start = {m.start: m for m in self.mentions}
        self.ends = {k: [m.end for m in self.mentions if m.kind == k] for k in KINDS}
        self.kind_mentions = {k: [m for m in self.mentions if m.kind == k] for k in KINDS}
        self.all_ends = [m.end for m in self.mentions]

    # -- numbers -----------------------------------------------------------------------------

    def iso_list(self, pos: int, *, need_dot: bool, letter_prefix: bool, most: int = MAX_RANGE
                 ) -> list[_Member]:
        """``9.2``, ``9.2 and 9.3``, ``5.9-5.11``, ``5.9, A.5.10 and 5.11``; empty if none."""
        text = self.text
        m = _ISO_NUM.match(text, pos)
        if m is None or (need_dot and "." not in m.group(1)):
            return []
        dotted = "." in m.group(1)
        members = [_Member(m.group(1), (m.group(2),) if m.group(2) else (), m.start(), m.end())]
        scanned = -1
        while len(members) <= 2 * most:
            last = members[-1]
            if last.end <= scanned:  # every turn must move forward: never loop in place
                break
            scanned = last.end
            if (o := _OPEN.match(text, last.end)) is not None:
                members[-1] = self.opened(last, o, iso=True)
                break
            r = _RANGE.match(text, last.end)
            s = r or _SEP.match(text, last.end)
            if s is None:
                break
            p = s.end()
            if letter_prefix and (lp := _LETTER_PREFIX.match(text, p)) is not None:
                p = lp.end()
            n = _ISO_NUM.match(text, p)
            if n is None or (dotted and "." not in n.group(1)) or _UNIT.match(text, n.end()):
                break
            hi = _Member(n.group(1), (n.group(2),) if n.group(2) else (), p, n.end())
            if r is None:
                members.append(hi)
                continue
            numbers, problem = ((([], "a range of sub-clauses cannot be expanded"))
                                if last.subs or hi.subs else _expand_dotted(last.number,
                                                                              hi.number))
            if problem is not None:
                members[-1] = _Member(last.number, last.subs, last.start, hi.end, problem)
            else:
                members[-1:] = _expanded(last, numbers, hi, sub_level=False)
        return members

    def opened(self, last: _Member, o: re.Match[str], *, iso: bool) -> _Member:
        if o.group("next") is not None and not iso and not last.subs:
            # "Art. 15 f." is Articles 15 and 16: closed.  Kept as one member with a marker.
            return _Member(last.number, last.subs, last.start, o.end(), "+1")
        return _Member(last.number, last.subs, last.start, o.end(),
                       f"the open range {o.group().strip(' ,')!r} cannot be listed without "
                       "the standard's table of contents")

    def art_member(self, pos: int, *, with_subs: bool, roman: bool) -> _Member | None:
        text = self.text
        m = _ART_NUM.match(text, pos)
        subs: list[str] = []
        if m is not None:
            number = m.group(1)
            subs.extend(x for x in m.group(2, 3) if x)
        elif roman and (r := _ROMAN.match(text, pos)) is not None:
            m, number = r, str(_roman(r.group(1)))
        else:
            return None
        end = m.end()
        while with_subs and len(subs) < 6 and (s := _ART_SUB.match(text, end)) is not None:
            subs.append(s.group(1))
            end = s.end()
        if with_subs and (p := _PARA_TRAIL.match(text, end)) is not None:
            subs.append(p.group(1))
            end = p.end()
            # "paragraph 1(b)": the point written right after the paragraph's number
            while len(subs) < 6 and (s := _ART_SUB.match(text, end)) is not None:
                subs.append(s.group(1))
                end = s.end()
        while with_subs and len(subs) < 6 and (t := _POINT_TRAIL.match(text, end)) is not None:
            subs.append(t.group(1) or t.group(2))
            end = t.end()
        return _Member(number, tuple(subs), pos, end)

    def art_list(self, pos: int, *, with_subs: bool, roman: bool = False) -> list[_Member]:
        text = self.text
        first = self.art_member(pos, with_subs=with_subs, roman=roman)
        if first is None:
            return []
        members = [first]
        scanned = -1
        while len(members) <= 2 * MAX_RANGE:
            last = members[-1]
            if last.end <= scanned:  # every turn must move forward: never loop in place
                break
            scanned = last.end
            if (o := _OPEN.match(text, last.end)) is not None:
                members[-1] = self.opened(last, o, iso=False)
                if members[-1].problem == "+1":
                    nxt = str(int(last.number) + 1)
                    members[-1] = _Member(last.number, (), last.start, last.end)
                    members.append(_Member(nxt, (), last.start, o.end()))
                break
            r = _RANGE.match(text, last.end)
            s = r or _SEP.match(text, last.end)
            if s is None:
                break
            sub = _SUB_ONLY.match(text, s.end()) if last.subs else None
            if sub is not None:
                hi = _Member(last.number, (*last.subs[:-1], sub.group(1)), s.end(), sub.end())
                if r is None:
                    members.append(hi)
                    continue
                values, problem = _expand_sub(last.subs[-1], sub.group(1))
                if problem is not None:
                    members[-1] = _Member(last.number, last.subs, last.start, hi.end, problem)
                else:
                    members[-1:] = _expanded(last, values, hi, sub_level=True)
                continue
            n = self.art_member(s.end(), with_subs=with_subs, roman=roman)
            if n is None and (w := (_ARTICLE_WORD if with_subs else _RECITAL_WORD).match(
                    text, s.end())) is not None:
                # "Article 12 to Article 14", "Recitals 39 and Recital 40": the word repeated
                n = self.art_member(w.end(), with_subs=with_subs, roman=roman)
            if n is None or _UNIT.match(text, n.end):
                break
            if r is None:
                members.append(n)
                continue
            if last.subs or n.subs:
                members[-1] = _Member(last.number, last.subs, last.start, n.end,
                                      f"the range {text[last.start:n.end]} cannot be expanded "
                                      "without the act's table of contents")
                continue
            x, y = int(last.number), int(n.number)
            numbers, problem = _bounded(last.number, n.number,
                                        [str(i) for i in range(x, y + 1)], x, y)
            if problem is not None:
                members[-1] = _Member(last.number, (), last.start, n.end, problem)
            else:
                members[-1:] = _expanded(last, numbers, n, sub_level=False)
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
        if post is not None and ((kind is None and post.kind != FW) or post.kind == kind):
            std = post
        elif pre is not None and ((kind is None and pre.kind != FW) or pre.kind == kind):
            std = pre
        elif needs_standard:
            return []
        else:
            std = self.context(start, kind)
            how = "context"
            if std is not None and std.kind == FW:
                std = None
        standard, edition = ("", None) if std is None else (std.standard, std.edition)
        std_kind = kind if std is None else std.kind
        if std is None:
            if kind is not None and kind in self.fallback:
                standard, how = self.fallback[kind], "fallback"
            elif kind is None and len([k for k in self.fallback if k != FW]) == 1:
                std_kind = next(k for k in self.fallback if k != FW)
                standard, how = self.fallback[std_kind], "fallback"
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
        first = pre.start if pre is not None and std is pre else start
        return self.build(first, members, post if std is post else None,
                          lambda m: Citation(standard, edition, part, m.number, m.subs,
                                             letter if part == "annex" else None), how)

    def build(self, first: int, members: Sequence[_Member], post: _Mention | None,
              make: Any, how: str) -> list[FoundCitation]:
        out: list[FoundCitation] = []
        text = self.text
        for i, m in enumerate(members):
            s = first if i == 0 else m.start
            e = m.end
            if len(members) == 1 and post is not None:
                e = post.end
            out.append(FoundCitation(make(m), text[s:e], (s, e), how, m.problem))
        return out

    def anchor(self, a: re.Match[str]) -> tuple[list[FoundCitation], int]:
        """Parse the reference starting at anchor ``a``: citations and where parsing ended."""
        text = self.text
        start = a.start()
        if a.group("kw") is not None or a.group("kwdot") is not None or a.group("kwart"):
            word = (a.group("kw") or a.group("kwdot") or a.group("kwart")).lower()
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
                    return self.framework_ids(start, pos, keyword=True)
                members = self.iso_list(head.end(), need_dot=True, letter_prefix=True)
                annex = head.group(1) is not None
                return self.done(start, members, ISO, "annex" if annex else None,
                                 "A" if annex else None)
            if word.startswith(("chapter", "title", "kapitel", "chapitre")):
                return self.chapter(a, word)
            if word.startswith(("art", "recital")):
                is_article = word.startswith("art")
                members = self.art_list(pos, with_subs=is_article, roman=is_article)
                # "art 5" in lower case without a dot is a citation only next to its act.
                loose = a.group("kwart") is not None and a.group("kwart")[0].islower()
                return self.done(start, members, EU, "article" if is_article else "recital",
                                 None, needs_standard=loose)
            members = self.iso_list(pos, need_dot=False, letter_prefix=False)
            if word.startswith("sec"):
                generic = self.section_of_generic(start, pos)
                if generic[0]:
                    return generic
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
            # Issue 13 item 1: "A.5.9-5.11" and "A.5.9, A.5.10 and 5.11" are read whole.
            members = self.iso_list(a.end(), need_dot=True, letter_prefix=True)
            return self.done(start, members, ISO, "annex", "A")
        if a.group("level") is not None:
            return self.levels_first(a)
        if a.group("fwkw") is not None:
            return self.framework_ids(start, a.end(), keyword=True)
        if a.group("fwtok") is not None:
            return self.framework_ids(start, start, keyword=False)
        mention = self.by_start.get(start)
        if mention is None:
            return [], a.end()
        if mention.kind == FW:
            return self.after_framework(mention)
        # A standard: a dotted number right after it is a clause ("ISO/IEC 27002:2022 5.9").
        after = _AFTER_STD_NUM.match(text, a.end())
        if mention.kind != ISO or after is None:
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

    # -- issue 13 items 1 and 2: levels before the article, chapters and titles -------------

    def levels_first(self, a: re.Match[str]) -> tuple[list[FoundCitation], int]:
        """"paragraph 1, point (d) of Article 33", "Points (b) and (c) of Article 32(1)"."""
        text = self.text
        pos = a.start()
        levels: list[tuple[int, list[str]]] = []
        for _ in range(3):
            head = _LEVEL_HEAD.match(text, pos)
            if head is None:
                return [], a.end()
            rank = 1 if head.group("para") else 2
            values: list[str] = []
            p = head.end()
            while len(values) <= MAX_RANGE:
                v = _LEVEL_VALUE.match(text, p)
                if v is None:
                    break
                value = v.group(1) or v.group(2)
                r = _RANGE.match(text, v.end())
                w = _LEVEL_VALUE.match(text, r.end()) if r is not None else None
                if w is not None and r is not None:
                    more, problem = _expand_sub(value, w.group(1) or w.group(2))
                    if problem is not None:
                        return [], a.end()
                    values.extend(more)
                    p = w.end()
                else:
                    values.append(value)
                    p = v.end()
                s = _SEP.match(text, p)
                if s is None or _LEVEL_VALUE.match(text, s.end()) is None:
                    break
                p = s.end()
            if not values:
                return [], a.end()
            levels.append((rank, values))
            j = _LEVEL_JOIN.match(text, p)
            if j is None:
                return [], a.end()
            pos = j.end()
            art = _ARTICLE_WORD.match(text, pos)
            if art is not None:
                break
        else:
            return [], a.end()
        base = self.art_member(art.end(), with_subs=True, roman=True)
        if base is None:
            return [], a.end()
        levels.sort(key=lambda lv: lv[0])
        combos: list[tuple[str, ...]] = [base.subs]
        for _, values in levels:
            combos = [(*c, v) for c in combos for v in values]
            if len(combos) > MAX_RANGE:
                return [], a.end()
        members = [_Member(base.number, c, a.start(), base.end) for c in combos]
        found = self.emit(a.start(), members, EU, "article", None)
        return found, base.end

    def chapter(self, a: re.Match[str], word: str) -> tuple[list[FoundCitation], int]:
        """Issue 13 item 1: "Chapter III", "Title II" of an act are open ranges (unverifiable).

        An arabic number needs the act written next to it ("Chapter 3 of the GDPR"); a roman
        one may take it from the context or the caller's fallback.  "Chapter 5 of ISO 27001"
        is clause 5.
        """
        text = self.text
        n = _CHAPTER_NUM.match(text, a.end())
        if n is None:
            return [], a.end()
        roman = n.group(2) is not None
        written = n.group().strip()
        end = n.end()
        if _SELF_REFERENCE.match(text, end):
            return [], a.end()
        start = a.start()
        sec = _SECTION_OF.search(text, max(0, start - 20), start)
        first = sec.start() if sec is not None else start
        pre, post = self.prefix(first), self.suffix(end)
        std: _Mention | None = None
        how = "explicit"
        if post is not None and post.kind != FW:
            std = post
        elif pre is not None and pre.kind != FW:
            std = pre
        elif roman:
            std, how = self.context(start, EU), "context"
        s = pre.start if pre is not None and std is pre else first
        e = post.end if post is not None and std is post else end
        if std is not None and std.kind == ISO:
            if roman or sec is not None:
                return [], a.end()
            c = Citation(std.standard, std.edition, "clause", written)
            return [FoundCitation(c, text[s:e], (s, e), how)], e
        if std is None:
            if not roman or EU not in self.fallback:
                return [], a.end()
            name, how = self.fallback[EU], "fallback"
        else:
            name = std.standard
        part = "title" if word.startswith("title") else "chapter"
        problem = (f"{' '.join(text[first:end].split())} of {name} is an open range: which "
                   "articles it covers needs the act's table of contents")
        c = Citation(name, None, part, str(_roman(n.group(2))) if roman else written)
        return [FoundCitation(c, text[s:e], (s, e), how, problem)], e

    # -- issue 13 item 4: other frameworks ---------------------------------------------------

    def fw_id(self, pos: int, specs: Sequence[Standard]) -> tuple[str, tuple[str, ...], int,
                                                                   Shape | None] | None:
        """A control id at ``pos`` of one of ``specs`` (or of any when empty), with its subs."""
        text = self.text
        for spec in specs or self.g.table.standards:
            for shape in spec.shapes:
                m = shape.regex.match(text, pos)
                if m is None or re.match(r"[\w-]|\.\d", text[m.end():m.end() + 2]):
                    continue
                subs: list[str] = []
                end = m.end()
                while shape.subs and len(subs) < 2 and (s := _SUB_ONLY.match(text, end)):
                    subs.append(s.group(1))
                    end = s.end()
                return m.group(), tuple(subs), end, shape
        return None

    def fw_list(self, pos: int, specs: Sequence[Standard]) -> list[_Member]:
        text = self.text
        first = self.fw_id(pos, specs)
        if first is None:
            return []
        members = [_Member(first[0], first[1], pos, first[2])]
        scanned = -1
        while len(members) <= 2 * MAX_RANGE:
            last = members[-1]
            if last.end <= scanned:  # every turn must move forward: never loop in place
                break
            scanned = last.end
            r = _RANGE.match(text, last.end)
            s = r or _SEP.match(text, last.end)
            if s is None:
                break
            n = self.fw_id(s.end(), specs)
            if n is None or _UNIT.match(text, n[2]):
                break
            hi = _Member(n[0], n[1], s.end(), n[2])
            if r is None:
                members.append(hi)
                continue
            ids, problem = (([], "a range of control enhancements cannot be expanded")
                            if last.subs or hi.subs else _expand_id(last.number, hi.number))
            if problem is not None:
                members[-1] = _Member(last.number, last.subs, last.start, hi.end, problem)
            else:
                members[-1:] = _expanded(last, ids, hi, sub_level=False)
        return members

    def after_framework(self, mention: _Mention) -> tuple[list[FoundCitation], int]:
        """"NIST SP 800-53 Rev. 5 CM-8", "SOC 2 criteria CC6.1 and A1.2", "HIPAA § 164.312"."""
        text = self.text
        if mention.spec is None:
            kw = self.g.generic_keyword.match(text, mention.end)
            if kw is None:
                return [], mention.end
            members = self.generic_list(kw.end())
            if not members:
                return [], mention.end
            return self.framework_emit(mention.start, members, mention, "explicit"), \
                members[-1].end
        gap = _FW_ID_GAP.match(text, mention.end)
        pos = gap.end() if gap is not None else mention.end
        kw = self.g.fw_keyword.match(text, pos)
        members = self.fw_list(kw.end() if kw is not None else pos, [mention.spec])
        if members:
            return (self.framework_emit(mention.start, members, mention, "explicit"),
                    members[-1].end)
        # "NIST SP 800-53 section 3": a section the table has no shape for is still cited.
        gkw = self.g.generic_keyword.match(text, mention.end)
        members = self.generic_list(gkw.end()) if gkw is not None else []
        if not members:
            return [], mention.end
        return (self.framework_emit(mention.start, members, mention, "explicit", section=True),
                members[-1].end)

    def generic_list(self, pos: int) -> list[_Member]:
        text = self.text
        members: list[_Member] = []
        while len(members) <= MAX_RANGE:
            m = _GENERIC_ID.match(text, pos)
            if m is None:
                break
            end = m.end()
            subs: list[str] = []
            while len(subs) < 4 and (s := _SUB_ONLY.match(text, end)) is not None:
                subs.append(s.group(1))
                end = s.end()
            members.append(_Member(m.group(), tuple(subs), pos, end))
            sep = _SEP.match(text, end)
            if sep is None or _UNIT.match(text, sep.end()):
                break
            pos = sep.end()
        return members

    def section_of_generic(self, start: int, pos: int) -> tuple[list[FoundCitation], int]:
        """"section 5.1 of NIST SP 800-63B": a generic standard written after the section."""
        members = self.generic_list(pos)
        if not members:
            return [], start + 1
        post = self.suffix(members[-1].end)
        if post is None or post.kind != FW:
            return [], start + 1
        out = self.framework_emit(start, members, post, "explicit", post=True,
                                  section=post.spec is None or not post.spec.accepts(
                                      members[0].number))
        return out, members[-1].end

    def framework_emit(self, start: int, members: list[_Member], mention: _Mention, how: str,
                       *, post: bool = False, section: bool = False) -> list[FoundCitation]:
        part = "section" if section or mention.spec is None else "control"
        return self.build(start, members, mention if post else None,
                          lambda m: Citation(mention.standard, mention.edition, part, m.number,
                                             m.subs), how)

    def framework_ids(self, start: int, pos: int, *, keyword: bool
                      ) -> tuple[list[FoundCitation], int]:
        """A control id after a keyword ("control AC-2") or alone ("ID.AM-01", "CM-8")."""
        members = self.fw_list(pos, [])
        if not members:
            return [], start + 1
        end = members[-1].end
        if _SELF_REFERENCE.match(self.text, end):
            return [], start + 1
        token = members[0].number
        post = self.suffix(end)
        if post is not None and post.kind == FW and (post.spec is None
                                                     or post.spec.accepts(token)):
            return self.framework_emit(start, members, post, "explicit", post=True), end
        fits = [s for s in self.g.table.standards if s.accepts(token)]
        shape = next((s.accepts(token) for s in fits), None)
        i = bisect.bisect_right(self.ends[FW], start) - 1
        for mention in self.kind_mentions[FW][max(0, i - 7):i + 1][::-1]:
            if mention.spec is not None and mention.spec in fits:
                return self.framework_emit(start, members, mention, "context"), end
        brief = [s for s in self.specs if s in fits]
        if len(brief) == 1:
            m = _Mention(start, start, brief[0].name, None, FW, "control", brief[0])
            return self.framework_emit(start, members, m, "fallback"), end
        distinct = [s for s in fits if any(sh.bare == "shape" and sh.regex.fullmatch(token)
                                           for sh in s.shapes)]
        if len(distinct) == 1:
            m = _Mention(start, start, distinct[0].name, None, FW, "control", distinct[0])
            return self.framework_emit(start, members, m, "shape"), end
        if keyword and shape is not None and not token[0].isdigit():
            return self.build(start, members, None, lambda m: Citation(
                "", None, "control", m.number, m.subs), "unresolved"), end
        # Not a citation; its members are not either (and are not parsed again: linear).
        return [], end

    def scan(self) -> list[FoundCitation]:
        found: list[FoundCitation] = []
        consumed = 0
        for a in self.anchors:
            if a.start() < consumed:
                continue
            citations, end = self.anchor(a)
            if citations:
                found.extend(citations)
                consumed = end
            elif a.group("fwtok") is not None:
                consumed = end
        return found


def _reading_view(text: str) -> tuple[str, tuple[list[int], list[int]] | None]:
    """Issue 13 items 2 and 3: the text citations are read from, and its map to ``text``.

    Arabic-Indic digits become ASCII (one for one); each run of whitespace or markup (``*``,
    ``_``, backticks, ``>`` as in a block quote) becomes one space.  The map is the list of view
    offsets where a kept stretch starts and the matching offsets in ``text``.
    """
    if not text.isascii() and _ARABIC_DIGIT.search(text) is not None:
        text = text.translate(_DIGITS)
    runs = list(_LAYOUT.finditer(text))
    if not runs:
        return text, None
    pieces: list[str] = []
    view_starts, text_starts = [0], [0]
    last = view = 0
    for m in runs:
        pieces.append(text[last:m.start()])
        pieces.append(" ")
        view += m.start() - last + 1
        last = m.end()
        view_starts.append(view)
        text_starts.append(last)
    pieces.append(text[last:])
    return "".join(pieces), (view_starts, text_starts)


def _to_text(where: tuple[list[int], list[int]], offset: int) -> int:
    view_starts, text_starts = where
    i = bisect.bisect_right(view_starts, offset) - 1
    return text_starts[i] + offset - view_starts[i]


def find_citations(text: str, *, fallback: Mapping[str, str] | None = None,
                   frameworks: Collection[str] = (),
                   standards: StandardsTable | None = None) -> tuple[FoundCitation, ...]:
    """Every citation in ``text`` (already normalised), in order.  Never raises.

    ``fallback`` maps a kind (``"iso"``, ``"eu"``) to the standard a bare reference of that kind
    resolves to when the text names none before it; ``frameworks`` are the other frameworks the
    caller knows of (the brief's), which a bare control id of their shape resolves to (see the
    module docstring).  ``standards`` replaces the packaged table.
    """
    view, where = _reading_view(text)
    grammar = _default_grammar() if standards is None else _grammar(standards)
    found = _Scanner(view, fallback or {}, frameworks, grammar).scan()
    if where is None and view is text:
        return tuple(found)
    out: list[FoundCitation] = []
    for f in found:
        s, e = f.span
        if where is not None:
            s, e = _to_text(where, s), _to_text(where, e - 1) + 1 if e > s else _to_text(where, s)
        out.append(FoundCitation(f.citation, text[s:e], (s, e), f.resolved_by, f.problem))
    return tuple(out)


def find_mentions(text: str) -> tuple[tuple[str, str | None, tuple[int, int]], ...]:
    """Every standard named in ``text``: (canonical name, edition or None, span)."""
    g = _default_grammar()
    return tuple((m.standard, m.edition, (m.start, m.end))
                 for m in (_mention(g, x, text) for x in g.std_re.finditer(text)))


def parse_citation(text: str) -> Citation:
    """Parse a text that is exactly one citation naming its standard, e.g. a brief entry.

    Raises ValueError (so that it can serve as a pydantic validator) when the text is not
    exactly one explicit citation of a closed set (a range or a chapter is refused).
    """
    stripped = text.strip().rstrip(".")
    found = find_citations(stripped)
    if not found:
        raise ValueError(f"not a citation: {text!r}")
    if len(found) > 1:
        raise ValueError(f"more than one citation in {text!r}")
    one = found[0]
    if one.problem is not None:
        raise ValueError(f"not one citation of a closed set: {text!r} ({one.problem})")
    if one.resolved_by != "explicit":
        raise ValueError(f"citation names no standard: {text!r}")
    if one.span != (0, len(stripped)):
        raise ValueError(f"unexpected text around the citation in {text!r}")
    return one.citation
