"""The pages of the site: home, about, the contact form, and two small JSON endpoints."""

from __future__ import annotations

import secrets
from typing import Final

from flask import Blueprint, Response, jsonify, make_response, render_template

APP_NAME: Final = "Feedback App"
APP_VERSION: Final = "1.4.2"
PAGES: Final = (
    ("/", "Home"),
    ("/about", "About"),
    ("/contact", "Contact"),
)

bp = Blueprint("pages", __name__)


def new_run_token() -> str:
    """A fresh token for one view of the contact form (32 characters of ``[A-Za-z0-9_-]``).

    The token identifies one submission: sending the same form twice sends one message.
    """
    return secrets.token_urlsafe(24)


@bp.get("/")
def home() -> str:
    return render_template("index.html", pages=PAGES, app_name=APP_NAME)


@bp.get("/about")
def about() -> str:
    return render_template(
        "about.html", pages=PAGES, app_name=APP_NAME, app_version=APP_VERSION
    )


@bp.get("/contact")
def contact() -> Response:
    page = render_template(
        "contact.html", pages=PAGES, app_name=APP_NAME, run_token=new_run_token()
    )
    response = make_response(page)
    # Every view carries its own run_token, so the page must not be served from a cache.
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.get("/api/info")
def info() -> Response:
    return jsonify(
        name=APP_NAME,
        version=APP_VERSION,
        pages=[path for path, _title in PAGES],
        endpoints=["/api/info", "/api/feedback", "/health"],
    )


@bp.get("/health")
def health() -> Response:
    return jsonify(status="ok")
