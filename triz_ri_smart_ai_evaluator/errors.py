"""The project's exception hierarchy.

One root, :class:`EvaluatorError`, carries a one-line user-facing message; the CLI and the
service catch it in exactly one place each.  Two branches say how a caller should react:

* :class:`IntegrityError` - evidence, a signature, a hash or a rule does not hold.  Never retried:
  retrying an integrity failure until it passes would be a way of gaming the measurement.
* :class:`ExternalError` - something outside the evaluator failed (a model endpoint, a database
  that is down).  A caller may retry it under its own, counted, policy.

:class:`InputError` is for malformed input files and arguments; the CLI exits with code 2 for it.
"""

from __future__ import annotations


class EvaluatorError(Exception):
    """Root of every error the evaluator raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def diagnostics(self) -> str:
        """A single line for a person: what went wrong and where."""
        return " ".join(self.message.split())


class InputError(EvaluatorError):
    """A file, argument or request does not have the required form."""

    exit_code = 2


class RuleError(InputError):
    """A task-class declaration breaks a rule of the specification (named in the message)."""


class IntegrityError(EvaluatorError):
    """Evidence, a hash, a signature or a stored record does not verify.  Never retried."""

    exit_code = 3


class ExternalError(EvaluatorError):
    """A component outside the evaluator failed.  The caller may retry under its own count."""

    exit_code = 4
