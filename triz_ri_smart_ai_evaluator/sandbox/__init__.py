"""Running untrusted candidate code: namespaces, bubblewrap, nftables egress recording, limits.

Isolation is measured, not assumed: :func:`probe_isolation` says whether it can be had here,
a :class:`Network` verifies its own ruleset before it is used, and a run without isolation is
possible only when asked for with ``unsafe_degraded=True`` and then says so in every result.
The harness normally needs only :func:`open_sandbox` and :func:`wait_for_port`.

Standard library only; the privileged work is done by ``ip``, ``nft``, ``nsenter``,
``unshare``, ``mount``, ``setpriv``, ``prlimit`` and ``bwrap``, called by absolute path.
"""

from __future__ import annotations

from ._addressing import SANDBOX_PREFIX
from ._box import Sandbox, open_sandbox, wait_for_port
from ._bwrap import SANDBOX_APP, SANDBOX_VENV, PythonRuntime
from ._errors import IsolationError, SandboxError
from ._launch import run_sandboxed, start_sandboxed
from ._limits import Limits
from ._netns import Network
from ._nft import AttemptedDestination
from ._probe import IsolationSupport, probe_isolation
from ._process import Ending, Isolation, ProcessOutcome, ProcessResult, SandboxedProcess
from ._sink import Sink, SinkConnection

__all__ = [
    "SANDBOX_APP",
    "SANDBOX_PREFIX",
    "SANDBOX_VENV",
    "AttemptedDestination",
    "Ending",
    "Isolation",
    "IsolationError",
    "IsolationSupport",
    "Limits",
    "Network",
    "ProcessOutcome",
    "ProcessResult",
    "PythonRuntime",
    "Sandbox",
    "SandboxError",
    "SandboxedProcess",
    "Sink",
    "SinkConnection",
    "open_sandbox",
    "probe_isolation",
    "run_sandboxed",
    "start_sandboxed",
    "wait_for_port",
]
