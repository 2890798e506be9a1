"""A small SMTP server for the tests, standard library only.

It speaks just enough ESMTP for a real client: EHLO, ``AUTH PLAIN``/``AUTH LOGIN``, MAIL (with the
``SMTPUTF8`` and ``BODY=8BITMIME`` parameters), RCPT, DATA, RSET, NOOP and QUIT, requires
authentication before MAIL and records every message it accepts. ``data_reply`` lets a test
answer a DATA with something other than ``250``, e.g. a temporary ``451``.
"""

from __future__ import annotations

import base64
import binascii
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

DataReply = Callable[[bytes], str | None]
"""Given the raw message of a DATA, the reply to send instead of ``250``, or ``None`` to accept."""


@dataclass(frozen=True)
class Delivery:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes
    mail_options: tuple[str, ...]


class StubSmtpServer:
    """Listens on 127.0.0.1 (a free port) while used as a context manager."""

    def __init__(self, *, username: str, password: str, data_reply: DataReply | None = None):
        self.username = username
        self.password = password
        self.data_reply = data_reply
        self.deliveries: list[Delivery] = []
        self.data_attempts = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Session)
        self._server.stub = self
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,))

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    def __enter__(self) -> StubSmtpServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _on_data(self, delivery: Delivery) -> str | None:
        with self._lock:
            self.data_attempts += 1
        reply = self.data_reply(delivery.data) if self.data_reply is not None else None
        if reply is None:
            with self._lock:
                self.deliveries.append(delivery)
        return reply


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    stub: StubSmtpServer


class _Session(socketserver.StreamRequestHandler):
    timeout = 10
    server: _Server

    def handle(self) -> None:
        try:
            self._converse()
        except (OSError, ValueError):
            return

    def _converse(self) -> None:
        stub = self.server.stub
        authenticated = False
        mail_from: str | None = None
        options: tuple[str, ...] = ()
        rcpt_tos: list[str] = []
        self._reply("220 stub ESMTP ready")
        while line := self.rfile.readline(65536):
            verb, _, arg = line.decode("utf-8", "replace").rstrip("\r\n").partition(" ")
            verb = verb.upper()
            if verb == "EHLO":
                self._reply("250-stub", "250-AUTH PLAIN LOGIN", "250-8BITMIME", "250 SMTPUTF8")
            elif verb == "HELO":
                self._reply("250 stub")
            elif verb == "AUTH":
                authenticated = self._authenticate(arg)
            elif verb == "MAIL":
                if not authenticated:
                    self._reply("530 5.7.0 Authentication required")
                    continue
                mail_from, options = _address(arg, "FROM:")
                rcpt_tos = []
                self._reply("250 OK")
            elif verb == "RCPT":
                if mail_from is None:
                    self._reply("503 5.5.1 MAIL first")
                    continue
                rcpt_tos.append(_address(arg, "TO:")[0])
                self._reply("250 OK")
            elif verb == "DATA":
                if mail_from is None or not rcpt_tos:
                    self._reply("503 5.5.1 RCPT first")
                    continue
                self._reply("354 End data with <CR><LF>.<CR><LF>")
                delivery = Delivery(mail_from, tuple(rcpt_tos), self._read_data(), options)
                self._reply(stub._on_data(delivery) or "250 OK")
                mail_from, rcpt_tos = None, []
            elif verb == "RSET":
                mail_from, rcpt_tos = None, []
                self._reply("250 OK")
            elif verb == "NOOP":
                self._reply("250 OK")
            elif verb == "QUIT":
                self._reply("221 Bye")
                return
            else:
                self._reply("500 5.5.2 Command not recognized")

    def _reply(self, *lines: str) -> None:
        self.wfile.write("".join(f"{line}\r\n" for line in lines).encode())
        self.wfile.flush()

    def _challenge(self, text: str) -> bytes:
        self._reply(f"334 {text}")
        return base64.b64decode(self.rfile.readline(4096).strip(), validate=True)

    def _authenticate(self, arg: str) -> bool:
        mechanism, _, initial = arg.partition(" ")
        stub = self.server.stub
        try:
            if mechanism.upper() == "PLAIN":
                raw = base64.b64decode(initial, validate=True) if initial else self._challenge("")
                credentials = raw.split(b"\0")[1:]
            elif mechanism.upper() == "LOGIN":
                user = (
                    base64.b64decode(initial, validate=True)
                    if initial
                    else self._challenge("VXNlcm5hbWU6")
                )
                credentials = [user, self._challenge("UGFzc3dvcmQ6")]
            else:
                self._reply("504 5.5.4 Unrecognized authentication type")
                return False
        except binascii.Error:
            self._reply("501 5.5.2 Cannot decode response")
            return False
        if credentials == [stub.username.encode(), stub.password.encode()]:
            self._reply("235 2.7.0 Authentication successful")
            return True
        self._reply("535 5.7.8 Authentication credentials invalid")
        return False

    def _read_data(self) -> bytes:
        lines = []
        while (line := self.rfile.readline(65536)) not in (b".\r\n", b".\n", b""):
            lines.append(line[1:] if line.startswith(b".") else line)
        return b"".join(lines)


def _address(arg: str, prefix: str) -> tuple[str, tuple[str, ...]]:
    """``FROM:<a@b> SMTPUTF8`` -> (``a@b``, (``SMTPUTF8``,))."""
    rest = arg[len(prefix) :].strip() if arg.upper().startswith(prefix) else arg.strip()
    if rest.startswith("<") and ">" in rest:
        end = rest.index(">")
        return rest[1:end], tuple(rest[end + 1 :].split())
    address, *params = rest.split()
    return address, tuple(params)
