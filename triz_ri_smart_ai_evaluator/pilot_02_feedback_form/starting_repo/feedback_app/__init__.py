"""Feedback App: a small Flask site with a contact form.

Served in production by ``gunicorn --workers 2 'feedback_app:create_app()'``.
"""

from __future__ import annotations

from flask import Flask

from . import feedback, pages
from .config import SETTINGS_EXTENSION, Settings, load_settings

__all__ = ["create_app"]


def create_app(settings: Settings | None = None) -> Flask:
    """Build the application; ``settings`` default to the process environment.

    Raises ``ConfigError`` when an environment variable is present but malformed.
    """
    settings = settings if settings is not None else load_settings()
    app = Flask(__name__)
    app.config["SECRET_KEY"] = settings.secret_key
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    # The settings live here rather than in app.config so that nothing that dumps the config
    # (a debug page, an error report) can print the SMTP password.
    app.extensions[SETTINGS_EXTENSION] = settings
    app.register_blueprint(pages.bp)
    app.register_blueprint(feedback.bp)
    return app

