"""A seeded generator of evidence drafts: prices and URLs written the way real drafts write them.

Issue 13 items 5 and 6.  Per class (``price``, ``url``) it writes clean drafts (every price and
URL is on the evidence set, in varied shapes) and altered drafts (exactly one amount, currency,
multiplier, unit, range end, host, path, query, scheme or port changed).  The expected outcome of
each draft comes from what the generator wrote, never from the code under test: an altered draft
records the span of the one altered price or URL, and it must be the only finding.

Human readings the generator relies on (docs/verifier-inputs.md, "Evidence"): "€1,299" and
"€1.299" are 1,299 euros; "$1,299" is 1,299 dollars and "$1.299" is 1.299 dollars; "$" alone is
US dollars; "C$" Canadian, "A$" Australian dollars; a price in a draft may omit the unit of the
approved price, or add one when the approved price has none, but a unit it writes must agree.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

SEED = 20261203
PER_KIND = 60  # drafts per class and label (issue 13: at least 40)

# currency -> the ways a draft writes it: "{a}" is the amount as written
CURRENCY_FORMS: dict[str, tuple[str, ...]] = {
    "EUR": ("€{a}", "EUR {a}", "{a} €", "{a} EUR", "{a} euros", "€ {a}", "EUR{a}"),
    "USD": ("${a}", "US${a}", "USD {a}", "{a} USD", "{a} US dollars", "${a} USD", "USD ${a}"),
    "CAD": ("C${a}", "CA${a}", "CAD {a}", "{a} Canadian dollars", "CAD ${a}", "${a} CAD"),
    "AUD": ("A${a}", "AU${a}", "AUD {a}", "{a} Australian dollars", "{a} AUD"),
    "NZD": ("NZ${a}", "NZD {a}", "{a} NZD"),
    "GBP": ("£{a}", "GBP {a}", "{a} GBP", "{a} pounds sterling"),
    "CHF": ("CHF {a}", "{a} CHF", "{a} Swiss francs"),
    "PLN": ("{a} zł", "PLN {a}", "{a} PLN"),
    "JPY": ("JPY {a}", "{a} yen", "¥{a} JPY", "{a} JPY"),
    "HKD": ("HK${a}", "HKD {a}"),
    "SGD": ("S${a}", "SGD {a}"),
    "BRL": ("R${a}", "BRL {a}"),
}
# How the generator changes a currency: a sibling written the way a careless draft writes it.
CURRENCY_SWAPS: dict[str, tuple[tuple[str, str], ...]] = {
    "EUR": (("GBP", "£{a}"), ("USD", "${a}"), ("CHF", "CHF {a}")),
    "USD": (("CAD", "C${a}"), ("AUD", "A${a}"), ("EUR", "€{a}"), ("SGD", "S${a}")),
    "CAD": (("USD", "${a}"), ("AUD", "A${a}"), ("USD", "{a} US dollars")),
    "AUD": (("USD", "${a}"), ("CAD", "C${a}"), ("NZD", "NZ${a}")),
    "NZD": (("AUD", "A${a}"), ("USD", "${a}")),
    "GBP": (("EUR", "€{a}"), ("USD", "${a}")),
    "CHF": (("EUR", "EUR {a}"), ("USD", "{a} US dollars")),
    "PLN": (("EUR", "{a} €"), ("CZK", "{a} Kč")),
    "JPY": (("CNY", "{a} yuan"), ("USD", "${a}")),
    "HKD": (("USD", "${a}"), ("SGD", "S${a}")),
    "SGD": (("USD", "${a}"), ("HKD", "HK${a}")),
    "BRL": (("USD", "${a}"),),
}
DOT_DECIMAL = {"USD", "GBP", "AUD", "NZD", "HKD", "SGD", "JPY", "CAD"}  # as drafts write them
# unit -> approved writing, draft writings
UNITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "month": ("per month", ("per month", "/month", "/mo", "a month", "monthly", "/mo.")),
    "year": ("per year", ("per year", "/yr", "a year", "annually", "per annum", "p.a.")),
    "month/user": ("per user per month", ("per user per month", "per month per user",
                                          "/user/month", "per user/month", "per user a month")),
    "seat/year": ("per seat/year", ("per seat per year", "per seat/year", "/seat/yr",
                                    "per year per seat")),
}
UNIT_SWAPS = {"month": ("per year", "per week"), "year": ("per month", "/day"),
              "month/user": ("per user per year", "per seat per month", "per month"),
              "seat/year": ("per user per year", "per seat per month")}
NOISE = ("Teams of up to 25 users are supported.", "A 30-day trial is offered.",
         "The export is report.pdf and the settings live in config.yaml.",
         "Version 2.4 added single sign-on.", "Support answers within 4 hours.",
         "The shortlist has 3 vendors.", "Mail questions to ops@vendor.example first.")
PLANS = ("Starter", "Team", "Business", "Enterprise", "Pro", "Basic")


@dataclass(frozen=True)
class Case:
    """One generated draft: its brief document, text and expected finding."""

    kind: str            # "price" | "url"
    label: str           # "clean" | what was altered
    brief: dict[str, Any]
    text: str
    altered: tuple[int, int] | None  # span of the one altered price or URL, None when clean


@dataclass(frozen=True)
class _Approved:
    currency: str
    amount: Decimal
    unit: str | None


def _brief(evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": "triz-brief/1", "task": "Shortlist of asset inventory tools",
            "steps": [{"id": "S1", "title": "Vendor pricing"}], "citations": [],
            "evidence": evidence}


# -- prices ------------------------------------------------------------------------------------

def _group(amount: Decimal, sep: str, dec: str, decimals: bool) -> str:
    text = f"{amount:,.2f}" if decimals else f"{amount:,.0f}"
    return text.replace(",", "\0").replace(".", dec).replace("\0", sep)


def _write_amount(rng: random.Random, currency: str, amount: Decimal, form: str) -> str:
    """The amount the way a draft writes it, in a convention readers of ``currency`` share."""
    whole = amount == amount.to_integral_value()
    decimals = not whole or rng.random() < 0.4
    if whole and amount >= 10_000 and amount % 1000 == 0 and rng.random() < 0.6:
        for factor, words in ((10**9, ("bn", " billion", "B")), (10**6, ("m", "M", " million")),
                              (10**3, ("k", "K", " thousand"))):
            if amount % (factor // 10) == 0 and amount >= factor:
                scaled = (amount / factor).normalize()
                return f"{scaled:f}{rng.choice(words)}"
    styles = ["us", "plain"]
    if currency not in DOT_DECIMAL:
        styles.append("eu")
    if form.startswith("{a}") and currency not in DOT_DECIMAL:
        styles.append("space")
    style = rng.choice(styles)
    if style == "plain" or amount < 1000:
        text = f"{amount:.2f}" if decimals else f"{amount:.0f}"
        return text.replace(".", ",") if style in {"eu", "space"} else text
    if style == "us":
        return _group(amount, ",", ".", decimals)
    if style == "eu":
        return _group(amount, ".", ",", decimals)
    return _group(amount, " ", ",", decimals)


def _write_price(rng: random.Random, p: _Approved, unit_written: str | None) -> str:
    form = rng.choice(CURRENCY_FORMS[p.currency])
    text = form.replace("{a}", _write_amount(rng, p.currency, p.amount, form))
    return f"{text} {unit_written}" if unit_written and not unit_written.startswith("/") \
        else text + (unit_written or "")


def _approved_text(p: _Approved) -> str:
    amount = f"{p.amount:,.2f}" if p.amount >= 1000 else f"{p.amount:f}"
    text = f"{p.currency} {amount}"
    return f"{text} {UNITS[p.unit][0]}" if p.unit else text


def _price_set(rng: random.Random) -> list[_Approved]:
    out: list[_Approved] = []
    for currency in rng.sample(sorted(CURRENCY_FORMS), 4):
        base = rng.choice([Decimal(rng.randint(5, 99)), Decimal(rng.randint(100, 9999)),
                           Decimal(rng.randint(1000, 99999)) / 100,
                           Decimal(rng.randint(10, 900) * 1000),
                           Decimal(rng.choice([15, 25, 120])) * 10**5])
        unit = rng.choice([None, None, *UNITS])
        out.append(_Approved(currency, base, unit))
        if rng.random() < 0.5:  # a second tier in the same currency, for ranges
            out.append(_Approved(currency, base * 2 + 1, unit))
    return out


def _unit_for_draft(rng: random.Random, p: _Approved) -> str | None:
    if p.unit is None:
        return rng.choice([None, None, "per month", "/year"])  # the brief pins no unit
    return rng.choice([None, *UNITS[p.unit][1]])


def _is_approved(prices: list[_Approved], currency: str, amount: Decimal,
                 unit: str | None) -> bool:
    return any(p.currency == currency and p.amount == amount
               and (unit is None or p.unit is None or p.unit == unit) for p in prices)


def _alter_price(rng: random.Random, prices: list[_Approved], p: _Approved
                 ) -> tuple[str, str] | None:
    """(label, text) of ``p`` altered in one respect, or None if this choice stays approved."""
    how = rng.choice(["amount", "currency", "multiplier", "unit", "separator", "amount"])
    unit_written = _unit_for_draft(rng, p)
    unit_key = next((k for k, (_, forms) in UNITS.items() if unit_written in forms), None)
    if how == "amount":
        delta = rng.choice([Decimal(1), Decimal(-1), Decimal(10), Decimal("0.01"), p.amount * 9])
        changed = p.amount + delta
        if changed <= 0 or _is_approved(prices, p.currency, changed, unit_key):
            return None
        return how, _write_price(rng, _Approved(p.currency, changed, p.unit), unit_written)
    if how == "currency":
        currency, form = rng.choice(CURRENCY_SWAPS[p.currency])
        if _is_approved(prices, currency, p.amount, unit_key):
            return None
        written = form.replace("{a}", _write_amount(rng, p.currency, p.amount, form))
        return how, f"{written} {unit_written}" if unit_written else written
    if how == "multiplier":
        if p.amount != p.amount.to_integral_value():
            return None
        changed, suffix = rng.choice([(p.amount * 1000, "k"), (p.amount * 10**6, "m"),
                                      (p.amount * 10**6, " million")])
        if _is_approved(prices, p.currency, changed, unit_key):
            return None
        form = rng.choice([f for f in CURRENCY_FORMS[p.currency] if f.startswith(("{a}", "€",
                                                                                  "$", "C$"))]
                          or CURRENCY_FORMS[p.currency])
        return how, form.replace("{a}", f"{p.amount:f}{suffix}")
    if how == "unit":
        if p.unit is None:
            return None
        written = _write_price(rng, p, None)
        return how, f"{written} {rng.choice(UNIT_SWAPS[p.unit])}"
    # separator: a dot-decimal currency written with a decimal point where it had thousands
    if p.currency not in {"USD", "GBP"} or not 1000 <= p.amount < 10**6 \
            or p.amount != p.amount.to_integral_value():
        return None
    symbol = "$" if p.currency == "USD" else "£"
    changed = p.amount / 1000
    if _is_approved(prices, p.currency, changed, None):
        return None
    return how, f"{symbol}{_group(p.amount, '.', ',', False)}"


def _range_text(rng: random.Random, low: _Approved, high: _Approved) -> str:
    shape = rng.choice(["dash", "to", "between", "suffix"])
    first = rng.choice([f for f in CURRENCY_FORMS[low.currency] if not f.startswith("{a}")]
                       or ["{a} " + low.currency])
    form = "{a}" if shape == "suffix" else first  # space-grouped thousands only before a code
    amount_low = _write_amount(rng, low.currency, low.amount, form)
    amount_high = _write_amount(rng, high.currency, high.amount, form)
    if shape == "suffix" or first.startswith("{a}"):
        return f"{amount_low}-{amount_high} {low.currency}"
    if shape == "dash":
        return first.replace("{a}", f"{amount_low}-{amount_high}")
    second = first.replace("{a}", amount_high)
    if shape == "to":
        return f"{first.replace('{a}', amount_low)} to {second}"
    return f"between {first.replace('{a}', amount_low)} and {second}"


def _sentence(rng: random.Random, price: str) -> str:
    return rng.choice([f"The {rng.choice(PLANS)} plan costs {price}.",
                       f"List price: {price}.", f"Budget {price} for the licences.",
                       f"At {price} it is the cheapest option.", f"Pricing starts at {price}."])


def _altered_range(rng: random.Random, prices: list[_Approved]) -> str | None:
    """A range whose upper end is not approved (issue 13 item 5: every end is a price)."""
    p = rng.choice(prices)
    high = _Approved(p.currency, p.amount + 7, p.unit)
    if _is_approved(prices, p.currency, high.amount, None):
        return None
    return _range_text(rng, p, high)


def _price_case(rng: random.Random, altered: bool) -> Case:
    prices = _price_set(rng)
    evidence = [{"id": "E1", "url": "https://vendor.example/pricing",
                 "prices": [_approved_text(p) for p in prices]}]
    parts: list[str] = []
    span: tuple[int, int] | None = None
    label = "clean"
    chosen = rng.sample(prices, min(len(prices), rng.randint(2, 3)))
    target = rng.randrange(len(chosen)) if altered else -1
    for i, p in enumerate(chosen):
        parts.append(rng.choice(NOISE))
        if i == target:
            change: tuple[str, str] | None = None
            while change is None:
                if rng.random() < 0.2:
                    text = _altered_range(rng, prices)
                    change = ("range_end", text) if text else None
                else:
                    change = _alter_price(rng, prices, p)
            label, text = change
            sentence = _sentence(rng, text)
            offset = sum(len(x) + 1 for x in parts) + sentence.index(text)
            span = (offset, offset + len(text))
            parts.append(sentence)
            continue
        pair = [q for q in prices if q.currency == p.currency and q.amount > p.amount]
        if pair and rng.random() < 0.5:
            parts.append(f"Plans cost {_range_text(rng, p, pair[0])}.")
        else:
            parts.append(_sentence(rng, _write_price(rng, p, _unit_for_draft(rng, p))))
    return Case("price", label, _brief(evidence), " ".join(parts), span)


# -- URLs --------------------------------------------------------------------------------------

HOST_WORDS = ("vendor", "tools", "assets", "inventory", "docs", "cloud", "secure", "audit")
PATH_WORDS = ("pricing", "plans", "api", "v2", "enterprise", "eu", "compare", "catalogue")
TLDS = ("example", "test", "com", "org", "net", "io", "de", "pl")
TRACKING = ("utm_source=newsletter", "utm_medium=email", "utm_campaign=q4", "gclid=abc123",
            "fbclid=xyz", "msclkid=42")


@dataclass(frozen=True)
class _Url:
    scheme: str
    host: str
    port: int | None
    path: str
    query: tuple[str, ...]

    def text(self) -> str:
        port = f":{self.port}" if self.port else ""
        query = "?" + "&".join(self.query) if self.query else ""
        return f"{self.scheme}://{self.host}{port}{self.path}{query}"


def _url_set(rng: random.Random) -> list[_Url]:
    out = []
    for _ in range(3):
        host = f"{rng.choice(HOST_WORDS)}-{rng.choice('abcdefgh')}.{rng.choice(TLDS)}"
        if rng.random() < 0.3:
            host = f"{rng.choice(('www', 'docs', 'app'))}.{host}"
        path = "/" + "/".join(rng.sample(PATH_WORDS, rng.randint(1, 3)))
        query = tuple(f"{k}={v}" for k, v in rng.sample(
            [("region", "eu"), ("plan", "pro"), ("lang", "en"), ("tier", "2")],
            rng.choice([0, 0, 1, 2])))
        scheme = rng.choice(["https", "https", "https", "http"])
        port = rng.choice([None, None, None, 8080])
        out.append(_Url(scheme, host, port, path, query))
    return out


def _write_url(rng: random.Random, u: _Url) -> str:
    """A clean writing of ``u``: same resource, shape varied by the documented canonical rule."""
    scheme = rng.choice([u.scheme, u.scheme.upper()])
    host = rng.choice([u.host, u.host.upper(), u.host.title()])
    default = f":{443 if u.scheme == 'https' else 80}"
    port = f":{u.port}" if u.port else rng.choice(["", "", default])
    query = list(u.query)
    rng.shuffle(query)
    if rng.random() < 0.4:
        query.insert(rng.randint(0, len(query)), rng.choice(TRACKING))
    path = u.path + rng.choice(["", "", "/"])
    tail = ("?" + "&".join(query) if query else "") + rng.choice(["", "", "#plans"])
    if not port and not u.query and rng.random() < 0.3:  # scheme-less, as drafts write it
        return f"{u.host}{path}{tail}"
    return f"{scheme}://{host}{port}{path}{tail}"


def _alter_url(rng: random.Random, urls: list[_Url], u: _Url) -> tuple[str, str]:
    while True:
        how, text = _alter_url_once(rng, u)
        if all(text != x.text() for x in urls):
            return how, text


def _alter_url_once(rng: random.Random, u: _Url) -> tuple[str, str]:
    how = rng.choice(["host", "path", "query", "scheme", "port", "bare_path", "www", "bare_host"])
    if how == "bare_host" and not u.host.endswith(".pl"):  # ".pl" alone is no host (documented)
        first, rest = u.host.split(".", 1)
        return how, f"{first}z.{rest}"
    if how in ("host", "bare_host"):
        how = "host"
        first, rest = u.host.split(".", 1)
        changed = _Url(u.scheme, first[:-1] + ("x" if first[-1] != "x" else "y") + "." + rest,
                       u.port, u.path, u.query)
    elif how == "www":
        host = u.host[4:] if u.host.startswith("www.") else "www." + u.host
        changed = _Url(u.scheme, host, u.port, u.path, u.query)
    elif how in ("path", "bare_path"):
        path = rng.choice([u.path + "/extra", u.path.replace("/", "/x", 1), u.path.upper()])
        changed = _Url(u.scheme, u.host, u.port, path, u.query)
        if how == "bare_path" and not u.port and not u.query:
            return how, f"{changed.host}{changed.path}"
    elif how == "query":
        query = (*u.query, "plan=free") if not u.query or rng.random() < 0.5 else u.query[1:]
        if query == u.query or set(query) == set(u.query):
            query = (*u.query, "debug=1")
        changed = _Url(u.scheme, u.host, u.port, u.path, query)
    elif how == "scheme":
        changed = _Url("http" if u.scheme == "https" else "https", u.host, u.port, u.path,
                       u.query)
    else:
        changed = _Url(u.scheme, u.host, 8443 if u.port != 8443 else 9443, u.path, u.query)
    return how, changed.text()


def _url_markup(rng: random.Random, url: str, correct: str | None = None) -> tuple[str, int]:
    """``url`` in markdown; returns the markup and the offset of ``url`` in it.  With
    ``correct``, a markdown link may pair the altered URL with a correct one."""
    shape = rng.choice(["plain", "angle", "em", "strong", "under", "link", "self", "paren"])
    if shape == "angle":
        return f"<{url}>", 1
    if shape == "em":
        return f"*{url}*", 1
    if shape == "strong":
        return f"**{url}**", 2
    if shape == "under":
        return f"_{url}_", 1
    if shape == "link":
        return f"[vendor page]({url})", 14
    if shape == "self":
        if correct is not None and rng.random() < 0.5:
            return f"[{correct}]({url})", len(correct) + 3
        if correct is not None:
            return f"[{url}]({correct})", 1
        return f"[{url}]({url})", 1
    if shape == "paren":
        return f"(source: {url})", 9
    return url, 0


def _url_case(rng: random.Random, altered: bool) -> Case:
    urls = _url_set(rng)
    evidence = [{"id": f"E{i}", "url": u.text()} for i, u in enumerate(urls, 1)]
    parts: list[str] = []
    span: tuple[int, int] | None = None
    label = "clean"
    chosen = rng.sample(urls, rng.randint(1, 3))
    target = rng.randrange(len(chosen)) if altered else -1
    for i, u in enumerate(chosen):
        parts.append(rng.choice(NOISE))
        lead = rng.choice(["Source: ", "Pricing is published at ", "See ", "Details: "])
        end = rng.choice([".", "", " for details."])
        if i == target:
            label, text = _alter_url(rng, urls, u)
            markup, offset = _url_markup(rng, text, correct=_write_url(rng, u))
        else:
            text = _write_url(rng, u)
            markup, offset = _url_markup(rng, text)
            if u.port is None and rng.random() < 0.2:  # the site named by its host alone
                markup, offset = u.host, 0
        start = sum(len(x) + 1 for x in parts) + len(lead) + offset
        if i == target:
            span = (start, start + len(text))
        parts.append(f"{lead}{markup}{end}")
    return Case("url", label, _brief(evidence), " ".join(parts), span)


def generate(seed: int = SEED, per_kind: int = PER_KIND) -> list[Case]:
    """``per_kind`` clean and ``per_kind`` altered drafts per class, from ``seed``."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for make in (_price_case, _url_case):
        for altered in (False, True):
            cases.extend(make(rng, altered) for _ in range(per_kind))
    return cases
