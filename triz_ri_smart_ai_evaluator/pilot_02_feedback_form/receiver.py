"""The trusted SMTP receiver of pilot 02, built on aiosmtpd.

The receiver is the only evidence of delivery (pilot §3, §4: "the application's working log is
not evidence of delivery").  It runs its own asyncio loop in a background thread, bound to a
host/port or to a listening socket the harness created (for instance inside a network
namespace), requires ``AUTH PLAIN``/``LOGIN`` with per-run credentials before ``MAIL``, and
records every SMTP event as data: connections, authentication (the username tried, never the
password), envelope commands, each DATA with its full analysis, and disconnections.

Its behaviour does not depend on message content, with one deliberate exception: the
token-keyed temporary failure of the contract ("Temporary SMTP failure and Recovery").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import AnyStr, Final

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session, syntax

from triz_ri_smart_ai_evaluator._io import write_atomic
from triz_ri_smart_ai_evaluator.errors import ExternalError, InputError

from .._clock import now_utc
from .contract import (
    TEMPORARY_FAILURE_REPLY,
    normalize_line_endings,
    read_feedback_fields_leniently,
)
from .smtp_records import (
    EventLog,
    JsonDict,
    MessageAnalysis,
    ReceivedMessage,
    ReceiverCredentials,
    SmtpEvent,
    analyse_message,
    utf8_text,
)

__all__ = [
    "ACCEPTED_REPLY",
    "AUTH_REQUIRED_REPLY",
    "DEFAULT_DATA_SIZE_LIMIT",
    "FAULT_ALWAYS",
    "FAULT_FIRST_ATTEMPT",
    "FeedbackReceiver",
    "MessageAnalysis",
    "ReceivedMessage",
    "ReceiverCredentials",
    "SmtpEvent",
    "analyse_message",
    "smtp_events_for_scorer",
]

ACCEPTED_REPLY: Final = "250 2.0.0 Message accepted"
AUTH_REQUIRED_REPLY: Final = "530 5.7.0 Authentication required"
FAULT_FIRST_ATTEMPT: Final = "first_attempt_451"
FAULT_ALWAYS: Final = "always_451"
# A feedback message is a few kilobytes; a bound keeps a hostile client from filling memory.
DEFAULT_DATA_SIZE_LIMIT: Final = 1024 * 1024


# ------------------------------------------------------------------------------ SMTP session


def _peer_text(peer: object) -> str | None:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return None if peer is None else utf8_text(str(peer))


class _QuietSession(Session):
    """aiosmtpd's Session without the deprecation warning that aiosmtpd's own AUTH code
    triggers on every successful login (it still sets ``login_data``)."""

    legacy_login: object = None

    @property
    def login_data(self) -> object:
        return self.legacy_login

    @login_data.setter
    def login_data(self, value: object) -> None:
        self.legacy_login = value


class _RecordingSMTP(SMTP):
    """aiosmtpd's SMTP session, recording its events and requiring AUTH before MAIL."""

    def __init__(
        self,
        handler: _Handler,
        *,
        events: EventLog,
        hostname: str,
        data_size_limit: int,
        timeout: float,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__(
            handler,
            hostname=hostname,
            data_size_limit=data_size_limit,
            timeout=timeout,
            loop=loop,
            enable_SMTPUTF8=True,
            # AUTH is required before MAIL, but enforced by check_auth_needed below: with
            # auth_required=True aiosmtpd warns on every connection when TLS is not required,
            # and this private link has no TLS (contract "The application").
            auth_required=False,
            auth_require_tls=False,
            authenticator=handler.authenticate,
        )
        self._events = events
        self._handler_ref = handler
        self.connection_id = events.new_connection()
        self.peer: str | None = None
        self.last_reply: str | None = None
        self.auth_attempt: tuple[str, str | None, bool] | None = None
        self.data_handled = False
        #: The lines of a multi-line reply not yet written (see ``push``).
        self._pending: list[bytes] = []

    def _create_session(self) -> Session:
        return _QuietSession(self.loop)

    def record(self, kind: str, **detail: object) -> None:
        self._events.record(kind, self.connection_id, self.peer, detail)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.peer = _peer_text(transport.get_extra_info("peername"))
        self._handler_ref.sessions.add(self)
        self.record("connect")
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        self._handler_ref.sessions.discard(self)
        self.record("disconnect", error=None if error is None else utf8_text(repr(error)))
        super().connection_lost(error)

    async def push(self, status: AnyStr) -> None:
        reply = status if isinstance(status, str) else status.decode("utf-8", "backslashreplace")
        # AUTH challenges (334) carry no secret, but they are not a command's final reply.
        if not reply.startswith("334"):
            self.last_reply = utf8_text(reply)
        line = status.encode("utf-8") if isinstance(status, str) else bytes(status)
        # A multi-line reply (EHLO's "250-..." lines, then "250 ...") leaves in one write, as
        # one segment: written line by line, it cost ~40 ms per connection over the sandbox's
        # veth (a delayed ACK behind each small segment), 43 ms against 1 ms per EHLO.  The
        # bytes on the wire are the same.
        if len(reply) > 3 and reply[3] == "-":
            self._pending.append(line)
            return
        pending: list[bytes] = self._pending
        self._pending = []
        await super().push(b"\r\n".join([*pending, line]))

    async def check_auth_needed(self, caller_method: str) -> bool:
        # Every command that needs a session (MAIL, RCPT, DATA, VRFY, HELP) needs AUTH first.
        assert self.session is not None
        if self.session.authenticated:
            return False
        await self.push(AUTH_REQUIRED_REPLY)
        return True

    @syntax("AUTH <mechanism>")
    async def smtp_AUTH(self, arg: str) -> None:
        self.auth_attempt = None
        await super().smtp_AUTH(arg)
        words = arg.split(maxsplit=1) if arg else []
        mechanism = utf8_text(words[0]) if words else None
        attempt, self.auth_attempt = self.auth_attempt, None
        if attempt is not None and attempt[2]:
            self.record(
                "auth_success", mechanism=attempt[0], username=attempt[1], reply=self.last_reply
            )
        else:
            # Never the credentials: only the mechanism and the username that was tried.
            self.record(
                "auth_failure",
                mechanism=attempt[0] if attempt else mechanism,
                username=attempt[1] if attempt else None,
                reply=self.last_reply,
            )

    @syntax("MAIL FROM: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_MAIL(self, arg: str | None) -> None:
        before = self.envelope.mail_from if self.envelope is not None else None
        await super().smtp_MAIL(arg)
        after = self.envelope.mail_from if self.envelope is not None else None
        if after is not None and before is None:
            assert self.envelope is not None
            self.record(
                "mail_from",
                address=utf8_text(after),
                options=list(self.envelope.mail_options),
                reply=self.last_reply,
            )
        else:
            self.record("mail_from_refused", argument=utf8_text(arg or ""), reply=self.last_reply)

    @syntax("RCPT TO: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_RCPT(self, arg: str | None) -> None:
        before = len(self.envelope.rcpt_tos) if self.envelope is not None else 0
        await super().smtp_RCPT(arg)
        if self.envelope is not None and len(self.envelope.rcpt_tos) > before:
            self.record(
                "rcpt_to",
                address=utf8_text(self.envelope.rcpt_tos[-1]),
                options=list(self.envelope.rcpt_options),
                reply=self.last_reply,
            )
        else:
            self.record("rcpt_to_refused", argument=utf8_text(arg or ""), reply=self.last_reply)

    @syntax("DATA")
    async def smtp_DATA(self, arg: str) -> None:
        self.data_handled = False
        await super().smtp_DATA(arg)
        if not self.data_handled:
            # Refused before the handler saw it: no RCPT, no AUTH, too large, line too long.
            self.record("data_refused", reply=self.last_reply)

    @syntax("RSET")
    async def smtp_RSET(self, arg: str) -> None:
        await super().smtp_RSET(arg)
        self.record("rset", reply=self.last_reply)


class _Handler:
    """aiosmtpd handler: credentials, envelope hooks, the DATA analysis and the fault policy."""

    def __init__(
        self,
        *,
        credentials: ReceiverCredentials,
        events: EventLog,
        fail_first_tokens: frozenset[str],
        reject_all_tokens: frozenset[str],
    ) -> None:
        self._user = credentials.username.encode("utf-8")
        self._password = credentials.password.encode("utf-8")
        self._events = events
        self._fail_first = fail_first_tokens
        self._reject_all = reject_all_tokens
        self._faulted: set[str] = set()
        self._lock = threading.Lock()
        self.sessions: set[_RecordingSMTP] = set()

    def authenticate(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        mechanism: str,
        auth_data: object,
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        username = utf8_text(auth_data.login.decode("utf-8", "backslashreplace"))
        # Both comparisons always run, in constant time.
        ok = hmac.compare_digest(auth_data.login, self._user) & hmac.compare_digest(
            auth_data.password, self._password
        )
        if isinstance(server, _RecordingSMTP):
            server.auth_attempt = (mechanism, username, ok)
        if not ok:
            return AuthResult(success=False, handled=False)
        return AuthResult(success=True, auth_data=username)

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        # Every recipient is accepted and recorded: a wrong recipient is evidence, not an error.
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    def fail_first(self, token: str) -> None:
        """Answer the first DATA carrying ``token`` with the temporary failure too."""
        with self._lock:
            self._fail_first = self._fail_first | {token}

    def _decide(self, token: str | None) -> str | None:
        """The fault to inject for ``token``, or None to accept (contract: first DATA only)."""
        if token is None:
            return None
        with self._lock:
            if token in self._reject_all:
                return FAULT_ALWAYS
            if token in self._fail_first and token not in self._faulted:
                self._faulted.add(token)
                return FAULT_FIRST_ATTEMPT
        return None

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        analysis = analyse_message(raw)
        fault = self._decide(analysis.run_token)
        reply = TEMPORARY_FAILURE_REPLY if fault is not None else ACCEPTED_REPLY
        connection = server.connection_id if isinstance(server, _RecordingSMTP) else 0
        peer = server.peer if isinstance(server, _RecordingSMTP) else None
        auth = session.auth_data if isinstance(session.auth_data, str) else None

        def build(seq: int, at: str) -> ReceivedMessage:
            return ReceivedMessage(
                seq=seq,
                connection=connection,
                received_at=at,
                accepted=fault is None,
                reply=reply,
                fault=fault,
                mail_from=None if envelope.mail_from is None else utf8_text(envelope.mail_from),
                recipients=tuple(utf8_text(r) for r in envelope.rcpt_tos),
                mail_options=tuple(envelope.mail_options),
                rcpt_options=tuple(envelope.rcpt_options),
                smtp_utf8=envelope.smtp_utf8,
                authenticated_as=auth,
                raw_sha256=hashlib.sha256(raw).hexdigest(),
                analysis=analysis,
                raw=raw,
            )

        kind = "data_accepted" if fault is None else "data_temporarily_refused"
        self._events.record(kind, connection, peer, {"reply": reply, "fault": fault}, build)
        if isinstance(server, _RecordingSMTP):
            server.data_handled = True
        return reply


# ---------------------------------------------------------------------------------- receiver


class FeedbackReceiver:
    """The trusted SMTP receiver, running its asyncio loop in a background thread.

    Bind either to ``host``/``port`` (port 0 picks a free port; see :attr:`address`) or to an
    already bound socket ``sock``, which the receiver then owns and closes on :meth:`stop`.
    ``fail_first_tokens``: run_tokens whose first DATA is answered with the contract's 451;
    ``reject_all_tokens``: run_tokens whose every DATA is answered with it.
    """

    def __init__(
        self,
        *,
        credentials: ReceiverCredentials,
        host: str | None = None,
        port: int = 0,
        sock: socket.socket | None = None,
        fail_first_tokens: Iterable[str] = (),
        reject_all_tokens: Iterable[str] = (),
        server_hostname: str = "trusted-receiver.invalid",
        data_size_limit: int = DEFAULT_DATA_SIZE_LIMIT,
        session_timeout: float = 60.0,
        ready_timeout: float = 5.0,
        clock: Callable[[], datetime] = now_utc,
    ) -> None:
        if (host is None) == (sock is None):
            raise InputError("FeedbackReceiver needs exactly one of host= and sock=")
        self._host = host
        self._port = port
        self._sock = sock
        self._server_hostname = server_hostname
        self._data_size_limit = data_size_limit
        self._session_timeout = session_timeout
        self._ready_timeout = ready_timeout
        self._events = EventLog(clock)
        self._handler = _Handler(
            credentials=credentials,
            events=self._events,
            fail_first_tokens=frozenset(fail_first_tokens),
            reject_all_tokens=frozenset(reject_all_tokens),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._start_error: BaseException | None = None

    def fail_first(self, token: str) -> None:
        """Add ``token`` to the temporary-failure tokens while running: a token the harness
        learns only during the run (the one a page view issued; issue 12)."""
        self._handler.fail_first(token)

    # -- lifecycle

    def __enter__(self) -> FeedbackReceiver:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port).  Raises ExternalError when the receiver is not running."""
        if self._address is None:
            raise ExternalError("the SMTP receiver is not running")
        return self._address

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _factory(self) -> _RecordingSMTP:
        assert self._loop is not None
        return _RecordingSMTP(
            self._handler,
            events=self._events,
            hostname=self._server_hostname,
            data_size_limit=self._data_size_limit,
            timeout=self._session_timeout,
            loop=self._loop,
        )

    async def _serve(self) -> asyncio.Server:
        assert self._loop is not None
        if self._sock is not None:
            return await self._loop.create_server(self._factory, sock=self._sock)
        return await self._loop.create_server(self._factory, host=self._host, port=self._port)

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(self._serve())
            name = self._server.sockets[0].getsockname()
            self._address = (str(name[0]), int(name[1]))
        except BaseException as e:  # reported to start() in the caller's thread
            self._start_error = e
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for session in list(self._handler.sessions):
            if session.transport is not None:
                session.transport.close()
        # Let the closed transports call connection_lost, so their disconnects are recorded.
        for _ in range(3):
            await asyncio.sleep(0)
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    def start(self) -> None:
        """Bind and serve.  Raises ExternalError when binding fails or times out."""
        if self._thread is not None:
            raise ExternalError("the SMTP receiver is already running")
        self._start_error = None
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="pilot02-smtp-receiver", daemon=True
        )
        self._thread.start()
        if not ready.wait(self._ready_timeout) or self._start_error is not None:
            error = self._start_error
            self.stop()
            raise ExternalError(f"the SMTP receiver could not start: {error!r}") from error

    def stop(self) -> None:
        """Close the listener and every session, then end the thread.  Idempotent."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed: start() failed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if thread.is_alive():
            raise ExternalError("the SMTP receiver thread did not stop within 10 s")
        self._thread = None
        self._loop = None
        self._server = None
        self._address = None

    # -- records

    def events(self) -> list[SmtpEvent]:
        """A snapshot of every recorded event, in sequence order."""
        return self._events.snapshot()

    def messages(self) -> list[ReceivedMessage]:
        """Every DATA the handler answered (accepted or temporarily refused), in order."""
        return [e.message for e in self._events.snapshot() if e.message is not None]

    def accepted_messages(self) -> list[ReceivedMessage]:
        """The messages answered with 250: the only evidence of delivery."""
        return [m for m in self.messages() if m.accepted]

    def export(self, path: Path) -> str:
        """Write every event as JSONL atomically; return the file's SHA-256 (hex).

        Raises ExternalError when the file cannot be written.
        """
        lines = [
            json.dumps(e.to_json(), sort_keys=True, ensure_ascii=False) + "\n"
            for e in self._events.snapshot()
        ]
        data = "".join(lines).encode("utf-8")
        try:
            write_atomic(Path(path), data)
        except OSError as e:
            raise ExternalError(f"{path}: cannot write the SMTP event log: {e}") from e
        return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- scorer lines


def smtp_events_for_scorer(
    messages: Iterable[ReceivedMessage], token_to_scenario: Mapping[str, str]
) -> list[JsonDict]:
    """The ``smtp_events.jsonl`` lines of the contract, one per **accepted** message.

    ``scenario_id`` comes from the body's run_token; for a body that does not parse, from the
    ``X-Run-Token`` header if any (else null), with the fields that could still be read.
    Messages that were not accepted are skipped.  Raises nothing.
    """
    lines: list[JsonDict] = []
    for m in messages:
        if not m.accepted:
            continue
        a = m.analysis
        fields: dict[str, str | None]
        if a.parsed is not None:
            run_token: str | None = a.parsed.run_token
            scenario_id = token_to_scenario.get(a.parsed.run_token)
            fields = {
                "name": a.parsed.name,
                "email": a.parsed.email,
                "message": a.parsed.message,
                "phone": a.parsed.phone,
            }
        else:
            readable = (
                read_feedback_fields_leniently(normalize_line_endings(a.body))
                if a.body is not None
                else {}
            )
            run_token = a.x_run_token if a.x_run_token is not None else readable.get("run_token")
            scenario_id = (
                token_to_scenario.get(a.x_run_token) if a.x_run_token is not None else None
            )
            fields = {k: readable.get(k) for k in ("name", "email", "message", "phone")}
        lines.append(
            {
                "scenario_id": scenario_id,
                "run_token": run_token,
                **fields,
                "recipients": list(m.recipients),
                "mail_from": m.mail_from,
                "defects": list(a.defects),
                "duplicate_headers": list(a.duplicate_headers),
                "parse_error": a.parse_error,
                "x_run_token": a.x_run_token,
                "raw_sha256": m.raw_sha256,
                "receiver_seq": m.seq,
            }
        )
    return lines
