"""How an integration reaches the evaluator service (issue 16): shared by the adapters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..service.client import PolicyClient, TrustedClient
from ..service.config import load_principal_key


class Unscorable(RuntimeError):
    """The evaluator holds no number training may use for this response (the adapters of
    trainers that have no "unscorable" raise it rather than make one up)."""


def unscorable(result: dict[str, Any]) -> Unscorable:
    """The error for a result whose reward is null, naming its attempt and reason."""
    detail = f": {result['detail']}" if result.get("detail") else ""
    return Unscorable(f"attempt {result['attempt_id']}: {result['reason']}{detail}")


#: ``to_artefact(input, output_text)`` -> the artefact bytes the task class takes.
ToArtefact = Callable[[Any, str], bytes]


def _utf8(_input: Any, text: str) -> bytes:
    return text.encode("utf-8")


@dataclass(frozen=True)
class ServiceAccess:
    """How a trainer or an eval reaches the evaluator service: the policy client the outputs
    are handed in as, the training consumer that reads their rewards (its ``runs`` name that
    client) and, for Inspect's hooks, the harness principal that signs the sample records."""

    url: str
    task_class: str
    policy_token: str
    reader_id: str
    reader_key: Path
    recorder_id: str | None = None
    recorder_key: Path | None = None
    to_artefact: ToArtefact = _utf8
    wait_seconds: float = 120.0

    def policy(self) -> PolicyClient:
        return PolicyClient(self.url, self.policy_token)

    def reader(self) -> TrustedClient:
        return TrustedClient(self.url, self.reader_id, "training_consumer",
                             load_principal_key(self.reader_key))

    def recorder(self) -> TrustedClient:
        if self.recorder_id is None or self.recorder_key is None:
            raise ValueError("the sample hooks need recorder_id and recorder_key (a harness)")
        return TrustedClient(self.url, self.recorder_id, "harness",
                             load_principal_key(self.recorder_key))

    def submit(self, inputs: list[Any], outputs: list[str]) -> list[str]:
        """Hand every output in through the policy port; return the attempt ids."""
        with self.policy() as policy:
            return [policy.submit(self.task_class, self.to_artefact(i, o))
                    for i, o in zip(inputs, outputs, strict=True)]

    def read(self, attempts: list[str], *, key: str,
             purpose: str = "training") -> list[dict[str, Any]]:
        """One result per attempt from the rewards API under ``key``, waiting up to
        ``wait_seconds``.  Raises ServiceError for a refused call."""
        with self.reader() as reader:
            results = reader.rewards(attempts, idempotency_key=key,
                                     wait_seconds=self.wait_seconds, purpose=purpose)
        if [r["attempt_id"] for r in results] != attempts:
            raise RuntimeError("the rewards API answered for other attempts than asked")
        return results

    def score(self, inputs: list[Any], outputs: list[str], *, key: str,
              purpose: str = "training") -> list[dict[str, Any]]:
        """:meth:`submit`, then :meth:`read`."""
        return self.read(self.submit(inputs, outputs), key=key, purpose=purpose)
