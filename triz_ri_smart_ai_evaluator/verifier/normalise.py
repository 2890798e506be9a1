"""Normalising a draft before any mechanical check reads it.

A draft is untrusted data (spec 2.12, 9.4): the same words can be spelled with invisible or
look-alike code points so that a check reading raw text misses them.  Every mechanical check of
the verifier (citations, URLs, prices, injection signals) therefore reads the *normalised* text,
and every quote a finding carries is a slice of it.

The steps, in order:

1. strip invisible characters: zero-width (U+200B-U+200D, U+2060, U+FEFF, U+180E), the soft
   hyphen U+00AD and direction controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, U+061C);
2. fold dashes (U+2010-U+2015, U+2212, U+FE58, U+FE63, U+FF0D) to "-" and odd spaces (U+00A0,
   U+2000-U+200A, U+202F, U+3000; U+2007 is in that range) to " ";
3. Unicode NFKC;
4. repeat 1-3 until nothing changes (NFKC can yield a dash that step 2 folds).

What step 1 removed is recorded (code point, Unicode name, count, first offset in the original
text), so that a report can say "characters were hidden here".  When NFKC did not change the
length of the text the offsets map back to the original exactly (``to_original``); otherwise
the map is not kept and ``to_original`` returns None.  This module does no I/O.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

STRIPPED_CHARACTERS = (
    "\u200b\u200c\u200d\u2060\ufeff\u180e\u00ad"  # zero-width and the soft hyphen
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c"  # direction
)
DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
SPACES = "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u3000"

_TABLE: dict[int, str | None] = {ord(c): None for c in STRIPPED_CHARACTERS}
_TABLE.update({ord(c): "-" for c in DASHES})
_TABLE.update({ord(c): " " for c in SPACES})
_STRIP_RE = re.compile("[" + re.escape(STRIPPED_CHARACTERS) + "]")
_TABLE_RE = re.compile("[" + re.escape(STRIPPED_CHARACTERS + DASHES + SPACES) + "]")
_MAX_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Stripped:
    """One kind of invisible character removed from a draft."""

    code_point: int
    name: str
    count: int
    first_offset: int  # in the original text

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"code_point": f"U+{self.code_point:04X}", "name": self.name,
                "count": self.count, "first_offset": self.first_offset}


@dataclass(frozen=True, slots=True)
class Normalised:
    """The normalised text, what was stripped, and whether anything changed."""

    text: str
    stripped: tuple[Stripped, ...]
    changed: bool
    removed_at: tuple[int, ...] | None = None  # sorted original offsets of removed characters

    def to_original(self, offset: int) -> int | None:
        """The offset in the original text of ``offset`` in the normalised text, if known.

        Known when NFKC kept the length (folds are one-for-one, strips are recorded); None
        otherwise.
        """
        if self.removed_at is None:
            return None
        # The k-th kept character sits after every removed position smaller than its own.
        original = offset
        for _ in range(len(self.removed_at) + 1):
            moved = offset + bisect.bisect_right(self.removed_at, original)
            if moved == original:
                return original
            original = moved
        return original

    def to_json(self) -> dict[str, object]:
        """A JSON-able record for the ledger."""
        return {"changed": self.changed, "stripped": [s.to_json() for s in self.stripped]}


def _translate(text: str) -> str:
    """Strip and fold; a search first, because most texts need neither (translate copies)."""
    return text if _TABLE_RE.search(text) is None else text.translate(_TABLE)


def _fold_once(text: str) -> str:
    return unicodedata.normalize("NFKC", _translate(text))


def normalise(text: str) -> Normalised:
    """Normalise ``text`` as the module docstring describes.  Never raises; idempotent."""
    if text.isascii():
        # ASCII is NFKC-stable and contains none of the stripped or folded characters.
        return Normalised(text=text, stripped=(), changed=False, removed_at=())
    counts: dict[str, list[int]] = {}
    removed: list[int] = []
    for m in _STRIP_RE.finditer(text):
        pos = m.start()
        removed.append(pos)
        entry = counts.get(m.group())
        if entry is None:
            counts[m.group()] = [1, pos]
        else:
            entry[0] += 1
    translated = _translate(text)
    out = unicodedata.normalize("NFKC", translated)
    same_length = len(out) == len(translated)
    for _ in range(_MAX_ROUNDS):
        again = _fold_once(out)
        if again == out:
            break
        same_length = False
        out = again
    stripped = tuple(
        Stripped(ord(c), unicodedata.name(c, f"U+{ord(c):04X}"), n, first)
        for c, (n, first) in sorted(counts.items(), key=lambda kv: kv[1][1])
    )
    return Normalised(text=out, stripped=stripped, changed=out != text,
                      removed_at=tuple(removed) if same_length else None)
