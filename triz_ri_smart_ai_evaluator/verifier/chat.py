"""What the verifier needs from a chat model, without the transport.

* :class:`Endpoint` - where the verifier model lives.  The API key is never part of it: the
  configuration names the environment variable that holds the key (``api_key_env``).
* :class:`ChatModel` - the protocol the gate calls; :class:`~.client.ChatClient` implements it
  over HTTP, tests substitute their own.
* :class:`VerifierCrashed` - every failure of a model call, one line that never holds the key.

No I/O here: the HTTP client is ``verifier.client`` (issue 14 item 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ExternalError, InputError

JsonDict: TypeAlias = dict[str, object]
StructuredOutput: TypeAlias = Literal["json_schema", "json_object", "none"]
Role: TypeAlias = Literal["system", "user", "assistant"]

_SNIPPET: Final = 200
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class VerifierCrashed(ExternalError):
    """The verifier endpoint did not produce a chat completion: transport error, timeout,
    non-2xx status or a body of the wrong shape.  External: the gate may retry it once (seed 002).

    ``reason`` is one line, names the endpoint and never contains the API key.
    """

    def __init__(self, reason: str, *, raw_body: str | None = None) -> None:
        reason = " ".join(reason.split()) or "verifier crashed"
        super().__init__(reason)
        self.reason = reason
        self.raw_body = raw_body


class Endpoint(BaseModel):
    """An OpenAI-compatible endpoint serving the verifier model (valid by construction)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    max_tokens: int = Field(default=2048, ge=1, le=1_000_000)
    temperature: float = Field(default=0.0, ge=0, le=2)
    structured_output: StructuredOutput = "json_schema"

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            # The key lives in the environment, never in a configuration file.
            raise ValueError("must not carry credentials")
        if parts.query or parts.fragment:
            raise ValueError("must not have a query or a fragment")
        return value.rstrip("/")

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_api_key_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("must be the name of an environment variable, not the key")
        return value

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> Endpoint:
        """An endpoint from configuration (YAML or JSON already loaded).

        Raises:
            InputError: naming every field that is wrong; input values are never echoed, since a
                misplaced key must not end up in a log.
        """
        if not isinstance(data, Mapping):
            raise InputError(f"verifier endpoint: expected a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as e:
            problems = []
            for error in e.errors(include_input=False, include_url=False):
                where = ".".join(str(part) for part in error["loc"]) or "endpoint"
                if error["type"] == "extra_forbidden":
                    message = "unknown field"
                    if "key" in where.lower() or "token" in where.lower():
                        message += " (never store the key: name its variable in api_key_env)"
                else:
                    message = error["msg"]
                problems.append(f"{where}: {message}")
            raise InputError("verifier endpoint: " + "; ".join(problems)) from None

    def describe(self) -> str:
        """How the endpoint is named in reasons and logs: URL and model, no secret."""
        return f"verifier endpoint {self.base_url} (model {self.model!r})"


@dataclass(frozen=True)
class ChatMessage:
    """One chat message."""

    role: Role
    content: str

    def to_json(self) -> dict[str, str]:
        """The message in the chat-completions request shape."""
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ModelReply:
    """What the endpoint answered.  ``raw_body`` is the response JSON as text, for the ledger."""

    content: str | None
    finish_reason: str | None
    refusal: str | None
    model: str | None
    latency_seconds: float
    raw_body: str = field(repr=False)
    usage: Mapping[str, object] = field(default_factory=dict)


class ChatModel(Protocol):
    """What :func:`verify` needs from a client (lets the gate's tests substitute one)."""

    @property
    def endpoint(self) -> Endpoint: ...

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        response_format: Mapping[str, object] | None = None,
    ) -> ModelReply: ...


def one_line(text: str, limit: int = _SNIPPET) -> str:
    """``text`` on one line, cut to ``limit`` characters (for reasons and logs)."""
    flat = " ".join(text.split())
    return flat[:limit] + ("..." if len(flat) > limit else "")
