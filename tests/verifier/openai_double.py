"""A TEST DOUBLE of a remote OpenAI-compatible chat model.  It is not a model and judges nothing.

:class:`ScriptedChatDouble` is a real HTTP server (``http.server.ThreadingHTTPServer``) on
127.0.0.1 with a random port, run in a background thread, so the verifier client is tested over
real sockets.  Each test scripts what the "model" answers: a list of steps consumed in order
(or a ``responder`` callable that picks a step from the request body).  Once the script is
exhausted every further call gets HTTP 500 "script exhausted", so an unexpected call fails the
test loudly.  Every request is recorded (headers, parsed body) for assertions.

Served: ``POST /v1/chat/completions`` and ``GET /v1/models``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias

DOUBLE_MODEL = "scripted-chat-double"


@dataclass(frozen=True)
class ReplyContent:
    """Answer 200 with a chat completion whose message content is ``content``."""

    content: str | None
    finish_reason: str | None = "stop"
    usage: Mapping[str, Any] = field(
        default_factory=lambda: {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    )


@dataclass(frozen=True)
class ReplyRefusal:
    """Answer 200 with a refusal (``message.refusal`` set, ``content`` null)."""

    refusal: str
    finish_reason: str | None = "stop"


@dataclass(frozen=True)
class ReplyStatus:
    """Answer with an HTTP error ``status`` and ``body`` (text)."""

    status: int
    body: str = '{"error": {"message": "scripted error"}}'


@dataclass(frozen=True)
class Hang:
    """Say nothing for ``seconds`` (the client should time out), then close the connection.

    Ends early when the double shuts down, so a hanging step never blocks a test's teardown.
    """

    seconds: float


@dataclass(frozen=True)
class CloseConnection:
    """Close the connection without sending any response."""


@dataclass(frozen=True)
class ReplyNonJson:
    """Answer 200 with a body that is not JSON."""

    body: str = "<html>definitely not json</html>"


@dataclass(frozen=True)
class ReplyWrongShape:
    """Answer 200 with JSON that is not a chat completion."""

    payload: Any = field(default_factory=lambda: {"object": "not.a.completion", "data": []})


Step: TypeAlias = (
    ReplyContent
    | ReplyRefusal
    | ReplyStatus
    | Hang
    | CloseConnection
    | ReplyNonJson
    | ReplyWrongShape
)
Responder: TypeAlias = Callable[[Any], Step]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the double received."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or None when absent or not JSON
    raw_body: bytes


def completion(
    content: str | None,
    *,
    finish_reason: str | None = "stop",
    refusal: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A chat-completions response body of the shape OpenAI-compatible servers return."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return {
        "id": "chatcmpl-double",
        "object": "chat.completion",
        "created": 0,
        "model": DOUBLE_MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": dict(usage or {}),
    }


class ScriptedChatDouble:
    """A scripted stand-in for an OpenAI-compatible endpoint (a test double, not a model).

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:{port}/v1``.  When ``api_key``
    is given, a request without ``Authorization: Bearer <api_key>`` gets 401 and consumes no step.
    """

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        responder: Responder | None = None,
        api_key: str | None = None,
    ) -> None:
        self._script = list(script)
        self._responder = responder
        self._api_key = api_key
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ScriptedChatDouble:
        handler = _make_handler(self)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping.set()  # wakes any hanging step
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``."""
        if self._server is None:
            raise RuntimeError("the double is not running (use it as a context manager)")
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    # --- scripting and inspection ----------------------------------------------------------
    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._script.extend(steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        """Steps of the script not yet consumed."""
        with self._lock:
            return len(self._script)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _authorised(self, headers: Mapping[str, str]) -> bool:
        return self._api_key is None or headers.get("authorization") == f"Bearer {self._api_key}"

    def _next_step(self, body: Any) -> Step | None:
        if self._responder is not None:
            return self._responder(body)
        with self._lock:
            return self._script.pop(0) if self._script else None


def _make_handler(double: ScriptedChatDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ScriptedChatDouble/1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: the double records requests instead of logging them."""

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)
                self.wfile.flush()

        def _send_json(self, status: int, payload: Any) -> None:
            self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

        def _receive(self) -> RecordedRequest:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            headers = {name.lower(): value for name, value in self.headers.items()}
            request = RecordedRequest(self.command, self.path, headers, body, raw)
            double._record(request)
            return request

        def do_GET(self) -> None:
            request = self._receive()
            if not double._authorised(request.headers):
                self._send_json(401, {"error": {"message": "invalid api key"}})
            elif self.path.rstrip("/") == "/v1/models":
                self._send_json(
                    200, {"object": "list", "data": [{"id": DOUBLE_MODEL, "object": "model"}]}
                )
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            request = self._receive()
            if not double._authorised(request.headers):
                self._send_json(401, {"error": {"message": "invalid api key"}})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            if request.body is None:
                self._send_json(400, {"error": {"message": "body is not JSON"}})
                return
            step = double._next_step(request.body)
            if step is None:
                self._send_json(500, {"error": {"message": "script exhausted"}})
                return
            self._play(step)

        def _play(self, step: Step) -> None:
            if isinstance(step, ReplyContent):
                payload = completion(
                    step.content, finish_reason=step.finish_reason, usage=step.usage
                )
                self._send_json(200, payload)
            elif isinstance(step, ReplyRefusal):
                self._send_json(
                    200, completion(None, finish_reason=step.finish_reason, refusal=step.refusal)
                )
            elif isinstance(step, ReplyStatus):
                self._send(step.status, step.body.encode("utf-8"), "application/json")
            elif isinstance(step, ReplyNonJson):
                self._send(200, step.body.encode("utf-8"), "text/html")
            elif isinstance(step, ReplyWrongShape):
                self._send_json(200, step.payload)
            elif isinstance(step, Hang):
                double._stopping.wait(step.seconds)
                self._drop()
            else:  # CloseConnection
                self._drop()

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    return Handler
