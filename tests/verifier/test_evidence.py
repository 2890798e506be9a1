"""URLs and prices: extraction and canonical forms for the evidence gate."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.verifier.evidence import (
    canonical_url,
    find_prices,
    find_urls,
    parse_evidence_price,
    parse_price,
    price_matches,
    url_matches,
)


@pytest.mark.parametrize(("raw", "canonical"), [
    ("https://www.example.com/pricing", "https://www.example.com/pricing"),
    ("HTTPS://WWW.Example.COM/pricing", "https://www.example.com/pricing"),
    ("https://www.example.com:443/pricing", "https://www.example.com/pricing"),
    ("http://example.com:80", "http://example.com/"),
    ("http://example.com:8080/a", "http://example.com:8080/a"),
    ("https://example.com:80/a", "https://example.com:80/a"),
    ("https://example.com", "https://example.com/"),
    ("https://example.com/A/b?X=1&y=2", "https://example.com/A/b?X=1&y=2"),
    ("https://example.com/a#frag", "https://example.com/a"),
    ("https://example.com/?", "https://example.com/"),
    ("www.example.com/pricing", "//www.example.com/pricing"),
    ("https://user@evil.com/", "https://user@evil.com/"),
    ("https://www.example.com@evil.com/pricing", "https://www.example.com@evil.com/pricing"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
])
def test_canonical_url(raw: str, canonical: str):
    assert canonical_url(raw) == canonical


@pytest.mark.parametrize("raw", ["https://", "https://example.com:99999/", "https://:80/"])
def test_canonical_url_refuses_urls_without_a_valid_host_or_port(raw: str):
    with pytest.raises(ValueError):  # noqa: PT011 - urllib's messages vary by version
        canonical_url(raw)


def test_a_scheme_less_host_matches_either_scheme_and_nothing_else():
    approved = frozenset({"https://www.example.com/pricing"})
    assert url_matches("//www.example.com/pricing", approved)
    assert not url_matches("//www.example.com/other", approved)
    assert not url_matches("http://www.example.com/pricing", approved)


@pytest.mark.parametrize(("text", "raw"), [
    ("See https://example.com/a.", "https://example.com/a"),
    ("See https://example.com/a, then", "https://example.com/a"),
    ("(see https://example.com/a)", "https://example.com/a"),
    ("[x](https://example.com/a_(b))", "https://example.com/a_(b)"),
    ("<https://example.com/a>", "https://example.com/a"),
    ("**https://example.com/a**", "https://example.com/a"),
    ("“https://example.com/a”", "https://example.com/a"),
    ("go to www.example.com/pricing!", "www.example.com/pricing"),
    ("https://example.com/a?b=1;", "https://example.com/a?b=1"),
])
def test_trailing_punctuation_is_not_part_of_the_url(text: str, raw: str):
    assert [u.raw for u in find_urls(text)] == [raw]


def test_no_url_in_emails_or_file_names():
    assert find_urls("mail ops@www.example.com or read report.pdf") == ()


@pytest.mark.parametrize(("text", "currency", "amount"), [
    ("€49", "EUR", "49"), ("EUR 49.00", "EUR", "49"), ("49,00 €", "EUR", "49"),
    ("49 EUR", "EUR", "49"), ("$1,299.99", "USD", "1299.99"), ("USD 12", "USD", "12"),
    ("US$12", "USD", "12"), ("£5", "GBP", "5"), ("1 299,99 zł", "PLN", "1299.99"),
    ("1.299,99 EUR", "EUR", "1299.99"), ("€1,299", "EUR", "1299"), ("1.299,00 €", "EUR", "1299"),
    ("1 299 €", "EUR", "1299"), ("EUR 1,234,567.8", "EUR", "1234567.8"), ("CHF 0.5", "CHF", "0.5"),
    ("JPY 1000", "JPY", "1000"), ("€ 49,5", "EUR", "49.5"),
])
def test_prices_canonicalise_to_currency_and_amount(text: str, currency: str, amount: str):
    (p,) = find_prices(f"It costs {text} a month.")
    assert p.canonical == (currency, Decimal(amount))
    assert p.raw == text


@pytest.mark.parametrize("text", [
    "ISO/IEC 27001:2022 clause 9.2", "version 9.2", "2026-09-02", "+48 22 123 45 67",
    "192.168.1.1", "30 days", "EURO 5", "NEUR 5", "the 3 users",
])
def test_non_prices_are_not_prices(text: str):
    assert find_prices(text) == ()


def test_spaces_group_thousands_only_before_a_trailing_currency():
    assert [p.canonical for p in find_prices("€49 100 users")] == [("EUR", Decimal(49))]


def test_parse_price_accepts_exactly_one_price():
    assert parse_price(" EUR 49.00 ") == ("EUR", Decimal("49.00"))
    for bad in ["49", "EUR 49 and USD 2", "about EUR 49"]:
        with pytest.raises(ValueError, match="not exactly one price"):
            parse_price(bad)


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=200))
def test_extraction_never_raises(text: str):
    for u in find_urls(text):
        assert text[u.span[0]:u.span[1]] == u.raw
    for p in find_prices(text):
        assert text[p.span[0]:p.span[1]] == p.raw


@settings(max_examples=300, deadline=None)
@given(amount=st.decimals(min_value=0, max_value=10**9, places=2, allow_nan=False))
def test_formatted_amounts_parse_back(amount: Decimal):
    us = f"${amount:,.2f}"
    eu = f"{amount:,.2f} €".replace(",", "_").replace(".", ",").replace("_", ".")
    assert find_prices(us)[0].amount == amount
    assert find_prices(eu)[0].amount == amount


# -- issue 13 item 5: prices the way real drafts write them -----------------------------------

def _prices(text: str) -> list[tuple[str, Decimal, str | None]]:
    return [(p.currency, p.amount, p.unit) for p in find_prices(text)]


@pytest.mark.parametrize(("text", "currency", "amount"), [
    ("C$30", "CAD", "30"), ("CA$30", "CAD", "30"), ("A$30", "AUD", "30"),
    ("AU$30", "AUD", "30"), ("NZ$30", "NZD", "30"), ("HK$30", "HKD", "30"),
    ("S$30", "SGD", "30"), ("R$30", "BRL", "30"), ("US$30", "USD", "30"), ("$30", "USD", "30"),
    ("CAD $30", "CAD", "30"), ("$30 CAD", "CAD", "30"), ("$30 USD", "USD", "30"),
    ("35 US dollars", "USD", "35"), ("35 dollars", "USD", "35"), ("49 euros", "EUR", "49"),
    ("15 pounds sterling", "GBP", "15"), ("20 Swiss francs", "CHF", "20"),
    ("1000 yen", "JPY", "1000"), ("30 Canadian dollars", "CAD", "30"),
    ("12 EURO", "EUR", "12"), ("CHF 1'299.50", "CHF", "1299.50"),
])
def test_currency_symbols_codes_and_names_are_distinguished(text: str, currency: str,
                                                            amount: str):
    """Issue 13 item 5: "C$30" and "A$30" are not USD; "35 US dollars" is a price."""
    assert _prices(f"It costs {text} today.") == [(currency, Decimal(amount), None)]


def test_an_ambiguous_symbol_never_resolves_to_one_currency():
    """Issue 13 item 5: "¥" is yen or yuan, "kr" any crown; a code next to it decides."""
    (yen,) = find_prices("¥1000")
    assert yen.currency not in {"JPY", "CNY"}
    assert find_prices("¥1000 JPY")[0].currency == "JPY"
    assert find_prices("99 kr")[0].currency not in {"SEK", "NOK", "DKK"}
    assert find_prices("C$30 USD")[0].currency not in {"CAD", "USD"}


@pytest.mark.parametrize(("text", "amount"), [
    ("EUR 49k", "49000"), ("€49K", "49000"), ("$1.5m", "1500000"), ("$2M", "2000000"),
    ("EUR 3 million", "3000000"), ("€2bn", "2000000000"), ("$1.2 billion", "1200000000"),
    ("49 thousand EUR", "49000"), ("35 million US dollars", "35000000"), ("€1,5k", "1500"),
])
def test_multipliers_scale_the_amount(text: str, amount: str):
    """Issue 13 item 5: "EUR 49k" is 49,000, not 49."""
    (p,) = find_prices(f"Revenue of {text} was reported.")
    assert p.amount == Decimal(amount)


@pytest.mark.parametrize(("text", "ends"), [
    ("EUR 49-99", ["49", "99"]), ("€49 to €99", ["49", "99"]), ("€49 - €99", ["49", "99"]),
    ("between $10 and $20", ["10", "20"]), ("between $10 and 20", ["10", "20"]),
    ("49-99 EUR", ["49", "99"]), ("$10-20k", ["10000", "20000"]), ("€49 to 99", ["49", "99"]),
])
def test_every_end_of_a_range_is_a_price(text: str, ends: list[str]):
    """Issue 13 item 5: "EUR 49-99" is two prices, 49 and 99."""
    assert [p.amount for p in find_prices(f"Plans cost {text} a month.")] == [
        Decimal(e) for e in ends]


def test_and_without_between_does_not_make_a_range():
    """Issue 13 item 5: "and" joins a range only after "between", and hides no price."""
    assert [p.raw for p in find_prices("€49 and 3 users")] == ["€49"]
    assert [p.canonical for p in find_prices("€49 and 20 USD")] == [
        ("EUR", Decimal(49)), ("USD", Decimal(20))]
    assert [p.raw for p in find_prices("5 $49")] == ["$49"]


@pytest.mark.parametrize(("text", "amount"), [
    ("EUR 1.299,99", "1299.99"), ("€1,299.99", "1299.99"), ("1 299,99 €", "1299.99"),
    ("$1.299", "1.299"), ("$1,299", "1299"), ("£0.023", "0.023"), ("€0,5", "0.5"),
    ("€1.2345", "1.2345"),
])
def test_both_separator_conventions(text: str, amount: str):
    """Issue 13 item 5: dot-decimal currencies (USD, GBP, ...) read "1.299" as 1.299."""
    assert find_prices(text)[0].amount == Decimal(amount)


def test_an_ambiguous_euro_amount_remembers_how_it_was_written():
    """Issue 13 item 5: "€1.299" is read as 1299 but an approved "€1.299" only matches itself."""
    (p,) = find_prices("€1.299")
    assert p.amount == Decimal(1299)
    assert p.written is not None
    assert find_prices("€1.299,00")[0].written is None


@pytest.mark.parametrize(("text", "unit"), [
    ("EUR 49 per user per month", "month/user"), ("$10/month", "month"),
    ("€5 per seat/year", "seat/year"), ("€5 per seat per annum", "seat/year"),
    ("EUR 49 a month", "month"), ("$10/mo.", "month"), ("€49 monthly", "month"),
    ("€49 per month per user", "month/user"), ("€49/user/month", "month/user"),
    ("€49 monthly per user", "month/user"),
    ("€49 per the contract", None), ("€49 a lot", None),
])
def test_units_after_a_price(text: str, unit: str | None):
    """Issue 13 item 5: a price may carry a unit; order of the unit's parts does not matter."""
    (p,) = find_prices(text)
    assert p.unit == unit


