import pytest

from quote_service import create_app


@pytest.fixture
def client():
    return create_app().test_client()


def test_quote_endpoint_prices_an_order(client):
    response = client.post("/quote", json={"items": [
        {"sku": "TEE-11", "unit_price_cents": 1500, "quantity": 12}]})
    assert response.status_code == 200
    assert response.get_json() == {"subtotal_cents": 18000, "discount_percent": 5,
                                   "discount_cents": 900, "total_cents": 17100}


def test_quote_endpoint_answers_json(client):
    response = client.post("/quote", json={"items": [
        {"sku": "MUG-01", "unit_price_cents": 1999, "quantity": 2}]})
    assert response.content_type == "application/json"
    assert response.get_json()["total_cents"] == 3998


def test_body_that_is_not_json_is_refused(client):
    response = client.post("/quote", data="items=1", content_type="text/plain")
    assert response.status_code == 400
    assert "error" in response.get_json()


def test_order_without_items_is_refused(client):
    assert client.post("/quote", json={"items": []}).status_code == 400


def test_health(client):
    assert client.get("/health").get_json() == {"status": "ok"}
