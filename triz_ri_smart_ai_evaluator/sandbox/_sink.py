"""The outbound sink: where every redirected TCP connection from the app namespace ends.

A listener thread on the harness host.  Each connection is accepted, recorded (peer, original
destination when the kernel can tell, up to 64 KiB of what was sent) and closed.  Nothing is
ever answered, and nothing is forwarded anywhere.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_BYTES = 64 * 1024
MAX_RECORDS = 1000
MAX_HANDLERS = 32
READ_TIMEOUT = 2.0
_SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h


@dataclass(frozen=True)
class SinkConnection:
    """One connection that reached the sink."""

    peer: tuple[str, int]
    original_destination: tuple[str, int] | None
    """From ``SO_ORIGINAL_DST`` when conntrack in this namespace knows it; usually ``None``
    because the redirect happens in the app's namespace (the ``attempted`` set has it)."""
    received: bytes
    accepted_at: datetime


class Sink:
    """A recording TCP listener.  ``start()`` binds; ``close()`` stops and joins the threads."""

    def __init__(self, host: str, port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self._listener: socket.socket | None = None
        self._records: list[SinkConnection] = []
        self._dropped = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._handlers = threading.BoundedSemaphore(MAX_HANDLERS)
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("sink not started")
        return int(self._listener.getsockname()[1])

    def start(self) -> Sink:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self._requested_port))
        listener.listen(64)
        listener.settimeout(0.5)
        self._listener = listener
        thread = threading.Thread(target=self._accept_loop, name=f"trz-sink-{self.port}",
                                  daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def connections(self) -> tuple[SinkConnection, ...]:
        """Every connection recorded so far (at most :data:`MAX_RECORDS`)."""
        with self._lock:
            return tuple(self._records)

    @property
    def dropped(self) -> int:
        """Connections accepted but not recorded (record limit or handler limit reached)."""
        with self._lock:
            return self._dropped

    def forget(self, predicate: Callable[[SinkConnection], bool]) -> None:
        """Drop records for which ``predicate(record)`` is true (the isolation probe's own)."""
        with self._lock:
            self._records = [r for r in self._records if not predicate(r)]

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the blocked accept()
                self._listener.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=READ_TIMEOUT + 1.0)
        if self._listener is not None:
            self._listener.close()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._handlers.acquire(blocking=False):
                self._record(conn, peer, b"")
                conn.close()
                continue
            thread = threading.Thread(target=self._handle, args=(conn, peer), daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            conn.settimeout(READ_TIMEOUT)
            data = bytearray()
            try:
                while len(data) < MAX_BYTES and not self._stop.is_set():
                    chunk = conn.recv(MAX_BYTES - len(data))
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass  # a timeout or a reset ends the reading; what arrived is kept
            self._record(conn, peer, bytes(data))
        finally:
            conn.close()
            self._handlers.release()

    def _record(self, conn: socket.socket, peer: tuple[str, int], data: bytes) -> None:
        record = SinkConnection(
            peer=(str(peer[0]), int(peer[1])),
            original_destination=self._original_destination(conn),
            received=data,
            accepted_at=datetime.now(UTC),
        )
        with self._lock:
            if len(self._records) < MAX_RECORDS:
                self._records.append(record)
            else:
                self._dropped += 1

    def _original_destination(self, conn: socket.socket) -> tuple[str, int] | None:
        try:
            raw = conn.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
        except OSError:
            return None
        port, packed = struct.unpack_from("!2xH4s", raw)
        dst = (socket.inet_ntoa(packed), int(port))
        return None if dst == (self.host, self.port) else dst