def test_parse_price_accepts_a_unit():
    """Issue 13 item 5: an evidence price may carry a unit."""
    p = parse_evidence_price("EUR 49 per user per month")
    assert (p.currency, p.amount, p.unit) == ("EUR", Decimal(49), "month/user")
    with pytest.raises(ValueError, match="not exactly one price"):
        parse_evidence_price("EUR 49-99")


def _ok(draft: str, *approved: str) -> bool:
    prices = find_prices(draft)
    assert prices, draft
    return all(price_matches(p, [parse_evidence_price(a) for a in approved]) for p in prices)


@pytest.mark.parametrize(("draft", "approved", "ok"), [
    ("C$30", "$30", False), ("$30", "C$30", False), ("A$30", "C$30", False),
    ("CAD 30", "C$30", True), ("30 Canadian dollars", "C$30", True),
    ("EUR 49k", "EUR 49", False), ("EUR 49k", "EUR 49,000.00", True),
    ("EUR 49k", "EUR 49,000", False), ("EUR 49,000", "EUR 49,000", True),
    ("EUR 49-99", "EUR 49", False), ("EUR 49-99", "EUR 99", False),
    ("35 US dollars", "$36", False), ("35 US dollars", "USD 35", True),
    ("€1,299.99", "EUR 1.299,99", True), ("1 299,99 €", "€1,299.99", True),
    ("$1.299", "$1,299.00", False), ("€1,299", "€1.299,00", True),
    ("€1,299", "EUR 1.299", False), ("€1.299", "EUR 1.299", True),
    ("¥1000", "JPY 1000", False), ("¥1000", "¥1000", True),
    ("EUR 49 per year", "EUR 49 per user per month", False),
    ("EUR 49 per month", "EUR 49 per user per month", False),
    ("EUR 49 per month per user", "EUR 49 per user per month", True),
    ("EUR 49", "EUR 49 per user per month", True),
    ("EUR 49 a month", "EUR 49", True),
    ("€5 per user/year", "€5 per seat/year", False),
])
def test_price_matching(draft: str, approved: str, ok: bool):
    """Issue 13 item 5: currency, amount, multiplier and a written unit must all agree."""
    assert _ok(draft, approved) is ok


