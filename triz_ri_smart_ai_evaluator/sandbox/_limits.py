"""Resource limits: the declared :class:`Limits`, rlimits, and per-run cgroup v1 groups.

Two layers.  Rlimits (set by ``prlimit`` just before ``bwrap``) bound each process: address
space, CPU seconds, open files, file size, and - because every run has its own uid - the number
of processes.  A per-run cgroup v1 ``memory`` and ``pids`` group (when the hierarchy is mounted
and writable) bounds the run as a whole and lets tear-down find every process it holds.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ._tools import kill_quietly

CGROUP_ROOT = Path("/sys/fs/cgroup")
MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use.  All values are positive integers."""

    memory_bytes: int = 512 * MiB
    """The whole run (cgroup) and each process (``RLIMIT_AS``)."""
    max_pids: int = 64
    """Processes and threads of the run (cgroup ``pids.max`` and ``RLIMIT_NPROC``)."""
    cpu_seconds: int = 120
    """CPU time per process (``RLIMIT_CPU``)."""
    open_files: int = 256
    """Open descriptors per process (``RLIMIT_NOFILE``)."""
    file_size_bytes: int = 64 * MiB
    """Largest file a process may write, logs included (``RLIMIT_FSIZE``)."""
    tmp_size_bytes: int = 64 * MiB
    """Size of the private ``/tmp`` (a tmpfs, charged to the memory group as well)."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InputError(f"sandbox limit {name} must be a positive integer: {value!r}")

    def prlimit_args(self) -> list[str]:
        """``prlimit`` options that set these limits (soft = hard)."""
        return [
            f"--as={self.memory_bytes}",
            f"--nproc={self.max_pids}",
            f"--cpu={self.cpu_seconds}",
            f"--nofile={self.open_files}",
            f"--fsize={self.file_size_bytes}",
            "--core=0",
        ]


def _own_cgroup(controller: str) -> Path | None:
    """The cgroup v1 directory this process belongs to for ``controller``, if mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            base = CGROUP_ROOT / controller
            return base / path.lstrip("/") if (base / "cgroup.procs").exists() else None
    return None


class CgroupV1:
    """A per-run ``memory`` + ``pids`` cgroup pair, nested under this process's own groups."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, limits: Limits, *, name: str | None = None) -> CgroupV1 | None:
        """Make the groups and write the limits; ``None`` when cgroup v1 is not usable here."""
        name = name or f"trz-{secrets.token_hex(4)}"
        dirs: dict[str, Path] = {}
        try:
            for controller in ("memory", "pids"):
                parent = _own_cgroup(controller)
                if parent is None:
                    raise OSError(f"cgroup v1 {controller} controller not mounted")
                path = parent / name
                path.mkdir()
                dirs[controller] = path
            group = cls(dirs)
            (dirs["pids"] / "pids.max").write_text(str(limits.max_pids))
            (dirs["memory"] / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # with swap accounting, bound memory + swap as well
                memsw.write_text(str(limits.memory_bytes))
        except OSError:
            for path in dirs.values():
                with contextlib.suppress(OSError):
                    path.rmdir()
            return None
        return group

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a launcher writes its pid to, before it execs."""
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

    def pids(self) -> set[int]:
        """Every process currently in either group."""
        found: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return found

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer acted in the memory group."""
        try:
            text = (self.dirs["memory"] / "memory.oom_control").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and int(value) > 0:
                return True
        return False

    def max_memory_bytes(self) -> int | None:
        """The peak memory charge of the run."""
        try:
            return int((self.dirs["memory"] / "memory.max_usage_in_bytes").read_text())
        except (OSError, ValueError):
            return None

    def kill_all(self, *, timeout: float = 5.0) -> bool:
        """SIGKILL every process in the groups until none is left; ``True`` when empty."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:
                kill_quietly(pid)
            time.sleep(0.005)

    def remove(self, *, timeout: float = 5.0) -> bool:
        """Remove the (empty) groups, retrying while the kernel still holds them."""
        deadline = time.monotonic() + timeout
        for path in self.dirs.values():
            while path.exists():
                try:
                    path.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.01)
        return True


UID_BASE = 0x6A000000  # per-run uids: far above any account and any subuid range in use
_uids_in_use: set[int] = set()
_uid_lock = threading.Lock()


def allocate_uid() -> int:
    """A uid of the run's own: owned by no process now, and by no other run of this process."""
    in_use = set()
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            in_use.add(os.stat(f"/proc/{entry}").st_uid)
    with _uid_lock:
        while True:
            uid = UID_BASE + secrets.randbelow(1 << 24)
            if uid not in in_use and uid not in _uids_in_use:
                _uids_in_use.add(uid)
                return uid


def release_uid(uid: int) -> None:
    """Give a run's uid back once no process of it is left."""
    with _uid_lock:
        _uids_in_use.discard(uid)


def kill_uid(uid: int, timeout: float = 3.0) -> bool:
    """SIGKILL every process owned by ``uid`` (the run's own) until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        owned = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}").st_uid == uid:
                        owned.append(int(entry))
        if not owned:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in owned:
            kill_quietly(pid)
        time.sleep(0.005)


def cgroup_v1_usable() -> bool:
    """Whether per-run memory and pids groups can be made here (makes and removes one)."""
    group = CgroupV1.create(Limits(), name=f"trz-probe-{secrets.token_hex(4)}")
    if group is None:
        return False
    return group.remove(timeout=1.0)


# Degraded mode only: sets rlimits, then execs.  Run by this interpreter with -I -S, so it
# needs no module of ours and no preexec_fn (unsafe in a threaded harness).
DEGRADED_LAUNCHER = """
import os, resource, signal, sys
for sig in signal.valid_signals():  # ignored ones (SIGPIPE, SIGXFSZ, ...) survive exec
    try:
        signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL, SIGSTOP
        pass
names = ("AS", "CPU", "NOFILE", "FSIZE", "CORE", "NPROC")
values = [int(v) for v in sys.argv[1:7]]
for name, value in zip(names, values):
    if value >= 0:
        resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
os.execv(sys.argv[7], sys.argv[7:])
"""


def degraded_rlimit_args(limits: Limits) -> list[str]:
    """Arguments for :data:`DEGRADED_LAUNCHER`; ``-1`` leaves a limit as it is."""
    nproc = -1
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC; for a user it counts all their processes
        nproc = _own_task_count() + limits.max_pids
    return [
        str(limits.memory_bytes),
        str(limits.cpu_seconds),
        str(limits.open_files),
        str(limits.file_size_bytes),
        "0",
        str(nproc),
    ]


def _own_task_count() -> int:
    """Processes and threads of this user: what ``RLIMIT_NPROC`` counts."""
    count = 0
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            if proc_dir.stat().st_uid == os.geteuid():
                count += len(os.listdir(proc_dir / "task"))
        except OSError:
            continue
    return count
