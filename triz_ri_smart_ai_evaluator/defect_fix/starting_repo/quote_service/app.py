"""The HTTP interface: ``POST /quote`` prices an order, ``GET /health`` answers ok."""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify, request

from .pricing import PricingError, parse_lines, quote


def create_app() -> Flask:
    app = Flask(__name__)

    @app.post("/quote")
    def quote_order() -> Any:
        try:
            lines = parse_lines(request.get_json(silent=True))
            return jsonify(quote(lines).to_dict())
        except PricingError as e:
            return jsonify({"error": str(e)}), 400

    @app.get("/health")
    def health() -> Any:
        return jsonify({"status": "ok"})

    return app