# -- issue 13 item 6: URLs the way real drafts write them -------------------------------------

@pytest.mark.parametrize(("text", "raws"), [
    ("see vendor-d.example/pricing.", ["vendor-d.example/pricing"]),
    ("docs.vendor.example/api, then", ["docs.vendor.example/api"]),
    ("_https://a.example/x_", ["https://a.example/x"]),
    ("*https://a.example/x*", ["https://a.example/x"]),
    ("**https://a.example/x**.", ["https://a.example/x"]),
    ("[https://a.example/x](https://a.example/x)", ["https://a.example/x", "https://a.example/x"]),
    ("[a.example/x](https://a.example/y)", ["a.example/x", "https://a.example/y"]),
    ("visit vendor.example today", ["vendor.example"]),
    ("see _vendor.example_ and **vendor.example/x**", ["vendor.example", "vendor.example/x"]),
])
def test_bare_domains_emphasis_and_markdown_links(text: str, raws: list[str]):
    """Issue 13 item 6: every URL-like span is read, the text of a link and its target."""
    assert [u.raw for u in find_urls(text)] == raws


@pytest.mark.parametrize("text", [
    "report.pdf", "config.yaml", "setup.py", "README.md", "version 1.2.3", "v2.0/3.0",
    "ops@vendor.example", "mail ops@vendor.example/x", "e.g. this", "i.e. that", "Node.js",
    "ASP.NET", "clause 9.2/9.3", "A.5.9", "run.sh", "lib.so", "main.rs", "archive.zip",
    "the end.Next sentence", "file.pl",
])
def test_file_names_versions_and_emails_are_not_urls(text: str):
    """Issue 13 item 6: only a host whose last label is a listed TLD counts."""
    assert find_urls(f"See {text} here.") == ()


