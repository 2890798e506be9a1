"""The sandbox's two errors, on the project's hierarchy (``errors.py``)."""

from __future__ import annotations

from ..errors import ExternalError, IntegrityError


class SandboxError(ExternalError):
    """Setting up, running or tearing down the sandbox failed (a tool, the kernel, a timeout).

    An external failure: the caller may retry under its own count.
    """


class IsolationError(IntegrityError):
    """Isolation is not available, or is not verified to be active: nothing untrusted may run.

    Never retried into a pass: a run without verified isolation is reported as such
    (``unsafe_degraded``), it is not turned into an isolated one by trying again.
    """
