"""The pilot 02 field contract, mail body format and body parser (trusted side).

This module is the trusted reference of ``docs/pilot-02-contract.md``: the harness labels the
scenarios with :func:`validate_submission` and reads the messages the receiver accepted with
:func:`parse_feedback_body`.  It does no I/O: no sockets, clocks, files or environment reads.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from triz_ri_smart_ai_evaluator.errors import InputError

__all__ = [
    "BODY_KEYS",
    "EMAIL_MAX_LENGTH",
    "FIELDS",
    "MESSAGE_MARKER",
    "MESSAGE_MAX_LENGTH",
    "NAME_MAX_LENGTH",
    "PHONE_ALLOWED_CHARACTERS",
    "PHONE_MAX_LENGTH",
    "PHONE_MIN_DIGITS",
    "REASON_CONTROL_CHARACTER",
    "REASON_INVALID_FORMAT",
    "REASON_REQUIRED",
    "REASON_TOO_LONG",
    "RUN_TOKEN_HEADER",
    "RUN_TOKEN_PATTERN",
    "SINGLE_HEADERS",
    "SUBJECT",
    "TEMPORARY_FAILURE_REPLY",
    "MalformedMessage",
    "ParsedFeedback",
    "build_feedback_body",
    "is_valid_run_token",
    "normalize_line_endings",
    "parse_feedback_body",
    "read_feedback_fields_leniently",
    "validate_submission",
]

# Field contract (contract "Field contract" table).
NAME_MAX_LENGTH: Final = 100
EMAIL_MAX_LENGTH: Final = 254
MESSAGE_MAX_LENGTH: Final = 5000
PHONE_MAX_LENGTH: Final = 32
PHONE_MIN_DIGITS: Final = 5
# "only digits, spaces, +, -, (, )": ASCII digits, since a phone number is dialled, not read.
PHONE_ALLOWED_CHARACTERS: Final = frozenset("0123456789 +-()")
RUN_TOKEN_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{16,64}")
FIELDS: Final = ("name", "email", "message", "phone", "run_token")

# Reasons reported by validate_submission (the HTTP 400 body carries free-text reasons; these
# are ours, for labelling and for reports).
REASON_REQUIRED: Final = "required"
REASON_TOO_LONG: Final = "too_long"
REASON_CONTROL_CHARACTER: Final = "control_character"
REASON_INVALID_FORMAT: Final = "invalid_format"

# The message (contract "The message").
SUBJECT: Final = "Feedback form submission"
RUN_TOKEN_HEADER: Final = "X-Run-Token"  # noqa: S105 - a header name, not a secret
BODY_KEYS: Final = ("run_token", "name", "email", "phone")
MESSAGE_MARKER: Final = "message:"
# Headers a message may carry at most once (RFC 5322 3.6, RFC 2045, and the contract's token).
SINGLE_HEADERS: Final = frozenset(
    {
        "from",
        "sender",
        "reply-to",
        "to",
        "cc",
        "bcc",
        "subject",
        "date",
        "message-id",
        "in-reply-to",
        "references",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
        RUN_TOKEN_HEADER.lower(),
    }
)

# Contract "Temporary SMTP failure and Recovery".
TEMPORARY_FAILURE_REPLY: Final = "451 4.3.0 Temporary failure, try again later"


class MalformedMessage(InputError):
    """A received body does not have the contract's five-part form."""


@dataclass(frozen=True, slots=True)
class ParsedFeedback:
    """The fields read from a well-formed feedback body; ``phone`` is ``""`` when absent."""

    run_token: str
    name: str
    email: str
    phone: str
    message: str


def _is_blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def _has_control(text: str, allowed: frozenset[str] = frozenset()) -> bool:
    return any(unicodedata.category(ch) == "Cc" and ch not in allowed for ch in text)


def _name_error(value: object) -> str | None:
    if _is_blank(value):
        return REASON_REQUIRED
    assert isinstance(value, str)
    if len(value) > NAME_MAX_LENGTH:
        return REASON_TOO_LONG
    if _has_control(value):
        return REASON_CONTROL_CHARACTER
    return None


def _email_error(value: object) -> str | None:
    if _is_blank(value):
        return REASON_REQUIRED
    assert isinstance(value, str)
    if len(value) > EMAIL_MAX_LENGTH:
        return REASON_TOO_LONG
    if _has_control(value):
        return REASON_CONTROL_CHARACTER
    if any(ch.isspace() for ch in value) or value.count("@") != 1:
        return REASON_INVALID_FORMAT
    local, domain = value.split("@")
    # Contract: "a non-empty local part and a domain with a dot", ASCII or not.
    if not local or "." not in domain:
        return REASON_INVALID_FORMAT
    return None


