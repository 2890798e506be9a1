"""The original functions of the site: they must keep working whatever changes elsewhere."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from served import HttpClient, serve

RUN_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
HIDDEN_TOKEN = re.compile(r'<input type="hidden" name="run_token" value="([^"]*)">')


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpClient]:
    """The site as production serves it (gunicorn, two workers), without mail settings."""
    with serve({}, tmp_path_factory.mktemp("state")) as app:
        yield app.client()


@pytest.mark.parametrize(
    ("path", "heading"), [("/", "Welcome to Feedback App"), ("/about", "About")]
)
def test_html_pages(client: HttpClient, path: str, heading: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert f"<h1>{heading}</h1>" in page
    for link in ('href="/"', 'href="/about"', 'href="/contact"'):
        assert link in page


def test_about_page_shows_the_version(client: HttpClient) -> None:
    assert "Version 1.4.2" in client.get("/about").get_data(as_text=True)


def test_api_info_is_deterministic_json(client: HttpClient) -> None:
    first, second = client.get("/api/info"), client.get("/api/info")
    assert first.status_code == 200
    assert first.mimetype == "application/json"
    assert first.get_data() == second.get_data()
    assert first.get_json() == {
        "name": "Feedback App",
        "version": "1.4.2",
        "pages": ["/", "/about", "/contact"],
        "endpoints": ["/api/info", "/api/feedback", "/health"],
    }


def test_health(client: HttpClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_contact_form_has_every_field(client: HttpClient) -> None:
    response = client.get("/contact")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    page = response.get_data(as_text=True)
    assert '<form id="contact-form" method="post" action="/api/feedback"' in page
    for field in ("name", "email", "phone"):
        assert f'name="{field}"' in page
    assert '<textarea id="message" name="message"' in page
    assert "/static/contact.js" in page


def test_contact_form_carries_a_fresh_run_token_per_view(client: HttpClient) -> None:
    tokens = []
    for _ in range(5):
        match = HIDDEN_TOKEN.search(client.get("/contact").get_data(as_text=True))
        assert match is not None
        tokens.append(match.group(1))
    assert all(RUN_TOKEN.fullmatch(token) for token in tokens)
    assert len(set(tokens)) == len(tokens)


@pytest.mark.parametrize(
    ("path", "mimetypes"),
    [
        ("/static/contact.js", {"text/javascript", "application/javascript"}),
        ("/static/style.css", {"text/css"}),
    ],
)
def test_static_files(client: HttpClient, path: str, mimetypes: set[str]) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.mimetype in mimetypes


def test_unknown_page_is_404(client: HttpClient) -> None:
    assert client.get("/no-such-page").status_code == 404


def test_feedback_route_accepts_only_post(client: HttpClient) -> None:
    assert client.get("/api/feedback").status_code == 405
