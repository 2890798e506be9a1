"""A seeded generator of drafts that quote approved wordings the way real drafts write them.

Issue 13 item 3 (seed 002, "altered citation: a brief citation reproduced wrongly, ... wording
of the requirement"): quotations wrapped over lines, in single smart quotes next to
apostrophes, in a markdown ``>`` block quote right after or before their citation, and in the
sentence after the citation they belong to.  Every draft carries its label from what the
generator wrote, never from the checker:

* ``clean`` - every quotation is the approved wording of the citation it belongs to, or a
  contiguous run of at least five of its words (the checker's minimum is four);
* ``altered`` - exactly one word of one such quotation is replaced by a word that occurs in no
  approved wording, so the quotation reproduces no wording at all.

Run ``python -m tests.verifier.quote_corpus`` to print a few drafts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Literal

SEED = 13_002_3

WORDINGS = {
    "C1": ("An inventory of information and other associated assets, including owners, shall "
           "be developed and maintained."),
    "C2": ("Rules for the acceptable use and procedures for handling information and other "
           "associated assets shall be identified, documented and implemented."),
    "C3": ("Documented information required by the information security management system and "
           "by this document shall be controlled to ensure it is available and suitable for "
           "use, where and when it is needed."),
    "G1": ("the ability to ensure the ongoing confidentiality, integrity, availability and "
           "resilience of processing systems and services"),
}

BRIEF: dict[str, Any] = {
    "format": "triz-brief/1",
    "task": "Asset inventory policy outline for ISO/IEC 27001:2022 with the GDPR",
    "steps": [{"id": "S1", "title": "Inventory requirements",
               "content_spec": "State the requirements with their citations."}],
    "citations": [
        {"id": "C1", "citation": "ISO/IEC 27001:2022 Annex A 5.9", "wording": WORDINGS["C1"]},
        {"id": "C2", "citation": "ISO/IEC 27001:2022 Annex A 5.10", "wording": WORDINGS["C2"]},
        {"id": "C3", "citation": "ISO/IEC 27001:2022 clause 7.5.3", "wording": WORDINGS["C3"]},
        {"id": "G1", "citation": "GDPR Article 32(1)(b)", "wording": WORDINGS["G1"]},
    ],
}

# How each approved citation may be written (every one is in the closed set).
WRITINGS = {
    "C1": ("Annex A 5.9", "A.5.9", "Annex A control 5.9", "ISO/IEC 27001:2022 Annex A 5.9",
           "control A.5.9 of ISO/IEC 27001:2022"),
    "C2": ("Annex A 5.10", "A.5.10", "Annex A control 5.10", "ISO/IEC 27001:2022 Annex A 5.10"),
    "C3": ("clause 7.5.3", "ISO/IEC 27001:2022 clause 7.5.3", "clause 7.5.3 of ISO/IEC 27001:2022"),
    "G1": ("GDPR Article 32(1)(b)", "Art. 32(1)(b) GDPR", "Article 32(1)(b) of the GDPR"),
}
NUMBERS = {"C1": "5.9", "C2": "5.10", "C3": "7.5.3", "G1": "32(1)(b)"}

# Words in no approved wording: one of them replacing a word makes a quotation reproduce none.
FOREIGN = ("ignored", "archived", "optionally", "never", "rarely", "informally",
           "postponed", "deleted", "everyone")

L, R = "\u2018", "\u2019"  # single smart quotes; R is also the apostrophe
MARKS = (("“", "”"), ('"', '"'), ("«", "»"), ("„", "“"), (L, R))

FILLER = (
    f"The organisation{R}s asset owners don{R}t wait for the yearly audit.",
    f"Each team{R}s lead keeps its part of the register current.",
    "Nothing here changes the security objectives agreed by management.",
    "The register is reviewed whenever a system is added or retired.",
    "We use the term \"asset owner\" for the accountable person.",
    f"It{R}s the service desk that records laptops returned by leavers.",
)
# A quotation that belongs to no citation, after a sentence that cites nothing.
DISTRACTOR = ("Our last review closed with the line “we keep one list of every laptop we own "
              "and nothing else” from the service desk.")

Shape = Literal["same_sentence", "wrapped", "single_smart", "block_after", "block_before",
                "next_sentence_ref", "next_sentence_alone", "block_marked", "colon_before"]
SHAPES: tuple[Shape, ...] = ("same_sentence", "wrapped", "single_smart", "block_after",
                             "block_before", "next_sentence_ref", "next_sentence_alone",
                             "block_marked", "colon_before")


@dataclass(frozen=True, slots=True)
class QuoteDraft:
    """One generated draft and what the generator knows about it."""

    id: str
    label: Literal["clean", "altered"]
    shape: Shape
    entry: str  # the brief citation the quotation belongs to
    number: str  # its number as the finding will show it
    text: str


def _wrap(words: list[str], rng: random.Random, prefix: str = "") -> str:
    lines: list[str] = []
    at = 0
    while at < len(words):
        take = rng.randint(3, 7)
        lines.append(" ".join(words[at:at + take]))
        at += take
    return ("\n" + prefix).join(lines)


def _fragment(entry: str, rng: random.Random) -> list[str]:
    """The words of a faithful quotation: the whole wording, or a run of >= 5 of its words."""
    words = WORDINGS[entry].split()
    if rng.random() < 0.4:
        return list(words) if rng.random() < 0.5 else [*words[:-1], words[-1].rstrip(".")]
    size = rng.randint(5, min(9, len(words)))
    start = rng.randint(0, len(words) - size)
    run = list(words[start:start + size])
    if rng.random() < 0.3:
        run[0] = run[0][0].swapcase() + run[0][1:]
    if start > 0 and rng.random() < 0.4:
        run[0] = "..." + run[0]
    if start + size < len(words) and rng.random() < 0.4:
        run[-1] = run[-1].rstrip(",") + "..."
    return run


def _alter(words: list[str], rng: random.Random) -> list[str]:
    """Replace one word (never only punctuation) by a word of no approved wording."""
    altered = list(words)
    at = rng.choice([i for i, w in enumerate(words) if any(ch.isalpha() for ch in w)])
    old = altered[at]
    core = old.strip(".,;:")
    altered[at] = old.replace(core, rng.choice(FOREIGN), 1)
    return altered


def _render(shape: Shape, cite: str, words: list[str], rng: random.Random) -> str:
    opener, closer = rng.choice(MARKS)
    flat = " ".join(words)
    wrapped = _wrap(words, rng)
    if shape == "same_sentence":
        return f"{cite} requires that {opener}{flat}{closer}."
    if shape == "wrapped":
        return f"Under {cite}, the policy\nstates {opener}{wrapped}{closer} and we follow it."
    if shape == "single_smart":
        return (f"Per {cite}, the organisation{R}s rule is {L}{_wrap(words, rng)}{R} and we "
                f"don{R}t add to it.")
    if shape == "block_after":
        lead = rng.choice((f"{cite} reads:\n\n", f"The text of {cite} is this:\n",
                           f"From {cite}\n"))
        return f"{lead}> {_wrap(words, rng, '> ')}\n"
    if shape == "block_before":
        after = rng.choice((f"- {cite}", f"({cite})", f"Source: {cite}.", f"— {cite}"))
        return f"> {_wrap(words, rng, '> ')}\n\n{after}\n"
    if shape == "next_sentence_ref":
        ref = rng.choice(("It reads:", "It says", "This control states", "The requirement is",
                          "Its text is", "The wording is"))
        return f"{cite} is the basis of this step. {ref} {opener}{wrapped}{closer}."
    if shape == "next_sentence_alone":
        gap = rng.choice((" ", "\n", "\n\n"))
        return f"{cite} is the basis of this step.{gap}{opener}{wrapped}{closer}"
    if shape == "block_marked":
        return f"{cite} says:\n> {opener}{_wrap(words, rng, '> ')}{closer}\n"
    return f"The wording of {cite} matters here:\n\n{opener}{wrapped}{closer}"


def _draft(index: int, label: Literal["clean", "altered"], rng: random.Random) -> QuoteDraft:
    shape = SHAPES[index % len(SHAPES)]
    entry = rng.choice(sorted(WORDINGS))
    cite = rng.choice(WRITINGS[entry])
    words = _fragment(entry, rng)
    if label == "altered":
        words = _alter(words, rng)
    body = _render(shape, cite, words, rng)
    if body[0].islower():
        body = body[0].upper() + body[1:]
    parts = [rng.choice(FILLER)]
    if rng.random() < 0.5:
        parts += [rng.choice(FILLER), DISTRACTOR]
    parts.append("\n\n" + body + "\n")
    other = rng.choice([e for e in sorted(WORDINGS) if e != entry])
    also = rng.choice(WRITINGS[other])
    parts.append(f"{rng.choice(FILLER)} {also[0].upper()}{also[1:]} also applies to "
                 "the register.")
    text = " ".join(parts)
    return QuoteDraft(f"{label}/{index:03d}/{shape}", label, shape, entry, NUMBERS[entry], text)


def generate(count: int = 54, seed: int = SEED) -> list[QuoteDraft]:
    """``count`` clean and ``count`` altered drafts, the same seed giving the same drafts."""
    rng = random.Random(seed)
    drafts = [_draft(i, "clean", rng) for i in range(count)]
    drafts += [_draft(i, "altered", rng) for i in range(count)]
    for d in drafts:
        # The generator's own guarantees, checked on its own output (not by the checker).
        changed = [w for w in FOREIGN if re.search(rf"\b{w}\b", d.text)]
        assert (d.label == "altered") == bool(changed), d.id
    return drafts


if __name__ == "__main__":  # pragma: no cover - a look at the corpus
    for d in generate()[::12]:
        print(f"--- {d.id} ({d.entry})\n{d.text}")
