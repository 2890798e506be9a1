"""URLs and prices in a draft, canonicalised for comparison with the approved evidence set.

The integrity gate of runs with web research (summary, "an integrity gate where a source
exists"): every URL and every price in the output must be in the evidence set.  This module only
finds and canonicalises; the comparison is in ``mechanical``.  No I/O: a URL is text here, it is
never fetched (spec 9.5: links are active content for a quarantine, not for the verifier).

URL canonical form: lower-case scheme and host, default port dropped (80 for http, 443 for
https), "/" for an empty path, path and query kept exactly, fragment dropped (it names a place in
the same resource).  A bare ``www.`` host has no scheme and matches an evidence URL with either.
Trailing punctuation that closes the sentence (``.,;:!?``, quotes, ``*``, ``_``, and a ``)``
or ``]`` without its opening partner) is not part of the URL.

Price canonical form: (ISO 4217 code, Decimal amount).  A currency symbol or code may stand
before or after the amount.  Separators: with both "," and "." the later one is the decimal
mark; with one of them, a group of exactly three digits after it (or several groups) means
thousands, one or two digits mean decimals ("49,00 €" is 49, "1,299" is 1299, "1.299,99" is
1299.99).  Spaces group thousands only when the currency follows ("1 299,99 zł"), so that
"€49 100 users" stays 49.  Multipliers ("1.2 million") are not understood: such a price does not
match the evidence and is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlsplit

_URL_RE = re.compile(r"(?<![\w@.\-/])(?i:https?://|www\.)[^\s<>\"'`“”\u2018\u2019«»{}|\\^]{1,2000}")
_TRAILING = ".,;:!?'\"*_"
_DEFAULT_PORTS = {"http": 80, "https": 443}

SYMBOLS = {"€": "EUR", "US$": "USD", "$": "USD", "£": "GBP", "¥": "JPY", "₹": "INR", "zł": "PLN"}
CODES = ("EUR", "USD", "GBP", "PLN", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK", "CZK",
         "INR", "CNY")
_CODE = r"(?<![A-Za-z])(?:" + "|".join(CODES) + r")(?![A-Za-z])"
_SYMBOL_BEFORE = r"US\$|[€$£¥₹]"
_AMOUNT = (
    r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d{1,3}(?:\.\d{3})+(?:,\d{1,2})?"
    r"|\d{1,12}(?:[.,]\d{1,2})?)(?!\d)(?![.,]\d)"
)
_AMOUNT_SPACED = r"(?<![\d.,])\d{1,3}(?:[ ]\d{3})+(?:[.,]\d{1,2})?(?!\d)(?![.,]\d)"
_CURRENCY_RE = re.compile(rf"[€$£¥₹]|zł|{_CODE}")
_PRICE_RE = re.compile(
    rf"(?P<pcur>{_SYMBOL_BEFORE}|{_CODE})[ ]?(?P<pamt>{_AMOUNT})"
    rf"|(?P<samt>{_AMOUNT_SPACED}|{_AMOUNT})[ ]?(?P<scur>[€$£¥₹]|zł(?!\w)|{_CODE})"
)


@dataclass(frozen=True, slots=True)
class FoundUrl:
    """A URL in a text: raw text, span and canonical form (None if it does not parse)."""

    raw: str
    span: tuple[int, int]
    canonical: str | None


@dataclass(frozen=True, slots=True)
class FoundPrice:
    """A price in a text: raw text, span, ISO currency code and amount."""

    raw: str
    span: tuple[int, int]
    currency: str
    amount: Decimal

    @property
    def canonical(self) -> tuple[str, Decimal]:
        """(currency, amount); ``Decimal`` equality ignores trailing zeros."""
        return (self.currency, self.amount)


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


def canonical_url(raw: str) -> str:
    """The canonical form of ``raw`` (see the module docstring).  Raises ValueError."""
    bare = not raw.lower().startswith(("http://", "https://"))
    parts = urlsplit("//" + raw if bare else raw)
    host = parts.hostname
    if not host:
        raise ValueError(f"URL has no host: {raw!r}")
    port = parts.port  # ValueError on a malformed port
    scheme = parts.scheme.lower()
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        host_port = f"{host}:{port}"
    else:
        host_port = host
    if ":" in host:
        host_port = f"[{host}]" + host_port[len(host):]
    user = ""
    if parts.username is not None:
        user = parts.username + (f":{parts.password}" if parts.password is not None else "") + "@"
    query = f"?{parts.query}" if parts.query else ""
    lead = "//" if bare else f"{scheme}://"
    return f"{lead}{user}{host_port}{parts.path or '/'}{query}"


def url_matches(canonical: str, approved: frozenset[str]) -> bool:
    """True if ``canonical`` is approved; a scheme-less ``//host`` matches http or https."""
    if canonical.startswith("//"):
        return f"https:{canonical}" in approved or f"http:{canonical}" in approved
    return canonical in approved


def find_urls(text: str) -> tuple[FoundUrl, ...]:
    """Every http(s) URL and bare ``www.`` host in ``text``, in order.  Never raises."""
    found: list[FoundUrl] = []
    for m in _URL_RE.finditer(text):
        raw = _trim(m.group())
        if not raw:
            continue
        try:
            canonical: str | None = canonical_url(raw)
        except ValueError:
            canonical = None
        found.append(FoundUrl(raw, (m.start(), m.start() + len(raw)), canonical))
    return tuple(found)


def _amount(digits: str) -> Decimal:
    s = digits.replace(" ", "")
    if "," in s and "." in s:
        decimal_mark = "." if s.rfind(".") > s.rfind(",") else ","
    elif "," in s or "." in s:
        mark = "," if "," in s else "."
        groups = s.split(mark)
        decimal_mark = "" if len(groups) > 2 or len(groups[-1]) == 3 else mark
    else:
        decimal_mark = ""
    thousands = {",", "."} - {decimal_mark}
    for t in thousands:
        s = s.replace(t, "")
    return Decimal(s.replace(",", ".") if decimal_mark == "," else s)


def _currency(token: str) -> str:
    return SYMBOLS.get(token, token)


def find_prices(text: str) -> tuple[FoundPrice, ...]:
    """Every price in ``text``, in order.  Never raises."""
    if _CURRENCY_RE.search(text) is None:  # cheap pre-check: most drafts name no currency
        return ()
    found: list[FoundPrice] = []
    for m in _PRICE_RE.finditer(text):
        cur, amt = (m.group("pcur"), m.group("pamt")) if m.group("pcur") else (
            m.group("scur"), m.group("samt"))
        found.append(FoundPrice(m.group(), m.span(), _currency(cur), _amount(amt)))
    return tuple(found)


def parse_price(text: str) -> tuple[str, Decimal]:
    """Parse a text that is exactly one price, e.g. an evidence entry.  Raises ValueError."""
    stripped = text.strip()
    found = find_prices(stripped)
    if len(found) != 1 or found[0].span != (0, len(stripped)):
        raise ValueError(f"not exactly one price: {text!r}")
    return found[0].canonical
