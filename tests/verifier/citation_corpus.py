"""A seeded generator of citation drafts, one corpus per shape class of issue 13 (items 1-4).

Each class gives *clean* drafts (every citation is in the brief's closed set, written in the
class's shapes) and *altered* drafts (one member, number, point, edition or standard changed
or invented).  The label of each draft, and the finding kind an altered one must raise, come
from what the generator itself wrote, never from the code under test (seed 002 checklist 7:
test with the failure class the domain really produces, citations outside the approved set).

The classes: ``ranges`` (closed ranges and lists, open ranges), ``forms`` (long and national
forms, roman and Arabic-Indic digits), ``layout`` (line breaks and markup inside a citation),
``frameworks`` (NIST SP 800-53, NIST CSF 2.0, SOC 2, PCI DSS and unlisted standards).
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from triz_ri_smart_ai_evaluator.verifier.inputs import Brief, parse_brief

SEED = 20261203
CLASSES = ("ranges", "forms", "layout", "frameworks")

ISO = "ISO/IEC 27001:2022"
ANNEX = [f"5.{n}" for n in range(9, 15)]  # Annex A 5.9-5.14 approved
CLAUSES = [str(n) for n in range(4, 11)]  # clauses 4-10 approved
SUBCLAUSES = ["9.2", "9.3", "7.5.3"]
ARTICLES = [str(n) for n in range(12, 23)]  # GDPR Articles 12-22 approved
POINTS_32 = "abcd"  # GDPR Article 32(1)(a)-(d) approved
POINTS_33 = "abcd"  # GDPR Article 33(3)(a)-(d) approved
NIS2_POINTS = "abcdefghij"  # NIS2 Article 21(2)(a)-(j) approved
RECITALS = ["39", "40", "41"]
NIST = ["AC-2", "AC-3", "AC-4", "AC-5", "CM-8", "IA-5", "SI-4"]
NIST_ENH = ["AC-2(1)", "AC-2(4)", "SI-4(2)"]
CSF = ["ID.AM-01", "ID.AM-02", "ID.AM-03", "PR.AA-01", "PR.AA-05", "DE.CM-01"]
SOC = ["CC6.1", "CC6.2", "CC6.3", "CC7.2", "A1.2"]
PCI = ["8.3.1", "8.3.6", "12.10.1"]
HIPAA = ["164.312", "164.308"]

FILLERS = (
    "The policy is reviewed every 12 months and after any major incident.",
    "Version 2.3 of the inventory tool was approved on 2026-09-02.",
    "Owners confirm their entries within 72 hours of a change.",
    "The service targets 99.9 % availability over a calendar quarter.",
    "Keys use AES-256 and transport uses TLS 1.2 or later.",
    "The team of 14 people meets at 10.30 on the first Monday.",
    "Steps 1 to 3 of this outline describe the roles; section 2 of this document lists them.",
    "Records older than 5 years are archived, not deleted.",
    "The help desk answers on +48 22 123 45 67 between 8 and 17.",
    "Phase 2 starts in Q3 2026 and covers 3 to 5 sites.",
    "Table 4 and Figure 2.1 of this outline summarise the flows.",
    "A COVID-19 era exception was closed in release 10.4.2.",
)
INTROS = ("In short, ", "For this step, ", "As agreed, ", "", "", "Therefore ")


@dataclass(frozen=True)
class Case:
    """One generated draft: its class, label, text and what an altered one must raise."""

    cls: str
    clean: bool
    text: str
    expected_kind: str | None  # the finding kind an altered draft must raise
    shape: str  # which writing the generator used (for the variety check)
    note: str  # what was altered, for a failure message


BRIEF_DOC: dict[str, object] = {
    "format": "triz-brief/1",
    "task": "Generated citation corpus (issue 13 items 1-4)",
    "steps": [{"id": "S1", "title": "Requirements"}],
    "citations": [
        *({"id": f"A{i}", "citation": f"{ISO} Annex A {n}"} for i, n in enumerate(ANNEX)),
        *({"id": f"K{i}", "citation": f"{ISO} clause {n}"} for i, n in enumerate(CLAUSES)),
        *({"id": f"S{i}", "citation": f"{ISO} clause {n}"} for i, n in enumerate(SUBCLAUSES)),
        *({"id": f"G{i}", "citation": f"GDPR Article {n}"} for i, n in enumerate(ARTICLES)),
        *({"id": f"P{p}", "citation": f"GDPR Article 32(1)({p})"} for p in POINTS_32),
        *({"id": f"Q{p}", "citation": f"GDPR Article 33(3)({p})"} for p in POINTS_33),
        *({"id": f"R{n}", "citation": f"GDPR Recital {n}"} for n in RECITALS),
        *({"id": f"N2{p}", "citation": f"NIS2 Article 21(2)({p})"} for p in NIS2_POINTS),
        {"id": "N23", "citation": "NIS2 Article 23(1)"},
        *({"id": f"NI{i}", "citation": f"NIST SP 800-53 Rev. 5 {n}"}
          for i, n in enumerate(NIST + NIST_ENH)),
        *({"id": f"CS{i}", "citation": f"NIST CSF 2.0 {n}"} for i, n in enumerate(CSF)),
        *({"id": f"SO{i}", "citation": f"SOC 2 {n}"} for i, n in enumerate(SOC)),
        *({"id": f"PC{i}", "citation": f"PCI DSS 4.0 {n}"} for i, n in enumerate(PCI)),
        *({"id": f"HI{i}", "citation": f"HIPAA section {n}"} for i, n in enumerate(HIPAA)),
    ],
}


@cache
def brief() -> Brief:
    """The one brief every generated draft is checked against."""
    return parse_brief(BRIEF_DOC, "citation-corpus brief")


def _roman(n: int) -> str:
    out = ""
    for v, s in ((100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"),
                 (4, "IV"), (1, "I")):
        while n >= v:
            out, n = out + s, n - v
    return out


def _arabic_indic(text: str, extended: bool) -> str:
    base = 0x06F0 if extended else 0x0660
    return "".join(chr(base + int(c)) if c.isdigit() else c for c in text)


def _full_width(text: str) -> str:
    return "".join(chr(0xFF10 + int(c)) if c.isdigit() else c for c in text)


def _prose(rng: random.Random, citation_sentence: str) -> str:
    """The citation sentence somewhere among 1-4 sentences of number-rich clean prose."""
    fillers = rng.sample(FILLERS, rng.randint(1, 4))
    fillers.insert(rng.randint(0, len(fillers)), rng.choice(INTROS) + citation_sentence)
    joiner = rng.choice([" ", "\n", "\n\n"])
    return joiner.join(fillers)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


# -- class 1: ranges and lists (issue 13 item 1) -------------------------------------------------

def _ranges(rng: random.Random, clean: bool) -> Case:
    shapes: list[Callable[[], tuple[str, str | None, str]]] = []

    def annex_range() -> tuple[str, str | None, str]:
        lo = rng.randint(9, 12)
        hi = rng.randint(lo + 1, 14) if clean else rng.randint(15, 18)
        form = rng.choice(["{iso} Annex A 5.{lo}-5.{hi}", "Annex A controls 5.{lo} to 5.{hi} of "
                           "{iso}", "{iso} controls A.5.{lo} through A.5.{hi}",
                           "{iso} A.5.{lo}\u20135.{hi}", "Annex A 5.{lo} - 5.{hi} of {iso}"])
        return form.format(iso=ISO, lo=lo, hi=hi), "invented_citation", "annex_range"

    def clause_range() -> tuple[str, str | None, str]:
        lo = rng.randint(4, 7)
        hi = rng.randint(lo + 1, 10) if clean else rng.randint(11, 13)
        word = rng.choice(["Clauses", "clauses", "Cl."])
        return (f"{word} {lo} {rng.choice(['to', '-', 'through'])} {hi} of {ISO} set the frame",
                "invented_citation", "clause_range")

    def article_range() -> tuple[str, str | None, str]:
        lo = rng.randint(12, 18)
        hi = rng.randint(lo + 1, 22) if clean else rng.randint(23, 26)
        form = rng.choice(["Articles {lo} to {hi} of the GDPR", "GDPR Articles {lo}-{hi}",
                           "Art. {lo}\u2013{hi} GDPR", "Articles {lo} through {hi} GDPR"])
        return form.format(lo=lo, hi=hi), "invented_citation", "article_range"

    def point_range() -> tuple[str, str | None, str]:
        lo = rng.choice("ab")
        hi = rng.choice("cd") if clean else rng.choice("ef")
        form = rng.choice(["GDPR Article 32(1)({lo})-({hi})", "Article 32(1)({lo}) to ({hi}) GDPR",
                           "points ({lo}) to ({hi}) of Article 32(1) GDPR"])
        return form.format(lo=lo, hi=hi), "invented_citation", "point_range"

    def point_list() -> tuple[str, str | None, str]:
        a, b = rng.sample(list(POINTS_33), 2)
        if not clean:
            b = rng.choice("efg")
        form = rng.choice(["GDPR Article 33(3)({a}) and ({b})", "Points ({a}) and ({b}) of "
                           "Article 33(3) GDPR", "Article 33(3)({a}), ({b}) of the GDPR",
                           "GDPR Art. 33(3)({a}) as well as ({b})"])
        return form.format(a=a, b=b), "invented_citation", "point_list"

    def annex_list() -> tuple[str, str | None, str]:
        a, b = rng.sample(ANNEX, 2)
        if not clean:
            b = rng.choice(["5.15", "5.16", "5.8", "6.1"])
        form = rng.choice(["Annex A {a}/{b} of {iso}", "{iso} Annex A {a} as well as {b}",
                           "{iso} A.{a} and A.{b}", "{iso} Annex A controls {a}, {b}"])
        return form.format(a=a, b=b, iso=ISO), "invented_citation", "annex_list"

    def recital_range() -> tuple[str, str | None, str]:
        hi = rng.choice(["40", "41"]) if clean else rng.choice(["42", "44"])
        return f"GDPR Recitals 39 to {hi}", "invented_citation", "recital_range"

    def open_range() -> tuple[str, str | None, str]:
        # Only altered: an open range cannot be listed from the closed set.
        form = rng.choice(["GDPR Article 15 et seq.", "Article 12 ff. GDPR",
                           "Chapter III of the GDPR", "GDPR Title II",
                           "Section 2 of Chapter IV GDPR", f"{ISO} Annex A 5.9-6.2",
                           f"{ISO} Annex A 5.14-5.9", "GDPR Articles 22 to 12",
                           "GDPR Articles 1 to 99", "Articles 12 et seq. GDPR"])
        return form, "unverifiable_citation", "open_range"

    shapes = [annex_range, clause_range, article_range, point_range, point_list, annex_list,
              recital_range]
    if not clean:
        shapes.append(open_range)
    text, kind, shape = rng.choice(shapes)()
    return Case("ranges", clean, _prose(rng, _cap(text) + "."), None if clean else kind, shape,
                text)


# -- class 2: long and national forms (issue 13 item 2) ------------------------------------------

def _forms(rng: random.Random, clean: bool) -> Case:
    choice = rng.choice(["a32", "a33", "art", "nis2"])
    if choice == "a32":
        n, p, x = 32, 1, rng.choice(POINTS_32)
    elif choice == "a33":
        n, p, x = 33, 3, rng.choice(POINTS_33)
    elif choice == "nis2":
        n, p, x = 21, 2, rng.choice(NIS2_POINTS)
    else:
        n, p, x = int(rng.choice(ARTICLES)), 0, ""
    note = "clean"
    if not clean:
        what = rng.choice(["number", "point"] if x else ["number"])
        if what == "number":
            # A number the set approves at no level (Article 32 encloses 32(1)(a): approved).
            taken = {21, 23} if choice == "nis2" else {*map(int, ARTICLES), 32, 33}
            n = rng.choice([k for k in range(1, 99) if k not in taken])
        else:
            x = rng.choice("klmn")
        note = f"{what} altered"
    act = "NIS2" if choice == "nis2" else "GDPR"
    national = {"GDPR": ["DSGVO", "RGPD", "RODO", "AVG", "GDPR"],
                "NIS2": ["NIS2", "NIS-2", "NIS2-Richtlinie", "NIS 2 Directive"]}[act]
    nat = rng.choice(national)
    forms: list[tuple[str, str]]
    if x:
        forms = [
            ("long_en", f"Article {n}, paragraph {p}, point ({x}) of the {act}"),
            ("levels_first", f"paragraph {p}, point ({x}) of Article {n} {act}"),
            ("point_of", f"point ({x}) of paragraph {p} of Article {n} of the {act}"),
            ("german", f"Art. {n} Abs. {p} lit. {x} {nat}"),
            ("german_long", f"Artikel {n} Absatz {p} Buchstabe {x} {nat}"),
            ("french", f"article {n}, paragraphe {p}, point {x}) du {nat}"),
            ("polish", f"art. {n} ust. {p} lit. {x} {nat}"),
            ("dotted", f"{act} Article {n}.{p}({x})"),
            ("no_dot", f"{act} Art {n}({p})({x})"),
            ("roman", f"{act} Article {_roman(n)}({p})({x})"),
            ("arabic_indic", f"{act} Article {_arabic_indic(str(n), False)}"
                             f"({_arabic_indic(str(p), False)})({x})"),
            ("ext_arabic_indic", f"{act} Article {_arabic_indic(str(n), True)}({p})({x})"),
            ("full_width", f"{act} Article {_full_width(str(n))}({_full_width(str(p))})({x})"),
        ]
    else:
        forms = [
            ("german", f"Artikel {n} {nat}"),
            ("german_abbr", f"Art. {n} {nat}"),
            ("french", f"article {n} du {nat}"),
            ("spanish", f"artículo {n} del {nat}"),
            ("no_dot", f"{act} Art {n}"),
            ("roman", f"{act} Article {_roman(n)}"),
            ("arabic_indic", f"{act} Article {_arabic_indic(str(n), rng.random() < 0.5)}"),
            ("full_width", f"Article {_full_width(str(n))} of the {act}"),
        ]
    shape, text = rng.choice(forms)
    sentence = _cap(rng.choice(["{c} governs this step", "the duty follows {c}",
                                "{c} sets the requirement", "see {c} for the duty"]).format(c=text))
    return Case("forms", clean, _prose(rng, sentence + "."), None if clean else "invented_citation",
                shape, f"{note}: {text}")


# -- class 3: line breaks and markup inside a citation (issue 13 item 3) -------------------------

_BREAKS = ("\n", " \n", "\n  ", "\r\n", "\n> ")
_MARKS = (("**", "**"), ("_", "_"), ("`", "`"), ("*", "*"))


def _layout(rng: random.Random, clean: bool) -> Case:
    kind = rng.choice(["clause", "annex", "article", "art_sub", "nist"])
    if kind == "clause":
        n = rng.choice(SUBCLAUSES + CLAUSES)
        bad = rng.choice(["9.4", "11", "6.1.9", "9.9"])
        parts = ["clause", n if clean else bad, f"of {ISO}"]
    elif kind == "annex":
        n = rng.choice(ANNEX)
        bad = rng.choice(["5.15", "5.17", "6.9"])
        parts = ["Annex A", n if clean else bad, f"of {ISO}"]
    elif kind == "article":
        n = rng.choice(ARTICLES)
        bad = rng.choice(["5", "9", "44", "23"])
        parts = ["Article", n if clean else bad, "of the GDPR"]
    elif kind == "art_sub":
        x = rng.choice(POINTS_32)
        parts = ["GDPR Article", "32", f"(1)({x if clean else rng.choice('efg')})"]
    else:
        n = rng.choice(NIST)
        bad = rng.choice(["AC-9", "CM-11", "IA-2"])
        parts = ["NIST SP 800-53 Rev. 5", n if clean else bad, ""]
    style = rng.choice(["break", "break", "mark", "mark_break", "wrap"])
    gap = rng.choice(_BREAKS)
    tail = parts[2] if parts[2].startswith("(") else " " + parts[2]
    if style == "break":
        text = f"{parts[0]}{gap}{parts[1]}{tail}"
    elif style == "mark":
        o, c = rng.choice(_MARKS)
        text = f"{o}{parts[0]}{c} {parts[1]} {parts[2]}"
        if parts[2].startswith("("):
            text = f"{o}{parts[0]} {parts[1]}{c}{parts[2]}"
    elif style == "mark_break":
        o, c = rng.choice(_MARKS)
        text = f"{o}{parts[0]}{gap}{parts[1]}{c} {parts[2]}"
        if parts[2].startswith("("):
            text = f"{o}{parts[0]}{gap}{parts[1]}{c}{parts[2]}"
    else:
        o, c = rng.choice(_MARKS)
        text = f"{o}{parts[0]} {parts[1]}{tail}{c}"
    text = text.rstrip()
    sentence = rng.choice(["The team applies {c}", "{c} applies here", "Owners follow {c}"])
    return Case("layout", clean, _prose(rng, sentence.format(c=text) + "."),
                None if clean else "invented_citation", f"{kind}/{style}", text)


# -- class 4: other frameworks (issue 13 item 4) -------------------------------------------------

def _frameworks(rng: random.Random, clean: bool) -> Case:
    which = rng.choice(["nist", "nist_enh", "csf", "soc", "pci", "hipaa", "other"]
                       if not clean else ["nist", "nist_enh", "csf", "soc", "pci", "hipaa"])
    kind = "invented_citation"
    if which == "nist":
        ids = rng.sample(NIST, 2)
        if not clean:
            ids[1] = rng.choice(["AC-9", "CM-12", "SI-7", "AU-6", "PE-3"])
        forms = ["NIST SP 800-53 Rev. 5 {a} and {b}", "NIST SP 800-53 controls {a} and {b}",
                 "{a} and {b} of NIST SP 800-53", "NIST 800-53 applies; control {a} and {b}"
                 " cover it", "the controls {a}, {b} (NIST SP 800-53)"]
        form = rng.choice(forms)
        if not clean and rng.random() < 0.25:
            ids[1] = ids[0]
            form, kind = "NIST SP 800-53 Rev. 4 {a}", "altered_citation"
        text = form.format(a=ids[0], b=ids[1])
    elif which == "nist_enh":
        a = rng.choice(NIST_ENH)
        if not clean:
            a = a[:-2] + rng.choice(["7)", "9)"])
        text = rng.choice(["NIST SP 800-53 Rev. 5 {a}", "control enhancement {a} of NIST SP "
                           "800-53", "NIST SP 800-53 {a}"]).format(a=a)
    elif which == "csf":
        ids = rng.sample(CSF, 2)
        if not clean:
            ids[rng.randint(0, 1)] = rng.choice(["ID.AM-08", "PR.AA-09", "GV.OC-01", "RS.MA-02"])
        text = rng.choice(["NIST CSF 2.0 {a} and {b}", "subcategories {a} and {b} of NIST CSF",
                           "{a} and {b}", "the CSF outcomes {a}, {b}"]).format(a=ids[0], b=ids[1])
    elif which == "soc":
        ids = rng.sample(SOC, 2)
        if not clean:
            ids[1] = rng.choice(["CC6.9", "CC8.4", "CC3.9"])
        text = rng.choice(["SOC 2 {a} and {b}", "SOC 2 criteria {a} and {b}",
                           "Trust Services Criteria {a} and {b}", "{a} and {b} of SOC 2"]
                          ).format(a=ids[0], b=ids[1])
    elif which == "pci":
        a = rng.choice(PCI)
        if not clean:
            a = rng.choice(["8.3.2", "8.4.1", "12.10.7"])
        text = rng.choice(["PCI DSS 4.0 Requirement {a}", "PCI DSS v4.0 requirement {a}",
                           "PCI DSS 4.0 {a}"]).format(a=a)
    elif which == "hipaa":
        a = rng.choice(HIPAA)
        if not clean:
            a = rng.choice(["164.316", "164.310", "164.530"])
        text = rng.choice(["HIPAA section {a}", "HIPAA § {a}", "section {a} of HIPAA"]
                          ).format(a=a)
    else:
        text = rng.choice([
            "NIST SP 800-171 Rev. 2 3.1.1", "CIS Controls v8 control 4.1",
            "NIST SP 800-63B section 5.1.1", "ISO/IEC 27701:2019 clause 6.2",
            "COBIT 2019 control APO13.01", "IEC 62443-3-3 requirement SR 1.1",
            "OWASP ASVS 4.0 requirement V2.1.1", "HITRUST CSF control 01.a",
            "FedRAMP section 3.2", "ISO 22301:2019 clause 8.4", "DORA Article 11",
        ])
    sentence = rng.choice(["The outline maps to {c}", "{c} frame the access rules",
                           "For audits we cite {c}"]).format(c=text)
    return Case("frameworks", clean, _prose(rng, _cap(sentence) + "."),
                None if clean else kind, which, text)


_MAKERS: dict[str, Callable[[random.Random, bool], Case]] = {
    "ranges": _ranges, "forms": _forms, "layout": _layout, "frameworks": _frameworks,
}


def generate(cls: str, *, n_clean: int = 60, n_altered: int = 60, seed: int = SEED
             ) -> list[Case]:
    """``n_clean`` clean and ``n_altered`` altered drafts of class ``cls``, from ``seed``."""
    rng = random.Random(f"{seed}:{cls}")
    make = _MAKERS[cls]
    cases = [make(rng, True) for _ in range(n_clean)] + [make(rng, False)
                                                         for _ in range(n_altered)]
    # NFKC is the verifier's own first step; the generator writes text a draft could contain.
    return [Case(c.cls, c.clean, unicodedata.normalize("NFC", c.text), c.expected_kind,
                 c.shape, c.note) for c in cases]
