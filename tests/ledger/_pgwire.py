"""A counting proxy for the PostgreSQL wire protocol: what a client really sends the server.

The proxy sits between a client and the real server on loopback and reads the client's side of
the frontend/backend protocol (version 3.0): every simple ``Query`` and every extended-protocol
``Execute`` is a statement (named by its SQL text, kept from the ``Parse`` that prepared it, so
psycopg's prepared statements are named too), and every ``Query`` or ``Sync`` is one round trip
(the server answers each with one ReadyForQuery).  A round trip that executes nothing is
psycopg preparing a statement it has run five times: once per statement and connection, so it
is counted apart (``prepares``).  Nothing is changed on the way.

Used by tests/ledger/test_postgres_submission.py and, with ``--round-trips``, by
benchmarks/service_load.py.  The client must not ask for TLS (``sslmode=disable``): the proxy
reads plain messages.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from psycopg.conninfo import conninfo_to_dict, make_conninfo

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


@dataclass
class Counts:
    """What went to the server: the SQL text of each statement, and the round trips."""

    statements: list[str] = field(default_factory=list)
    round_trips: int = 0  # that executed something
    prepares: int = 0  # that only prepared a statement
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> tuple[int, int]:
        """(statements, round trips) so far."""
        with self._lock:
            return len(self.statements), self.round_trips

    def since(self, mark: tuple[int, int]) -> tuple[list[str], int]:
        """The statements and round trips after ``mark`` (a :meth:`snapshot`)."""
        with self._lock:
            return self.statements[mark[0]:], self.round_trips - mark[1]


class _Reader:
    """Parses one client's message stream as it passes."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.buffer = b""
        self.started = False
        self.prepared: dict[bytes, str] = {}
        self.portals: dict[bytes, str] = {}
        self.executed = False  # since the last Sync

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.started:
                if len(self.buffer) < 8:
                    return
                (length,) = struct.unpack("!i", self.buffer[:4])
                if len(self.buffer) < length:
                    return
                (code,) = struct.unpack("!i", self.buffer[4:8])
                self.buffer = self.buffer[length:]
                if code not in (_SSL_REQUEST, _GSS_REQUEST):
                    self.started = True  # the StartupMessage: typed messages follow
                continue
            if len(self.buffer) < 5:
                return
            kind = self.buffer[:1]
            (length,) = struct.unpack("!i", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            body, self.buffer = self.buffer[5 : 1 + length], self.buffer[1 + length :]
            self._message(kind, body)

    def _message(self, kind: bytes, body: bytes) -> None:
        counts = self.counts
        if kind == b"P":  # Parse: statement name, query
            name, rest = body.split(b"\0", 1)
            self.prepared[name] = rest.split(b"\0", 1)[0].decode("utf-8", "replace")
        elif kind == b"B":  # Bind: portal name, statement name
            portal, statement = body.split(b"\0", 2)[:2]
            self.portals[portal] = self.prepared.get(statement, "?")
        elif kind == b"E":  # Execute: portal name
            portal = body.split(b"\0", 1)[0]
            self.executed = True
            with counts._lock:
                counts.statements.append(self.portals.get(portal, "?"))
        elif kind == b"Q":  # a simple query: one statement text, one round trip
            with counts._lock:
                counts.statements.append(body.rstrip(b"\0").decode("utf-8", "replace"))
                counts.round_trips += 1
        elif kind == b"S":  # Sync: the end of one extended-protocol round trip
            with counts._lock:
                if self.executed:
                    counts.round_trips += 1
                else:
                    counts.prepares += 1
            self.executed = False


class CountingProxy:
    """A loopback TCP proxy in front of ``upstream`` (host, port) that counts what clients send.

    Use as a context manager; :meth:`dsn` rewrites a connection string to go through it."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.counts = Counts()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="pgwire-proxy", daemon=True)

    @classmethod
    def before(cls, dsn: str) -> CountingProxy:
        """A proxy in front of the server ``dsn`` names."""
        d = conninfo_to_dict(dsn)
        return cls((str(d.get("host", "127.0.0.1")), int(d.get("port", 5432))))

    def dsn(self, dsn: str) -> str:
        """``dsn`` through this proxy, without TLS (the proxy reads the messages)."""
        return make_conninfo(dsn, host="127.0.0.1", port=str(self.port), sslmode="disable",
                             gssencmode="disable")

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._closed.set()
        self._thread.join(timeout=10)
        self._listener.close()
        for s in list(self._sockets):
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)  # to notice __exit__
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, server]
            reader = _Reader(self.counts)
            for src, dst, seen in ((client, server, reader), (server, client, None)):
                threading.Thread(target=self._pump, args=(src, dst, seen), daemon=True,
                                 name="pgwire-pump").start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, reader: _Reader | None) -> None:
        try:
            while data := src.recv(1 << 16):
                if reader is not None:
                    reader.feed(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def counting(dsn: str) -> Iterator[tuple[CountingProxy, str]]:
    """A counting proxy in front of ``dsn``'s server, and ``dsn`` rewritten to go through it."""
    with CountingProxy.before(dsn) as proxy:
        yield proxy, proxy.dsn(dsn)