@pytest.mark.parametrize(("raw", "canonical"), [
    ("https://a.example/pricing/", "https://a.example/pricing"),
    ("https://a.example/p?utm_source=x&plan=pro&gclid=1", "https://a.example/p?plan=pro"),
    ("https://a.example/p?fbclid=1&utm_medium=y", "https://a.example/p"),
    ("https://a.example/p?b=2&a=1", "https://a.example/p?a=1&b=2"),
    ("https://A.Example./p", "https://a.example/p"),
    ("https://a.example/p%7e", "https://a.example/p%7E"),
])
def test_canonical_url_drops_what_names_the_same_resource(raw: str, canonical: str):
    """Issue 13 item 6: trailing slash, tracking parameters and query order are not alterations."""
    assert canonical_url(raw) == canonical


@pytest.mark.parametrize(("draft", "ok"), [
    ("https://vendor.example/pricing", True), ("HTTPS://VENDOR.EXAMPLE:443/pricing/", True),
    ("vendor.example/pricing", True), ("vendor.example", True),
    ("https://vendor.example/pricing?utm_campaign=q4", True),
    ("http://vendor.example/pricing", False), ("https://vendor.example/Pricing", False),
    ("https://vendor.example/pricing?plan=pro", False),
    ("https://vendor.example.net/pricing", False),
    ("vendor-x.example/pricing", False), ("vendor-x.example", False),
    ("https://vendor.example/pricing/eu", False),
])
def test_url_matching(draft: str, ok: bool):
    """Issue 13 item 6: host, path, query and scheme differences are alterations."""
    approved = frozenset({canonical_url("https://vendor.example/pricing")})
    (u,) = find_urls(f"Source: {draft}.")
    assert u.canonical is not None
    assert url_matches(u.canonical, approved) is ok


@pytest.mark.parametrize(("text", "currency", "amount"), [
    ("R$ 6 575,00", "BRL", "6575.00"), ("€1 299,99", "EUR", "1299.99"), ("30 C$", "CAD", "30"),
    ("30 $", "USD", "30"), ("49 €/month", "EUR", "49"), ("49,- €", "EUR", "49"),
    ("€ 1.299,-", "EUR", "1299"),
])
def test_more_writings_of_a_price(text: str, currency: str, amount: str):
    """Issue 13 item 5: spaced thousands after a symbol need decimals ("€49 100 users" is 49)."""
    (p,) = find_prices(f"Plans cost {text} today.")
    assert p.canonical == (currency, Decimal(amount))


def test_rupees_without_a_country_are_ambiguous():
    (p,) = find_prices("Rs. 500")
    assert p.amount == 500
    assert p.currency not in {"INR", "PKR"}


@pytest.mark.parametrize(("text", "raw"), [
    ("get ftp://evil.example/tool now", "ftp://evil.example/tool"),
    ("~~https://a.example/x~~", "https://a.example/x"),
])
def test_other_schemes_and_strikethrough(text: str, raw: str):
    """Issue 13 item 6: a URL of another scheme is read (and never on evidence)."""
    (u,) = find_urls(text)
    assert u.raw == raw
    assert u.canonical is not None
    assert not url_matches(u.canonical, frozenset({"https://evil.example/tool"}))


@pytest.mark.parametrize("text", [
    "1 000 " * 20000 + " x EUR", "1 " * 50000 + "EUR", "1,000" * 20000 + " EUR",
    "€1 per a " * 10000, "a.de." * 20000, "[https://a.example/x](" * 5000, "ABC$" * 25000,
    "between $1 and " * 8000, "ftp://" * 15000 + "a.example",
])
def test_extraction_stays_linear_on_hostile_input(text: str):
    """Issue 13 items 5-6: the regexes stay linear (a 100k-character draft in well under 5 s)."""
    import time

    start = time.perf_counter()
    find_prices(text)
    find_urls(text)
    assert time.perf_counter() - start < 5