def _message_error(value: object) -> str | None:
    if _is_blank(value):
        return REASON_REQUIRED
    assert isinstance(value, str)
    if len(value) > MESSAGE_MAX_LENGTH:
        return REASON_TOO_LONG
    if _has_control(value, allowed=frozenset("\n\t")):
        return REASON_CONTROL_CHARACTER
    return None


def _phone_error(value: object) -> str | None:
    # Optional: a missing, null or empty phone is absent.
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return REASON_INVALID_FORMAT
    if len(value) > PHONE_MAX_LENGTH:
        return REASON_TOO_LONG
    if any(ch not in PHONE_ALLOWED_CHARACTERS for ch in value):
        return REASON_INVALID_FORMAT
    if sum(ch.isascii() and ch.isdigit() for ch in value) < PHONE_MIN_DIGITS:
        return REASON_INVALID_FORMAT
    return None


def _run_token_error(value: object) -> str | None:
    if _is_blank(value):
        return REASON_REQUIRED
    if not is_valid_run_token(value):
        return REASON_INVALID_FORMAT
    return None


def is_valid_run_token(value: object) -> bool:
    """True when ``value`` is a string matching ``[A-Za-z0-9_-]{16,64}`` as a whole."""
    return isinstance(value, str) and RUN_TOKEN_PATTERN.fullmatch(value) is not None


def validate_submission(payload: Mapping[str, object]) -> dict[str, str]:
    """Check a submission against the field contract.

    Returns field -> reason for every invalid field; an empty dict means the submission is
    valid.  A missing key and a ``None`` value are the same (a ``null`` scenario field is left
    out of the request).  Keys other than the five fields are ignored.  Raises nothing.
    """
    checks = {
        "name": _name_error,
        "email": _email_error,
        "message": _message_error,
        "phone": _phone_error,
        "run_token": _run_token_error,
    }
    errors: dict[str, str] = {}
    for field, check in checks.items():
        reason = check(payload.get(field))
        if reason is not None:
            errors[field] = reason
    return errors


def build_feedback_body(
    *, run_token: str, name: str, email: str, message: str, phone: str | None = None
) -> str:
    """The body text of the contract for one submission, values verbatim.

    The message is always followed by one ``\\n`` so that a message that itself ends with a
    newline survives the parser's removal of one trailing ``\\n``.  Raises nothing.
    """
    lines = [
        f"run_token: {run_token}",
        f"name: {name}",
        f"email: {email}",
        f"phone: {phone or ''}",
        MESSAGE_MARKER,
    ]
    return "\n".join(lines) + "\n" + message + "\n"


def normalize_line_endings(text: str) -> str:
    """Turn the CRLF line endings SMTP imposes on a body back into ``\\n``.

    Lossless for every valid submission: no valid value contains a CR.
    """
    return text.replace("\r\n", "\n")


def parse_feedback_body(text: str) -> ParsedFeedback:
    """Parse a body (``\\n`` line endings) by the contract's parsing rule.

    Raises :class:`MalformedMessage` when the first four lines are not ``key: value`` for
    run_token, name, email, phone in that order, or line five is not exactly ``message:``.
    """
    parts = text.split("\n", len(BODY_KEYS) + 1)
    if len(parts) < len(BODY_KEYS) + 1:
        raise MalformedMessage(f"feedback body has {len(parts)} lines, at least 5 are required")
    values: list[str] = []
    for number, (key, line) in enumerate(zip(BODY_KEYS, parts, strict=False), start=1):
        prefix = f"{key}: "
        if not line.startswith(prefix):
            raise MalformedMessage(f"feedback body line {number} is not '{key}: <value>'")
        values.append(line[len(prefix) :])
    if parts[len(BODY_KEYS)] != MESSAGE_MARKER:
        raise MalformedMessage(f"feedback body line 5 is not exactly '{MESSAGE_MARKER}'")
    message = parts[len(BODY_KEYS) + 1] if len(parts) > len(BODY_KEYS) + 1 else ""
    # Contract: at most one trailing newline is removed (mail libraries add one).
    message = message.removesuffix("\n")
    run_token, name, email, phone = values
    return ParsedFeedback(run_token=run_token, name=name, email=email, phone=phone, message=message)


def read_feedback_fields_leniently(text: str) -> dict[str, str]:
    """The fields a malformed body still lets us read, for its ``smtp_events`` line.

    Each of run_token, name, email, phone is taken from the first ``key: value`` line before a
    ``message:`` line; the message is everything after the first ``message:`` line (one
    trailing ``\\n`` removed).  Keys that cannot be read are absent.  Raises nothing.
    """
    fields: dict[str, str] = {}
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line == MESSAGE_MARKER:
            fields["message"] = "\n".join(lines[index + 1 :]).removesuffix("\n")
            break
        key, sep, value = line.partition(": ")
        if sep and key in BODY_KEYS and key not in fields:
            fields[key] = value
    return fields
