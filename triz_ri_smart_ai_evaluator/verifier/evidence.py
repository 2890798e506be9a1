"""URLs and prices in a draft, canonicalised for comparison with the approved evidence set.

The integrity gate of runs with web research (summary, "an integrity gate where a source
exists"): every URL and every price in the output must be in the evidence set.  This module only
finds, canonicalises and compares; ``mechanical`` turns a mismatch into a finding.  No I/O: a URL
is text here, it is never fetched (spec 9.5: links are active content for a quarantine, not for
the verifier).  The rules are documented in docs/verifier-inputs.md, "Evidence"; in short:

URLs (issue 13 item 6).  Read: ``http(s)://`` URLs (and ``ftp://`` and other schemes before a
listed host, never on evidence), ``www.`` hosts, and bare hosts whose last
label is a listed TLD (``TLDS``), with or without a path; also inside markdown emphasis
(``_url_``, ``**url**``) and both halves of ``[url](url)``.  A bare host without a path is read
only when written in lower case and its TLD is not also a common word or file extension
(``PATH_ONLY_TLDS``).  Canonical form: lower-case scheme and host, trailing dot of the host
dropped, default port dropped (80 for http, 443 for https), ``/`` for an empty path and no
trailing ``/`` otherwise, ``%xx`` escapes in upper case, tracking parameters dropped
(``utm_*`` and ``TRACKING_PARAMETERS``), the other query parameters kept exactly and ordered by
name (stable), fragment dropped.  Everything else is an alteration: scheme (http vs https),
host (``www.`` is part of it), port, user, path (case-sensitive), any other query parameter or
value.  A scheme-less URL with a path matches an evidence URL of either scheme; a scheme-less
host without a path names a site and matches when an evidence URL has that host (and port).

Prices (issue 13 item 5).  A price is (currency, amount, unit).  Currencies: ISO codes, symbols
and names (``CURRENCY_SYMBOLS``, ``DOLLAR_PREFIXES``, ``_name_currency``); plain ``$`` and plain
"dollars" are USD; an ambiguous symbol or name (``¥``, ``kr``, "rupees", "francs") is a currency
of its own (``"CNY/JPY"``) that only matches itself, unless a code next to it decides; a code and
a symbol that disagree (``C$30 USD``) make a currency that matches nothing.  Multipliers (k,
thousand, m, million, bn, billion, ...) scale the amount.  A range (``EUR 49-99``, ``€49 to €99``,
``between $10 and $20``) is one price per end; a currency, multiplier or unit written once
applies to every end.  Separators: with both "," and "." the later one is the decimal mark; space
and apostrophe group thousands; several groups of three are thousands.  One separator followed
by exactly three digits after a 1-3 digit number not starting with 0 ("1,299", "1.299") is read
by the currency's convention where it has one (``DOT_DECIMAL``: "," groups thousands, "." marks
decimals, so ``$1.299`` is 1.299); for other currencies (EUR, PLN, ...) it is read as thousands
and marked *ambiguous*: it still equals an unambiguous approved 1299, but an approved price that
is itself written ambiguously matches only the same digits and separator, so no reading the
brief did not commit to can pass.  Units (``per user per month``, ``/month``, ``a year``,
``monthly``) are a set of words (order-free, plurals and abbreviations folded).  A draft price
matches an approved one with the same currency and amount whose unit is the same, or when either
of the two writes no unit (``price_matches``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlsplit

# -- URLs (issue 13 item 6) ----------------------------------------------------------------------

# A documented TLD list: the reserved test names, common gTLDs and ccTLDs.  File extensions that
# are also ccTLDs (md, py, rs, sh, so, ps, cc, ml, pm, tf) and the gTLDs zip and mov are left out
# on purpose: "setup.py" is a file far more often than a Paraguayan host.
TLDS = frozenset((
    "example", "test", "invalid", "localhost",
    "com", "org", "net", "edu", "gov", "mil", "int", "info", "biz", "name", "pro", "io", "co",
    "ai", "app", "dev", "cloud", "tech", "online", "site", "xyz", "shop", "store", "blog",
    "page", "news", "tv", "ly", "gg", "fm", "me", "to",
    "eu", "uk", "de", "fr", "nl", "be", "ch", "at", "it", "es", "pt", "se", "dk", "fi", "ie",
    "cz", "sk", "hu", "ro", "bg", "gr", "lt", "lv", "ee", "si", "hr", "lu", "is", "li", "mt",
    "cy", "pl", "no", "us", "ca", "au", "nz", "jp", "cn", "in", "br", "mx", "ru", "ua", "za",
    "sg", "hk", "tw", "kr", "il", "tr", "ar", "cl",
))
# TLDs that are also English words or file extensions: such a host counts only with a path.
PATH_ONLY_TLDS = frozenset(("at", "be", "in", "is", "it", "no", "pl", "us", "ai", "co", "me",
                            "to", "tv", "ly", "fm"))
TRACKING_PARAMETERS = frozenset((
    "gclid", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "twclid", "igshid",
    "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "srsltid"))

_URL_CHAR = r"(?:[^\s<>\"'`“”\u2018\u2019«»{}|\\^\]]|\](?!\())"  # "](" ends a link's text
_LABEL = r"[A-Za-z0-9][A-Za-z0-9-]{0,62}+"
# Both patterns open with a character class or a literal, so the regex engine skips ahead fast
# (the benchmark's 1,000 drafts/s); the lookbehind sits after the first character.
_SCHEME_RE = re.compile(
    r"[hHwW](?<![^\W_].|[@.\-/].)(?:(?<=[hH])[tT][tT][pP][sS]?://|(?<=[wW])[wW][wW]\.)"
    rf"{_URL_CHAR}{{1,2000}}")
_TLD_RE = re.compile(r"\.(?<=[A-Za-z0-9]\.)(?P<tld>[A-Za-z]{2,9})(?![^\W_]|[@-]|\.[^\W_])")
_LABEL_RE = re.compile(_LABEL)
_AFTER_HOST_RE = re.compile(rf"(?::\d{{1,5}})?(?:/{_URL_CHAR}{{0,2000}})?")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")
_NOT_BEFORE_HOST = frozenset("@/:%+=~#&?$")
_OTHER_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://\Z")
_TRAILING = ".,;:!?'\"*_~"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_ESCAPE_RE = re.compile(r"%[0-9a-fA-F]{2}")


@dataclass(frozen=True, slots=True)
class FoundUrl:
    """A URL in a text: raw text, span and canonical form (None if it does not parse)."""

    raw: str
    span: tuple[int, int]
    canonical: str | None


def _trim(url: str) -> str:
    """Drop trailing punctuation that ends the sentence rather than the URL."""
    while url:
        last = url[-1]
        unbalanced = {")": "(", "]": "["}.get(last)
        if last in _TRAILING or (unbalanced and url.count(unbalanced) < url.count(last)):
            url = url[:-1]
        else:
            break
    return url


def _upper_escapes(text: str) -> str:
    return _ESCAPE_RE.sub(lambda m: m.group().upper(), text)


def _canonical_query(query: str) -> str:
    """Tracking parameters dropped, the rest ordered by name (stable: repeats keep order)."""
    kept = [p for p in query.split("&") if p]
    kept = [p for p in kept if not _is_tracking(p.split("=", 1)[0].lower())]
    kept.sort(key=lambda p: p.split("=", 1)[0])
    return "?" + _upper_escapes("&".join(kept)) if kept else ""


def _is_tracking(name: str) -> bool:
    return name.startswith("utm_") or name in TRACKING_PARAMETERS


def canonical_url(raw: str) -> str:
    """The canonical form of ``raw`` (see the module docstring).  Raises ValueError.

    A scheme-less URL canonicalises to ``//host/path``; a scheme-less host without a path to
    ``//host`` (it names a site, see ``url_matches``).
    """
    bare = not raw.lower().startswith(("http://", "https://"))
    parts = urlsplit("//" + raw if bare else raw)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError(f"URL has no host: {raw!r}")
    port = parts.port  # ValueError on a malformed port
    scheme = parts.scheme.lower()
    host_port = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if ":" in host:
        host_port = f"[{host}]" + host_port[len(host):]
    user = ""
    if parts.username is not None:
        user = parts.username + (f":{parts.password}" if parts.password is not None else "") + "@"
    query = _canonical_query(parts.query)
    if bare and not parts.path and not query:
        return f"//{user}{host_port}"
    path = _upper_escapes(parts.path).rstrip("/") or "/"
    lead = "//" if bare else f"{scheme}://"
    return f"{lead}{user}{host_port}{path}{query}"


def url_matches(canonical: str, approved: frozenset[str]) -> bool:
    """True if ``canonical`` is approved.

    A scheme-less ``//host/path`` matches it with http or https; a scheme-less ``//host`` (no
    path) matches any approved URL on that host and port.
    """
    if canonical.startswith("//"):
        site = canonical[2:]
        if "/" not in site:
            return any(a.split("://", 1)[-1].split("/", 1)[0] == site for a in approved)
        return f"https:{canonical}" in approved or f"http:{canonical}" in approved
    return canonical in approved


def _bare_hosts(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, str, str]]:
    """(start, raw, tld) of every bare host in ``text`` outside the ``taken`` spans."""
    out: list[tuple[int, str, str]] = []
    spans = iter(taken)
    span = next(spans, None)
    floor = 0
    for m in _TLD_RE.finditer(text):
        dot = m.start()
        if m.group("tld").lower() not in TLDS:
            continue
        while span is not None and span[1] <= dot:
            span = next(spans, None)
        if dot < floor or (span is not None and span[0] <= dot):
            continue
        start = dot
        while start > floor and text[start - 1] in _HOST_CHARS:
            start -= 1
        host = text[start:m.end()]
        if not all(_LABEL_RE.fullmatch(label) for label in host.split(".")):
            continue
        scheme = _OTHER_SCHEME_RE.search(text, max(0, start - 24), start)
        if scheme is not None:  # issue 13 item 6: ftp://, file://, ... are URLs too
            start = scheme.start()
        before = text[start - 1] if start else " "
        if before.isalnum() or (scheme is None and before in _NOT_BEFORE_HOST):
            continue
        tail = _AFTER_HOST_RE.match(text, m.end())
        end = tail.end() if tail else m.end()
        raw = _trim(text[start:end])
        # issue 13 item 6: a bare host without a path is a host only when it cannot be a word,
        # a product name ("ASP.NET") or a file name ("backup.pl")
        if "/" not in raw and (raw != raw.lower() or m.group("tld").lower() in PATH_ONLY_TLDS):
            continue
        out.append((start, raw, m.group("tld")))
        floor = end
    return out


def find_urls(text: str) -> tuple[FoundUrl, ...]:
    """Every URL in ``text`` (http(s), ``www.`` and bare hosts with a listed TLD), in order.

    Never raises.
    """
    schemed = [(m.start(), m.group()) for m in _SCHEME_RE.finditer(text)]
    taken = [(s, s + len(raw)) for s, raw in schemed]
    raws = [(s, _trim(raw)) for s, raw in schemed]
    raws += [(s, raw) for s, raw, _ in _bare_hosts(text, taken)]
    found: list[FoundUrl] = []
    for start, raw in sorted(raws):
        if not raw:
            continue
        try:
            canonical: str | None = canonical_url(raw)
        except ValueError:
            canonical = None
        found.append(FoundUrl(raw, (start, start + len(raw)), canonical))
    return tuple(found)


# -- prices (issue 13 item 5) --------------------------------------------------------------------

CODES = ("EUR", "USD", "GBP", "PLN", "CHF", "JPY", "CNY", "RMB", "CAD", "AUD", "NZD", "HKD",
         "SGD", "BRL", "MXN", "TWD", "SEK", "NOK", "DKK", "ISK", "CZK", "HUF", "RON", "BGN",
         "INR", "KRW", "ZAR", "ILS")
CURRENCY_SYMBOLS = {"€": "EUR", "£": "GBP", "¥": "CNY/JPY", "₹": "INR", "₩": "KRW", "₽": "RUB",
                    "₺": "TRY", "₪": "ILS", "₱": "PHP", "zł": "PLN", "Kč": "CZK",
                    "kr": "DKK/ISK/NOK/SEK", "kr.": "DKK/ISK/NOK/SEK", "$": "$",
                    "Rs": "INR/LKR/NPR/PKR", "Rs.": "INR/LKR/NPR/PKR"}
# Letters written before "$"; any other prefix makes a dollar that matches nothing but itself.
DOLLAR_PREFIXES = {"US": "USD", "C": "CAD", "CA": "CAD", "CAN": "CAD", "A": "AUD", "AU": "AUD",
                   "NZ": "NZD", "HK": "HKD", "S": "SGD", "SG": "SGD", "R": "BRL", "MX": "MXN",
                   "NT": "TWD"}
_DOLLARS = frozenset({"USD", "CAD", "AUD", "NZD", "HKD", "SGD", "TWD", "MXN"})
# Currencies whose prices are written with a decimal point and thousands commas everywhere.
DOT_DECIMAL = frozenset({"USD", "GBP", "CAD", "AUD", "NZD", "HKD", "SGD", "JPY", "CNY", "INR",
                         "KRW", "MXN", "TWD", "ILS"})
MULTIPLIERS = {"k": 10**3, "thousand": 10**3, "m": 10**6, "million": 10**6, "mn": 10**6,
               "mln": 10**6, "mio": 10**6, "b": 10**9, "bn": 10**9, "billion": 10**9,
               "mrd": 10**9}

_CODE = r"(?<![A-Za-z])(?:" + "|".join(CODES) + r")(?![A-Za-z])"
_SYMBOL = r"(?<![A-Za-z])[A-Za-z]{1,3}\$|\$|[€£¥₹₩₽₺₪₱]|(?<![A-Za-z])(?:kr|Rs)\.?"
_NAME = (
    r"(?i:(?:US|U\.S\.|American|Canadian|Australian|New[ ]Zealand|Hong[ ]Kong|Singapore|Taiwan"
    r"|NT)[ ]dollars?|dollars?|euros?|(?:pounds?[ ])?sterling|(?:British|UK)[ ]pounds?"
    r"|(?:Swiss[ ])?francs?|(?:Japanese[ ])?yen|(?:Chinese[ ])?yuan|renminbi"
    r"|(?:Indian[ ])?rupees?|z[łl]ot(?:ys|y|ies|ych|e)|(?:(?:Swedish|Norwegian|Danish"
    r"|Icelandic)[ ])?kron(?:or|a|er|e|ur)|(?:Brazilian[ ])?reais|Brazilian[ ]reals?"
    r"|(?:Mexican[ ])?pesos?|(?:South[ ])?Korean[ ]won|(?:South[ ]African[ ])rand)(?![A-Za-z])"
)
_SUFFIX = (rf"(?:(?<![A-Za-z])[A-Z]{{1,3}}\$|[€$£¥₹₩₽₺₪₱])(?![ ]?\d)|zł(?!\w)|Kč(?!\w)"
           rf"|(?<![A-Za-z])kr\.?(?![A-Za-z])|{_CODE}|{_NAME}")
_AMOUNT = (
    r"(?<![\d.,'\u2019])(?:\d{1,3}(?:,\d{3})+(?:\.\d{1,6})?|\d{1,3}(?:\.\d{3})+(?:,\d{1,6})?"
    r"|\d{1,3}(?:['\u2019]\d{3})+(?:[.,]\d{1,6})?|\d{1,12}(?:[.,]\d{1,6})?)(?!\d)(?![.,]\d)"
)
_AMOUNT_SPACED = r"(?<![\d.,])\d{1,3}(?:[ ]\d{3})+(?:[.,]\d{1,2})?(?!\d)(?![.,]\d)"
# After a currency, space-grouped thousands need decimals: "€49 100 users" is 49 for 100 users.
_AMOUNT_SPACED_DECIMALS = r"(?<![\d.,])\d{1,3}(?:[ ]\d{3})+[.,]\d{1,2}(?!\d)(?![.,]\d)"
_MULT = r"(?:[ ]?(?i:thousand|million|billion|bn|mn|mln|mio|mrd)|[kKmMbB])(?![A-Za-z0-9])"
_UNIT_PART = r"(?:[ ]?/[ ]?|[ ](?i:per|an|a|each|every)[ ])[A-Za-z][A-Za-z.]{0,15}"
_ADVERB = r"(?i:monthly|yearly|annually|weekly|daily|p\.a\.)(?![A-Za-z])"


def _prefix(n: int) -> str:
    return rf"(?:(?P<code{n}>{_CODE})[ ]?(?P<sym{n}>{_SYMBOL})?|(?P<only{n}>{_SYMBOL}))"


def _between(n: int) -> str:
    """An empty group set when the price follows "between " (fixed-width lookbehind)."""
    return rf"(?:(?<=[Bb]etween[ ])(?P<between{n}>))?"


def _sep(n: int) -> str:
    """A range separator; "and" only after "between" ("€49 and 3 users" is one price)."""
    return rf"[ ]?-[ ]?|[ ]to[ ]|[ ]and[ ](?(between{n})|(?!))"


_NO_CENTS = r"(?:[.,]-(?![\d-]))?"  # "49,- €": German for 49.00
_PRICE_RE = re.compile(
    rf"(?:{_between(1)}{_prefix(1)}[ ]?(?P<a1>{_AMOUNT_SPACED_DECIMALS}|{_AMOUNT}){_NO_CENTS}"
    rf"(?P<m1>{_MULT})?"
    rf"(?:(?:{_sep(1)})(?:{_prefix(2)}[ ]?)?(?P<a2>{_AMOUNT_SPACED_DECIMALS}|{_AMOUNT})"
    rf"{_NO_CENTS}(?P<m2>{_MULT})?)?"
    rf"(?:[ ]?(?P<tail>{_CODE}|{_NAME})(?![ ]?\d))?"
    rf"|{_between(2)}(?P<b1>{_AMOUNT_SPACED}|{_AMOUNT}){_NO_CENTS}(?P<n1>{_MULT})?"
    rf"(?:(?:{_sep(2)})(?P<b2>{_AMOUNT_SPACED}|{_AMOUNT}){_NO_CENTS}(?P<n2>{_MULT})?)?"
    rf"[ ]?(?P<suffix>{_SUFFIX}))"
    rf"(?P<unit>(?:{_UNIT_PART}|[ ]{_ADVERB}){{0,4}})"
)
_CODE_RE = re.compile(_CODE)
_DIGITS_RE = re.compile(r"\d+")
_CURRENCY_START_RE = re.compile("|".join(["€", "\\$", "£", "¥", "₹", "₩", "₽", "₺", "₪", "₱", "kr",
                                          "Rs", *CODES]))
# Cheap pre-checks (literal alternatives, so the engine skips ahead): most drafts name no money.
_HINT_CASED_RE = re.compile("|".join([*CODES, "Rs"]))
_HINT_LOWER_RE = re.compile(
    "€|\\$|£|¥|₹|₩|₽|₺|₪|₱|zł|kr|kč|dollar|euro|sterling|pound|franc|yen|yuan|renminbi|rupee"
    "|zlot|złot|kron|reais|brazilian|peso|korean|african")
_UNIT_TOKEN_RE = re.compile(
    r"(?:[ ]?(/)[ ]?|[ ](?i:(per|an|a|each|every))[ ])([A-Za-z][A-Za-z.]{0,15})|[ ](" + _ADVERB
    + ")")
_UNIT_WORDS = {
    "hour": "hour", "hr": "hour", "h": "hour", "day": "day", "daily": "day", "week": "week",
    "wk": "week", "weekly": "week", "month": "month", "mo": "month", "mth": "month",
    "mon": "month", "monthly": "month", "quarter": "quarter", "qtr": "quarter", "year": "year",
    "yr": "year", "y": "year", "annum": "year", "yearly": "year", "annually": "year",
    "p.a.": "year", "hrs": "hour", "yrs": "year", "mos": "month", "mths": "month",
    "wks": "week", "seat": "seat", "user": "user", "licence": "licence", "license": "licence",
}
# Words an article ("a month", "an hour", "each user") may introduce as a unit.
_ARTICLE_UNITS = frozenset({"hour", "day", "week", "month", "quarter", "year", "seat", "user",
                            "licence", "device", "endpoint", "member", "agent", "employee"})
_NOT_UNITS = frozenset({"the", "a", "an", "our", "your", "their", "its", "this", "that", "cent",
                        "se", "and", "or", "which", "what", "contract", "agreement", "invoice"})


@dataclass(frozen=True, slots=True)
class Price:
    """A price: currency (ISO code, or a marked ambiguous one), amount, unit, and for an amount
    whose separator is ambiguous, its digits as written (see the module docstring)."""

    currency: str
    amount: Decimal
    unit: str | None = None
    written: str | None = None


@dataclass(frozen=True, slots=True)
class FoundPrice:
    """A price in a text: raw text, span, currency, amount, unit and ambiguous writing."""

    raw: str
    span: tuple[int, int]
    currency: str
    amount: Decimal
    unit: str | None = None
    written: str | None = None

    @property
    def canonical(self) -> tuple[str, Decimal]:
        """(currency, amount); ``Decimal`` equality ignores trailing zeros."""
        return (self.currency, self.amount)

    @property
    def price(self) -> Price:
        """The price without its place in the text."""
        return Price(self.currency, self.amount, self.unit, self.written)


def _candidates(currency: str) -> frozenset[str]:
    if currency == "$":
        return _DOLLARS
    return frozenset(currency.split("/"))


def _combine(first: str | None, second: str | None) -> str | None:
    """One currency from two tokens of one price ("CAD $30", "$30 CAD"); disagreement -> a
    currency that matches nothing (issue 13 item 5: never a silent pick)."""
    if first is None or second is None or first == second:
        return first or second
    both = _candidates(first) & _candidates(second)
    return next(iter(both)) if len(both) == 1 else f"{first}|{second}"


def _symbol_currency(symbol: str) -> str:
    if symbol.endswith("$") and len(symbol) > 1:
        prefix = symbol[:-1].upper()
        return DOLLAR_PREFIXES.get(prefix, f"{prefix}$")
    return CURRENCY_SYMBOLS.get(symbol, symbol)


def _name_currency(name: str) -> str:
    n = " ".join(name.lower().split())
    if "dollar" in n:
        qualifier = n.rpartition(" ")[0]
        return {"": "$", "us": "USD", "u.s.": "USD", "american": "USD", "canadian": "CAD",
                "australian": "AUD", "new zealand": "NZD", "hong kong": "HKD",
                "singapore": "SGD", "taiwan": "TWD", "nt": "TWD"}.get(qualifier, n)
    table = (("won", "KRW"), ("euro", "EUR"), ("sterling", "GBP"), ("pound", "GBP"),
             ("swiss", "CHF"), ("franc", "CHF/XAF/XOF"), ("yen", "JPY"), ("yuan", "CNY"),
             ("renminbi", "CNY"), ("indian", "INR"), ("rupee", "INR/LKR/NPR/PKR"),
             ("swedish", "SEK"), ("norwegian", "NOK"), ("danish", "DKK"), ("icelandic", "ISK"),
             ("kron", "DKK/ISK/NOK/SEK"), ("mexican", "MXN"), ("peso", "ARS/CLP/COP/MXN/PHP"),
             ("rand", "ZAR"), ("ot", "PLN"), ("rea", "BRL"))
    return next((code for key, code in table if key in n), n)  # unknown: matches only itself


def _token_currency(written: str | None) -> str | None:
    if written is None:
        return None
    if _CODE_RE.fullmatch(written):
        return {"RMB": "CNY"}.get(written, written)
    if written.endswith("$") or written in CURRENCY_SYMBOLS:
        return _symbol_currency(written)
    return _name_currency(written)


def _multiplier(text: str | None) -> int:
    return MULTIPLIERS[text.strip().lower()] if text else 1


def _amount(digits: str, currency: str) -> tuple[Decimal, bool]:
    """The amount of ``digits`` and whether its one separator was ambiguous (module docstring)."""
    s = digits.replace(" ", "").replace("'", "").replace("\u2019", "")
    grouped = s != digits  # space or apostrophe already grouped the thousands
    decimal_mark = ""
    ambiguous = False
    if "," in s and "." in s:
        decimal_mark = "." if s.rfind(".") > s.rfind(",") else ","
    elif "," in s or "." in s:
        mark = "," if "," in s else "."
        head, *tail = s.split(mark)
        if len(tail) == 1 and (grouped or len(tail[0]) != 3 or len(head) > 3 or head[0] == "0"):
            decimal_mark = mark
        elif len(tail) == 1 and _candidates(currency) <= DOT_DECIMAL:
            decimal_mark = "." if mark == "." else ""
        elif len(tail) == 1:
            ambiguous = True
    for t in {",", "."} - {decimal_mark}:
        s = s.replace(t, "")
    return Decimal(s.replace(",", ".")), ambiguous


def _canonical_unit(token: str) -> str:
    if token in _UNIT_WORDS:
        return _UNIT_WORDS[token]
    single = token[:-1] if token.endswith("s") and len(token) > 3 else token
    return _UNIT_WORDS.get(single, single)


def _unit(text: str) -> tuple[str | None, int]:
    """The canonical unit written at the start of ``text`` and the length that is a unit."""
    words: set[str] = set()
    end = 0
    for m in _UNIT_TOKEN_RE.finditer(text):
        if m.start() != end:
            break
        _slash, article, word, adverb = m.groups()
        lowered = (adverb or word).lower()
        name = lowered if lowered.endswith("p.a.") else lowered.rstrip(".")
        canonical = _canonical_unit(name)
        if not adverb and (name in _NOT_UNITS or (
                article and article.lower() != "per" and canonical not in _ARTICLE_UNITS)):
            break
        words.add(canonical)
        end = m.end()
    return ("/".join(sorted(words)) or None), end


def _matches(text: str) -> Iterator[re.Match[str]]:
    """``_PRICE_RE.finditer(text)``, tried only where a price can start: a currency token (with
    the letters of "C$"/"NZ$" before a "$") or the first digit of a number (benchmark speed)."""
    starts = {d.start() for d in _DIGITS_RE.finditer(text)}
    for c in _CURRENCY_START_RE.finditer(text):
        start = c.start()
        starts.add(start)
        if c.group() == "$":
            back = start
            while back > max(0, start - 3) and text[back - 1].isascii() \
                    and text[back - 1].isalpha():
                back -= 1
            starts.add(back)
    end = 0
    for start in sorted(starts):
        if start < end:
            continue
        m = _PRICE_RE.match(text, start)
        if m is not None:
            end = m.end()
            yield m


def _scan(text: str) -> list[tuple[FoundPrice, int, int]]:
    """Every price with the extent (start, end) of the phrase it was read from."""
    out: list[tuple[FoundPrice, int, int]] = []
    for m in _matches(text):
        g = m.group
        unit, unit_len = _unit(g("unit"))
        end = m.start("unit") + unit_len
        if g("a1") is not None:
            first = _combine(_token_currency(g("code1")), _token_currency(g("sym1") or g("only1")))
            own2 = _combine(_token_currency(g("code2")), _token_currency(g("sym2") or g("only2")))
            tail = _token_currency(g("tail"))
            ends = [(m.start(), "a1", "m1", first)]
            if g("a2") is not None:
                ends.append((m.start("code2") if g("code2") else m.start("only2")
                             if g("only2") else m.start("a2"), "a2", "m2", own2 or first))
        else:
            tail = _token_currency(g("suffix"))
            ends = [(m.start("b1"), "b1", "n1", None)]
            if g("b2") is not None:
                ends.append((m.start("b2"), "b2", "n2", None))
        last_mult = g(ends[-1][2])
        for i, (start, amount_group, mult_group, own) in enumerate(ends):
            currency = _combine(own, tail) or "$"
            currency = "USD" if currency == "$" else currency
            mult_text = g(mult_group) or last_mult
            digits = g(amount_group)
            amount, ambiguous = _amount(digits, currency)
            written = f"{digits.replace(' ', '')}*{_multiplier(mult_text)}" if ambiguous else None
            last = i == len(ends) - 1
            stop = (m.start("unit") if last else m.end(mult_group) if g(mult_group)
                    else m.end(amount_group))
            raw = text[start:stop].rstrip()
            out.append((FoundPrice(raw, (start, start + len(raw)), currency,
                                   amount * _multiplier(mult_text), unit, written),
                        m.start(), end))
    return out


def find_prices(text: str) -> tuple[FoundPrice, ...]:
    """Every price in ``text``, in order, one per end of a range.  Never raises."""
    if _HINT_CASED_RE.search(text) is None and _HINT_LOWER_RE.search(text.lower()) is None:
        return ()
    return tuple(p for p, _, _ in _scan(text))


def parse_evidence_price(text: str) -> Price:
    """Parse a text that is exactly one price, maybe with a unit.  Raises ValueError."""
    stripped = text.strip()
    found = _scan(stripped)
    if len(found) != 1 or found[0][1:] != (0, len(stripped)):
        raise ValueError(f"not exactly one price: {text!r}")
    return found[0][0].price


def parse_price(text: str) -> tuple[str, Decimal]:
    """(currency, amount) of a text that is exactly one price.  Raises ValueError."""
    p = parse_evidence_price(text)
    return (p.currency, p.amount)


def price_matches(found: FoundPrice | Price, approved: Iterable[Price]) -> bool:
    """True if an approved price has the currency and amount of ``found`` and, when both write
    a unit, the same unit (issue 13 item 5; an approved ambiguous amount needs the same digits).
    """
    for a in approved:
        if a.currency != found.currency:
            continue
        same = found.written == a.written if a.written is not None else found.amount == a.amount
        if same and (found.unit is None or a.unit is None or found.unit == a.unit):
            return True
    return False
