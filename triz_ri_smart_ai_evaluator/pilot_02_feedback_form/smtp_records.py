"""What the trusted SMTP receiver records: the analysis of one message, the records of
received messages and SMTP events, the per-run credentials and the thread-safe event log.

Pure data and parsing (``email.policy.default``); the receiver's sessions live in ``receiver``.
"""

from __future__ import annotations

import base64
import email
import email.policy
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TypeAlias

from triz_ri_smart_ai_evaluator.errors import InputError

from .contract import (
    RUN_TOKEN_HEADER,
    SINGLE_HEADERS,
    MalformedMessage,
    ParsedFeedback,
    normalize_line_endings,
    parse_feedback_body,
)

JsonDict: TypeAlias = dict[str, object]


def utf8_text(value: str) -> str:
    """``value`` made encodable as UTF-8 (lone surrogates from undecodable bytes escaped)."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


# --------------------------------------------------------------------------- message analysis


@dataclass(frozen=True, slots=True)
class MessageAnalysis:
    """What the receiver reads from the raw bytes of one DATA (pure, see analyse_message)."""

    headers: tuple[tuple[str, str], ...]
    duplicate_headers: tuple[str, ...]
    defects: tuple[str, ...]
    header_defects: tuple[tuple[str, str], ...]
    body: str | None
    body_error: str | None
    x_run_token: str | None
    parsed: ParsedFeedback | None
    parse_error: str | None

    @property
    def run_token(self) -> str | None:
        """The body's run_token when the body parses, else the X-Run-Token header."""
        return self.parsed.run_token if self.parsed is not None else self.x_run_token


def analyse_message(raw: bytes) -> MessageAnalysis:
    """Parse one message with ``email.policy.default`` and the contract's body parser.

    Never raises for hostile input: every failure is recorded in the result instead.
    """
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    headers: list[tuple[str, str]] = []
    header_defects: list[tuple[str, str]] = []
    for name, raw_value in msg.raw_items():
        try:
            value = msg.policy.header_fetch_parse(name, raw_value)
            headers.append((utf8_text(name), utf8_text(str(value))))
            header_defects.extend(
                (utf8_text(name), type(d).__name__) for d in getattr(value, "defects", ())
            )
        except Exception as e:  # the header parser has raised on hostile input before
            headers.append((utf8_text(name), utf8_text(str(raw_value))))
            header_defects.append((utf8_text(name), f"{type(e).__name__}"))
    counts: dict[str, int] = {}
    for name, _ in headers:
        counts[name.lower()] = counts.get(name.lower(), 0) + 1
    duplicates = tuple(
        name for name in sorted(counts) if name in SINGLE_HEADERS and counts[name] > 1
    )
    defects = tuple(type(d).__name__ for part in msg.walk() for d in part.defects)
    x_run_token = next((v for n, v in headers if n.lower() == RUN_TOKEN_HEADER.lower()), None)

    body: str | None = None
    body_error: str | None = None
    try:
        part = msg.get_body(("plain", "html"))
        if part is None:
            body_error = "no text/plain or text/html body"
        else:
            content = part.get_content()
            if isinstance(content, str):
                body = utf8_text(content)
            else:
                body_error = f"body content is {type(content).__name__}, not text"
    except Exception as e:  # unknown charset, broken transfer encoding, ...
        body_error = f"{type(e).__name__}: {e}"

    parsed: ParsedFeedback | None = None
    parse_error: str | None = None
    if body is None:
        parse_error = body_error
    else:
        try:
            parsed = parse_feedback_body(normalize_line_endings(body))
        except MalformedMessage as e:
            parse_error = e.message
    return MessageAnalysis(
        headers=tuple(headers),
        duplicate_headers=duplicates,
        defects=defects,
        header_defects=tuple(header_defects),
        body=body,
        body_error=body_error,
        x_run_token=x_run_token,
        parsed=parsed,
        parse_error=parse_error,
    )


