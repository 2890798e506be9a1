import pytest

from quote_service.pricing import Line, PricingError, discount_percent, parse_lines, quote


def test_single_item_has_no_discount():
    assert quote([Line("MUG-01", 1999, 1)]).to_dict() == {
        "subtotal_cents": 1999, "discount_percent": 0, "discount_cents": 0, "total_cents": 1999}


def test_nine_units_have_no_discount():
    assert quote([Line("PEN-30", 250, 9)]).discount_percent == 0


def test_eleven_units_get_five_percent():
    q = quote([Line("PEN-30", 200, 11)])
    assert (q.subtotal_cents, q.discount_percent, q.discount_cents, q.total_cents) == (
        2200, 5, 110, 2090)


def test_quantities_of_all_lines_count_together():
    q = quote([Line("PEN-30", 100, 6), Line("CAP-07", 300, 6)])
    assert q.discount_percent == 5
    assert q.total_cents == 2400 - 120


def test_fifty_one_units_get_ten_percent():
    assert quote([Line("TEE-11", 1000, 51)]).discount_percent == 10


def test_large_orders_get_fifteen_percent():
    q = quote([Line("TEE-11", 1000, 150)])
    assert (q.discount_percent, q.total_cents) == (15, 127500)


def test_half_cent_discount_rounds_up():
    q = quote([Line("PEN-30", 30, 11)])  # 5 % of 330 cents is 16.5 cents
    assert (q.discount_cents, q.total_cents) == (17, 313)


def test_small_tiers_below_the_first_boundary():
    assert [discount_percent(n) for n in (0, 1, 5, 9)] == [0, 0, 0, 0]


def test_empty_order_is_refused():
    with pytest.raises(PricingError):
        quote([])


@pytest.mark.parametrize("item", [
    {"sku": "A", "unit_price_cents": -1, "quantity": 1},
    {"sku": "A", "unit_price_cents": 10, "quantity": 0},
    {"sku": "A", "unit_price_cents": 1.5, "quantity": 1},
    {"sku": "A", "unit_price_cents": 10, "quantity": True},
    {"sku": "", "unit_price_cents": 10, "quantity": 1},
    {"unit_price_cents": 10, "quantity": 1},
])
def test_malformed_items_are_refused(item):
    with pytest.raises(PricingError):
        parse_lines({"items": [item]})


def test_parse_lines_reads_every_item():
    lines = parse_lines({"items": [{"sku": "A", "unit_price_cents": 5, "quantity": 2},
                                   {"sku": "B", "unit_price_cents": 7, "quantity": 3}]})
    assert lines == [Line("A", 5, 2), Line("B", 7, 3)]
