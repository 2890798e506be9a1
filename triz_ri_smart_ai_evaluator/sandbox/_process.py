"""A running sandboxed process tree: watching it, stopping it, and how it ended.

Started by :mod:`._launch`.  Stopping kills the pid namespace's init (the kernel then kills
everything in the namespace), sweeps the run's cgroups and its uid, reaps, and removes the
run's cgroups, stage and logs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._bwrap import Stage
from ._errors import SandboxError
from ._limits import CgroupV1, kill_uid, release_uid
from ._tools import descendants, kill_quietly, pid_alive

Isolation = Literal["full", "degraded"]
Ending = Literal["exited", "signaled", "timeout", "killed"]
OUTPUT_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class ProcessOutcome:
    """How a sandboxed process tree ended.

    ``ended``: ``exited`` / ``signaled`` on its own; ``timeout`` when the wall clock ran out;
    ``killed`` when the harness stopped it.  Under ``bwrap`` a death by signal N is reported by
    the sandbox as exit status 128 + N, so ``signal`` is derived from it.
    """

    ended: Ending
    exit_code: int | None
    signal: int | None
    oom_killed: bool
    duration_seconds: float
    isolation: Isolation
    degraded_reason: str | None
    peak_memory_bytes: int | None


@dataclass(frozen=True)
class ProcessResult:
    """A finished run: its outcome and the tail of what it wrote."""

    outcome: ProcessOutcome
    stdout: bytes
    stderr: bytes


class SandboxedProcess:
    """A running sandboxed process tree.  Made by :func:`start_sandboxed`.

    ``stop()`` (or leaving a ``with`` block) kills the whole tree, reaps it and removes the
    run's cgroups and stage.  It never raises for a process that is already gone.
    """

    def __init__(self, popen: subprocess.Popen[bytes], *, isolation: Isolation,
                 degraded_reason: str | None, log_dir: Path, uid: int | None,
                 cgroup: CgroupV1 | None, stage: Stage | None, info_fd: int | None,
                 wall_timeout: float | None) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.isolation: Isolation = isolation
        self.degraded_reason = degraded_reason
        self.uid = uid
        self._log_dir = log_dir
        self._cgroup = cgroup
        self._stage = stage
        self._info_fd = info_fd
        self._info = b""
        self._started = time.monotonic()
        self._lock = threading.RLock()
        self._stop_reason: Ending | None = None
        self._outcome: ProcessOutcome | None = None
        self._output: tuple[bytes, bytes] | None = None
        self._timer: threading.Timer | None = None
        self.cleanup_problems: tuple[str, ...] = ()
        """What tear-down could not remove (empty when all went)."""
        if wall_timeout is not None:
            self._timer = threading.Timer(wall_timeout, self._on_timeout)
            self._timer.daemon = True
            self._timer.start()

    def __enter__(self) -> SandboxedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def outcome(self) -> ProcessOutcome | None:
        return self._outcome

    def poll(self) -> ProcessOutcome | None:
        """The outcome once the tree has ended (and been cleaned up), else ``None``.

        Raises :class:`SandboxError` if clean-up was incomplete (see ``cleanup_problems``).
        """
        with self._lock:
            if self._outcome is None and self._popen.poll() is not None:
                self._finish()
            return self._outcome

    def wait(self, timeout: float | None = None) -> ProcessOutcome | None:
        """Wait for the end; ``None`` if ``timeout`` seconds passed first (it keeps running)."""
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return self.poll()

    def stop(self, *, grace_seconds: float = 0.0) -> ProcessOutcome:
        """Kill the whole tree (after ``grace_seconds`` of SIGTERM, if given), reap, clean up.

        Returns how it ended (``killed`` if it was still running).  Raises
        :class:`SandboxError` if something of the run could not be removed.
        """
        return self._stop("killed", grace_seconds)

    def read_output(self, limit: int = OUTPUT_LIMIT) -> tuple[bytes, bytes]:
        """The last ``limit`` bytes of stdout and stderr (live, or as kept at the end)."""
        with self._lock:
            if self._output is not None:
                return self._output[0][-limit:], self._output[1][-limit:]
            return _tail(self._log_dir / "stdout", limit), _tail(self._log_dir / "stderr", limit)

    def sandbox_pids(self) -> set[int]:
        """The processes of this run (host pids), including the outer ``bwrap``."""
        pids = {self.pid} | descendants(self.pid) if pid_alive(self.pid) else set()
        if self._cgroup is not None:
            pids |= self._cgroup.pids()
        return {p for p in pids if pid_alive(p)}

    # -- internals ----------------------------------------------------------------------------

    def _on_timeout(self) -> None:
        # Kept in cleanup_problems; stop(), called by the owner, raises it.
        with contextlib.suppress(SandboxError):
            self._stop("timeout", 0.0)

    def _stop(self, reason: Ending, grace_seconds: float) -> ProcessOutcome:
        with self._lock:
            if self._outcome is not None:
                if self.cleanup_problems:
                    raise SandboxError("sandbox clean-up incomplete: "
                                       + "; ".join(self.cleanup_problems))
                return self._outcome
            if self._popen.poll() is None:
                self._stop_reason = reason
                if grace_seconds > 0:
                    self._signal_tree(signal.SIGTERM)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._popen.wait(grace_seconds)
                self._kill_tree()
            self._finish()
            assert self._outcome is not None
            return self._outcome

    def _signal_tree(self, sig: int) -> None:
        """Signal the command and its children (not the reaper, bwrap or the namespace init)."""
        if self.isolation == "degraded":
            targets = {self.pid} | descendants(self.pid)
        else:
            init = self._init_pid()
            targets = descendants(init) if init is not None else set()
        for pid in targets:
            kill_quietly(pid, sig)

    def _kill_tree(self) -> None:
        if self.isolation == "degraded":
            tree = descendants(self.pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            for pid in tree:
                kill_quietly(pid)
        else:
            # The pid namespace's init first: the kernel then kills everything in the
            # namespace, bwrap exits, and the reaper reaps all and exits.
            init = self._init_pid()
            if init is not None:
                kill_quietly(init)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(2.0)
        if self._popen.poll() is None:  # something resisted: everything of the run, reaper last
            for pid in self.sandbox_pids() - {self.pid}:
                kill_quietly(pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(1.0)
            if self._popen.poll() is None:
                kill_quietly(self.pid)
        try:
            self._popen.wait(5.0)
        except subprocess.TimeoutExpired as e:
            raise SandboxError(f"sandboxed process {self.pid} did not die") from e

    def _init_pid(self) -> int | None:
        """The host pid of the sandbox's pid-namespace init, from ``bwrap --info-fd``."""
        if self._info_fd is not None:
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(self._info_fd, 4096):
                    self._info += chunk
        try:
            info, _ = json.JSONDecoder().raw_decode(self._info.decode())
            init = int(info["child-pid"])
        except (ValueError, KeyError, TypeError):
            return None
        # Only while it is still ours: a pid of a process already reaped may be reused.
        return init if init in descendants(self.pid) else None

    def _finish(self) -> None:
        """Sweep leftovers, record the outcome, remove cgroups, stage and logs."""
        rc = self._popen.wait()
        problems: list[str] = []
        if self.isolation == "degraded":  # what the command left running in its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self._cgroup is not None and not self._cgroup.kill_all():
            problems.append("processes left in the run's cgroup")
        if self.uid is not None:
            if kill_uid(self.uid):
                release_uid(self.uid)
            else:
                problems.append(f"processes of uid {self.uid} survived")
        code, sig = _decode_status(rc, self.isolation)
        ended: Ending = self._stop_reason or ("signaled" if sig is not None else "exited")
        self._outcome = ProcessOutcome(
            ended=ended, exit_code=code, signal=sig,
            oom_killed=self._cgroup.oom_killed() if self._cgroup else False,
            duration_seconds=time.monotonic() - self._started,
            isolation=self.isolation, degraded_reason=self.degraded_reason,
            peak_memory_bytes=self._cgroup.max_memory_bytes() if self._cgroup else None,
        )
        if self._timer is not None:
            self._timer.cancel()
        if self._info_fd is not None:
            os.close(self._info_fd)
            self._info_fd = None
        if self._cgroup is not None and not self._cgroup.remove():
            problems.append("the run's cgroups could not be removed")
        if self._stage is not None:
            self._stage.remove()
        self._output = (_tail(self._log_dir / "stdout", OUTPUT_LIMIT),
                        _tail(self._log_dir / "stderr", OUTPUT_LIMIT))
        shutil.rmtree(self._log_dir, ignore_errors=True)
        if problems:
            self.cleanup_problems = tuple(problems)
            raise SandboxError("sandbox clean-up incomplete: " + "; ".join(problems))


def _decode_status(rc: int, isolation: Isolation) -> tuple[int | None, int | None]:
    if rc < 0:
        return None, -rc
    if isolation == "full" and rc > 128 and rc - 128 < signal.NSIG:
        return None, rc - 128
    return rc, None


def _tail(path: Path, limit: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            return f.read(limit)
    except OSError:
        return b""


