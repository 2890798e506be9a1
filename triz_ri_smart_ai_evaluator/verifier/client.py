"""The verifier's I/O edge: an OpenAI-compatible chat client over httpx.

:class:`ChatClient` sends one ``POST {base_url}/chat/completions`` per call, no retries (the
gate counts its own), and raises every failure as :class:`~.chat.VerifierCrashed` with a
one-line reason that names the endpoint and never the key.  It implements
:class:`~.chat.ChatModel`; the prompt and the reading of the reply are in ``verifier.prompt``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Final, TypeAlias

import httpx

from ..errors import InputError
from .chat import ChatMessage, Endpoint, JsonDict, ModelReply, VerifierCrashed, one_line

#: Largest response body read from the endpoint; a longer one is a crash, not a verdict.
MAX_RESPONSE_BYTES: Final = 4 * 1024 * 1024


class ChatClient:
    """An OpenAI-compatible chat-completions client over httpx.  No retries.

    The key is read once, from the environment variable the endpoint names.

    Raises:
        InputError: at construction, when ``api_key_env`` is named but unset or unusable.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        transport: httpx.BaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._endpoint = endpoint
        self._key: str | None = None
        if endpoint.api_key_env is not None:
            env = os.environ if environ is None else environ
            key = env.get(endpoint.api_key_env, "")
            if not key:
                raise InputError(
                    f"{endpoint.describe()}: environment variable {endpoint.api_key_env} "
                    "(its API key) is not set"
                )
            if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
                raise InputError(
                    f"{endpoint.describe()}: the key in {endpoint.api_key_env} is not a "
                    "printable ASCII token"
                )
            self._key = key
        # trust_env=False: no proxy or .netrc from the environment reaches the verifier's calls.
        self._http = httpx.Client(
            transport=transport,
            timeout=httpx.Timeout(endpoint.timeout_seconds),
            trust_env=False,
            follow_redirects=False,
        )

    @property
    def endpoint(self) -> Endpoint:
        """The endpoint this client talks to."""
        return self._endpoint

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChatClient({self._endpoint.describe()})"

    def _crashed(self, reason: str, raw_body: str | None = None) -> VerifierCrashed:
        text = f"{self._endpoint.describe()}: {reason}"
        if self._key:
            text = text.replace(self._key, "[redacted]")
            if raw_body is not None:
                raw_body = raw_body.replace(self._key, "[redacted]")
        return VerifierCrashed(text, raw_body=raw_body)

    def _read(self, request_body: bytes, started: float) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        url = f"{self._endpoint.base_url}/chat/completions"
        deadline = started + self._endpoint.timeout_seconds
        timeout = self._endpoint.timeout_seconds
        try:
            with self._http.stream("POST", url, content=request_body, headers=headers) as resp:
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise self._crashed(f"response larger than {MAX_RESPONSE_BYTES} bytes")
                    # httpx times each read; this bounds the whole answer (a trickling server).
                    if time.monotonic() > deadline:
                        raise self._crashed(f"timed out after {timeout:g} s (slow response)")
                    chunks.append(chunk)
                return resp.status_code, b"".join(chunks)
        except httpx.TimeoutException as e:
            raise self._crashed(f"timed out after {timeout:g} s ({type(e).__name__})") from e
        except httpx.HTTPError as e:
            raise self._crashed(f"transport error: {type(e).__name__}: {one_line(str(e))}") from e

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        response_format: Mapping[str, object] | None = None,
    ) -> ModelReply:
        """POST one chat completion and return the reply.  Never retries.

        Raises:
            VerifierCrashed: on a transport error, a timeout, a non-2xx status, or a body that
                is not a chat completion.
        """
        payload: JsonDict = {
            "model": self._endpoint.model,
            "messages": [message.to_json() for message in messages],
            "max_tokens": self._endpoint.max_tokens,
            "temperature": self._endpoint.temperature,
            "stream": False,
        }
        if response_format is not None:
            payload["response_format"] = dict(response_format)
        # ASCII escapes: any text (lone surrogates included) serialises; no NaN can be sent.
        request_body = json.dumps(payload, ensure_ascii=True, allow_nan=False).encode("ascii")
        started = time.monotonic()
        status, body = self._read(request_body, started)
        latency = time.monotonic() - started
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise self._crashed(f"HTTP {status}: body is not UTF-8") from None
        if not 200 <= status < 300:
            raise self._crashed(f"HTTP {status}: {one_line(text) or '(empty body)'}", text)
        return self._reply_from(text, latency)

    def _reply_from(self, text: str, latency: float) -> ModelReply:
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            raise self._crashed(f"body is not JSON: {one_line(text, 80)!r}", text) from None
        shape = _completion_fields(body)
        if isinstance(shape, str):
            raise self._crashed(f"body is not a chat completion: {shape}", text)
        content, refusal, finish_reason, model, usage = shape
        return ModelReply(
            content=content,
            finish_reason=finish_reason,
            refusal=refusal,
            model=model,
            latency_seconds=latency,
            raw_body=text,
            usage=usage,
        )


_Fields: TypeAlias = tuple[str | None, str | None, str | None, str | None, dict[str, object]]


def _completion_fields(body: object) -> _Fields | str:
    """(content, refusal, finish_reason, model, usage) of a chat completion, or what is wrong."""
    if not isinstance(body, dict):
        return f"a JSON {type(body).__name__}, not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        if "error" in body:
            return f"an error object: {one_line(json.dumps(body['error']), 120)}"
        return "no choices"
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return "choices[0] has no message object"
    message = choice["message"]
    content = message.get("content")
    refusal = message.get("refusal")
    finish_reason = choice.get("finish_reason")
    model = body.get("model")
    usage = body.get("usage")
    for name, value in (
        ("content", content),
        ("refusal", refusal),
        ("finish_reason", finish_reason),
        ("model", model),
    ):
        if value is not None and not isinstance(value, str):
            return f"{name} is a {type(value).__name__}, not a string"
    if usage is not None and not isinstance(usage, dict):
        return f"usage is a {type(usage).__name__}, not an object"
    return content, refusal, finish_reason, model, dict(usage or {})
