"""``POST /api/feedback``: the contact form's sending route.

Not implemented yet: the route answers ``501 {"status": "not_implemented"}`` and sends nothing.
TASK.md describes what it must do; this module, ``mailer.py`` and a new ``validation.py`` are where
that work goes.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

bp = Blueprint("feedback", __name__)


@bp.post("/api/feedback")
def submit_feedback() -> tuple[Response, int]:
    return jsonify(status="not_implemented"), 501
