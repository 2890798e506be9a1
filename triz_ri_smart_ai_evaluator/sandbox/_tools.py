"""The external programs the sandbox drives, found by absolute path, and one way to run them.

Every program is called by its absolute path with a fixed, minimal environment, so neither the
caller's ``PATH`` nor its ``LD_*`` variables decide what runs as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass

from ._errors import SandboxError

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOL_ENV = {"PATH": SYSTEM_PATH, "LC_ALL": "C"}
_TOOL_NAMES = ("ip", "nft", "bwrap", "setpriv", "prlimit", "unshare", "nsenter", "mount", "sh")


@dataclass(frozen=True)
class Tools:
    """Absolute paths of the programs full isolation needs."""

    ip: str
    nft: str
    bwrap: str
    setpriv: str
    prlimit: str
    unshare: str
    nsenter: str
    mount: str
    sh: str


def find_tools() -> Tools | tuple[str, ...]:
    """The tools, or the names of those that are missing."""
    found = {name: shutil.which(name, path=SYSTEM_PATH) for name in _TOOL_NAMES}
    missing = tuple(name for name, path in found.items() if path is None)
    if missing:
        return missing
    return Tools(**{name: str(path) for name, path in found.items()})


def require_tools() -> Tools:
    """The tools; raises :class:`SandboxError` naming any that are missing."""
    tools = find_tools()
    if isinstance(tools, tuple):
        raise SandboxError(f"sandbox tools not found: {', '.join(tools)}")
    return tools


def run_tool(
    argv: list[str], *, stdin: bytes | None = None, timeout: float = 10.0
) -> subprocess.CompletedProcess[bytes]:
    """Run one tool to completion; raises :class:`SandboxError` when it fails or hangs."""
    try:
        done = subprocess.run(  # noqa: S603 - absolute tool path, arguments built by us
            argv, input=stdin, capture_output=True, timeout=timeout, env=TOOL_ENV, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxError(f"{_describe(argv)} could not run: {e}") from e
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise SandboxError(f"{_describe(argv)} failed: {err}")
    return done


def _describe(argv: list[str]) -> str:
    return " ".join([os.path.basename(argv[0]), *argv[1:4]])


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a process that is not yet reaped (zombies count as alive)."""
    return os.path.exists(f"/proc/{pid}")


def kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``pid``, ignoring a process that is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def process_table() -> dict[int, int]:
    """``{pid: parent pid}`` for every process visible in ``/proc``."""
    table: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            table[int(entry)] = int(fields[1])
    return table


def descendants(root: int) -> set[int]:
    """Every process whose chain of parents reaches ``root`` (``root`` excluded)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in process_table().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