# --------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One DATA transaction the receiver answered (accepted or temporarily refused)."""

    seq: int
    connection: int
    received_at: str
    accepted: bool
    reply: str
    fault: str | None
    mail_from: str | None
    recipients: tuple[str, ...]
    mail_options: tuple[str, ...]
    rcpt_options: tuple[str, ...]
    smtp_utf8: bool
    authenticated_as: str | None
    raw_sha256: str
    analysis: MessageAnalysis
    raw: bytes = field(repr=False)

    @property
    def run_token(self) -> str | None:
        return self.analysis.run_token

    def to_json(self) -> JsonDict:
        a = self.analysis
        parsed: JsonDict | None = None
        if a.parsed is not None:
            parsed = {
                "run_token": a.parsed.run_token,
                "name": a.parsed.name,
                "email": a.parsed.email,
                "phone": a.parsed.phone,
                "message": a.parsed.message,
            }
        return {
            "accepted": self.accepted,
            "reply": self.reply,
            "fault": self.fault,
            "mail_from": self.mail_from,
            "recipients": list(self.recipients),
            "mail_options": list(self.mail_options),
            "rcpt_options": list(self.rcpt_options),
            "smtp_utf8": self.smtp_utf8,
            "authenticated_as": self.authenticated_as,
            "headers": [[n, v] for n, v in a.headers],
            "duplicate_headers": list(a.duplicate_headers),
            "defects": list(a.defects),
            "header_defects": [[n, d] for n, d in a.header_defects],
            "body": a.body,
            "body_error": a.body_error,
            "x_run_token": a.x_run_token,
            "body_run_token": a.parsed.run_token if a.parsed is not None else None,
            "run_token": a.run_token,
            "parsed": parsed,
            "parse_error": a.parse_error,
            "raw_sha256": self.raw_sha256,
            "raw_size": len(self.raw),
            "raw_base64": base64.b64encode(self.raw).decode("ascii"),
        }


@dataclass(frozen=True, slots=True)
class SmtpEvent:
    """One recorded SMTP event; ``seq`` is strictly increasing over the receiver's lifetime."""

    seq: int
    at: str
    kind: str
    connection: int
    peer: str | None
    detail: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    message: ReceivedMessage | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = dict(self.detail)
        out.update(
            seq=self.seq, at=self.at, kind=self.kind, connection=self.connection, peer=self.peer
        )
        if self.message is not None:
            out["message"] = self.message.to_json()
        return out


@dataclass(frozen=True, slots=True)
class ReceiverCredentials:
    """The per-run SMTP credentials; the password is kept out of ``repr``."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.username or not self.password:
            raise InputError("receiver credentials need a non-empty username and password")

    @classmethod
    def random(cls) -> ReceiverCredentials:
        """Fresh credentials for one run, from the ``secrets`` module."""
        return cls(f"feedback-{secrets.token_hex(6)}", secrets.token_urlsafe(24))


class EventLog:
    """Thread-safe, append-only event list with a monotonic sequence number."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._events: list[SmtpEvent] = []
        self._connections = 0

    def new_connection(self) -> int:
        with self._lock:
            self._connections += 1
            return self._connections

    def record(
        self,
        kind: str,
        connection: int,
        peer: str | None,
        detail: Mapping[str, object] | None = None,
        message: Callable[[int, str], ReceivedMessage] | None = None,
    ) -> SmtpEvent:
        with self._lock:
            seq = len(self._events) + 1
            at = self._clock().astimezone(UTC).isoformat(timespec="microseconds")
            event = SmtpEvent(
                seq=seq,
                at=at,
                kind=kind,
                connection=connection,
                peer=peer,
                detail=MappingProxyType(dict(detail or {})),
                message=message(seq, at) if message is not None else None,
            )
            self._events.append(event)
            return event

    def snapshot(self) -> list[SmtpEvent]:
        with self._lock:
            return list(self._events)
