"""Settings come from the environment only, and the password never shows in a repr."""

from __future__ import annotations

import secrets

import pytest
from feedback_app.config import DEFAULT_SMTP_PORT, ConfigError, load_settings


def _environ(**overrides: str) -> dict[str, str]:
    env = {
        "SMTP_HOST": "mail.internal",
        "SMTP_PORT": "2525",
        "SMTP_USERNAME": "feedback-app",
        "SMTP_PASSWORD": secrets.token_urlsafe(16),
        "FEEDBACK_FROM": "noreply@example.org",
        "FEEDBACK_TO": "team@example.org",
        "APP_SECRET_KEY": secrets.token_hex(16),
    }
    env.update(overrides)
    return env


def test_settings_are_read_from_the_environment() -> None:
    env = _environ()
    settings = load_settings(env)
    assert settings.secret_key == env["APP_SECRET_KEY"]
    assert settings.smtp is not None
    assert settings.smtp.host == "mail.internal"
    assert settings.smtp.port == 2525
    assert settings.smtp.username == "feedback-app"
    assert settings.smtp.password == env["SMTP_PASSWORD"]
    assert settings.smtp.sender == "noreply@example.org"
    assert settings.smtp.recipient == "team@example.org"


def test_secrets_are_not_in_the_repr() -> None:
    env = _environ()
    text = repr(load_settings(env))
    assert env["SMTP_PASSWORD"] not in text
    assert env["APP_SECRET_KEY"] not in text


def test_port_defaults_to_25() -> None:
    settings = load_settings(_environ(SMTP_PORT=""))
    assert settings.smtp is not None
    assert settings.smtp.port == DEFAULT_SMTP_PORT == 25


@pytest.mark.parametrize("missing", ["SMTP_HOST", "FEEDBACK_FROM", "FEEDBACK_TO"])
def test_mail_is_unconfigured_without_host_or_addresses(missing: str) -> None:
    env = _environ()
    del env[missing]
    assert load_settings(env).smtp is None


@pytest.mark.parametrize("port", ["smtp", "0", "70000", "25 ", "٢٥"])
def test_a_malformed_port_is_refused(port: str) -> None:
    with pytest.raises(ConfigError, match="SMTP_PORT"):
        load_settings(_environ(SMTP_PORT=port))


def test_a_missing_secret_key_gets_a_random_one() -> None:
    env = _environ()
    del env["APP_SECRET_KEY"]
    first, second = load_settings(env), load_settings(env)
    assert len(first.secret_key) >= 32
    assert first.secret_key != second.secret_key
