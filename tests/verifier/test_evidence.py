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
    parse_price,
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


def test_no_url_in_emails_or_plain_domains():
    assert find_urls("mail ops@www.example.com or visit example.com") == ()


@pytest.mark.parametrize(("text", "currency", "amount"), [
    ("€49", "EUR", "49"), ("EUR 49.00", "EUR", "49"), ("49,00 €", "EUR", "49"),
    ("49 EUR", "EUR", "49"), ("$1,299.99", "USD", "1299.99"), ("USD 12", "USD", "12"),
    ("US$12", "USD", "12"), ("£5", "GBP", "5"), ("1 299,99 zł", "PLN", "1299.99"),
    ("1.299,99 EUR", "EUR", "1299.99"), ("€1,299", "EUR", "1299"), ("1.299,00 €", "EUR", "1299"),
    ("1 299 €", "EUR", "1299"), ("EUR 1,234,567.8", "EUR", "1234567.8"), ("CHF 0.5", "CHF", "0.5"),
    ("¥1000", "JPY", "1000"), ("€ 49,5", "EUR", "49.5"),
])
def test_prices_canonicalise_to_currency_and_amount(text: str, currency: str, amount: str):
    (p,) = find_prices(f"It costs {text} a month.")
    assert p.canonical == (currency, Decimal(amount))
    assert p.raw == text


@pytest.mark.parametrize("text", [
    "ISO/IEC 27001:2022 clause 9.2", "version 9.2", "2026-09-02", "+48 22 123 45 67",
    "192.168.1.1", "30 days", "12 EURO", "EURO 5", "NEUR 5", "the 3 users",
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
