"""Settings, read from the process environment and from nowhere else.

Secrets (the SMTP password, the application secret key) are supplied only through the environment,
so they never sit in the repository, on a command line, in a template or in client-side code.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from flask import current_app

DEFAULT_SMTP_PORT = 25
SETTINGS_EXTENSION = "feedback_app.settings"


class ConfigError(ValueError):
    """An environment variable is present but cannot be used."""


@dataclass(frozen=True)
class SmtpSettings:
    """Where and as whom the feedback mail is sent."""

    host: str
    port: int
    username: str
    password: str = field(repr=False)
    sender: str
    """``FEEDBACK_FROM``: the envelope sender and the ``From`` header."""
    recipient: str
    """``FEEDBACK_TO``: the only address feedback is ever sent to."""


@dataclass(frozen=True)
class Settings:
    secret_key: str = field(repr=False)
    smtp: SmtpSettings | None
    """``None`` when ``SMTP_HOST``, ``FEEDBACK_FROM`` or ``FEEDBACK_TO`` is not set."""


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from ``environ`` (default: ``os.environ``).

    Raises ``ConfigError`` when ``SMTP_PORT`` is not a port number.
    """
    env = os.environ if environ is None else environ
    # Without APP_SECRET_KEY every process gets its own random key: nothing breaks, since the
    # application keeps no signed cookies across requests.
    secret_key = env.get("APP_SECRET_KEY") or secrets.token_hex(32)
    host = env.get("SMTP_HOST", "")
    sender = env.get("FEEDBACK_FROM", "")
    recipient = env.get("FEEDBACK_TO", "")
    if not (host and sender and recipient):
        return Settings(secret_key=secret_key, smtp=None)
    return Settings(
        secret_key=secret_key,
        smtp=SmtpSettings(
            host=host,
            port=_port(env.get("SMTP_PORT", "")),
            username=env.get("SMTP_USERNAME", ""),
            password=env.get("SMTP_PASSWORD", ""),
            sender=sender,
            recipient=recipient,
        ),
    )


def _port(raw: str) -> int:
    if not raw:
        return DEFAULT_SMTP_PORT
    if not raw.isascii() or not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"SMTP_PORT must be a port number, got {raw!r}")
    return int(raw)


def current_settings() -> Settings:
    """The settings of the application handling the current request."""
    settings: Settings = current_app.extensions[SETTINGS_EXTENSION]
    return settings
