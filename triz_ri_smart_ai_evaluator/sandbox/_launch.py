"""Starting one sandboxed process tree.

Full isolation: a reaper (this interpreter, as root) -> ``unshare --mount`` -> ``nsenter --net``
(the run's app namespace) -> the launch script (root: joins the run's cgroups, makes the stage
binds) -> ``setpriv`` (a fresh uid and gid of the run's own, no groups, no new privileges) ->
``prlimit`` -> ``bwrap`` (new user, pid, ipc, uts and cgroup namespaces, all capabilities
dropped) -> the command.  Every step but ``bwrap`` execs in place.

The reaper is there because the outer ``bwrap`` exits as soon as its pid-namespace init reports
the command's status, without reaping that init: the zombie would go to the host's pid 1, which
need not reap it promptly (here it takes seconds).  As a child subreaper, the reaper adopts and
reaps it, and exits with ``bwrap``'s status only when nothing of the run is left.

Degraded mode (only on request): the command runs directly as this user with rlimits only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import InputError
from ._bwrap import (
    LAUNCH_SCRIPT,
    SANDBOX_TMP,
    SANDBOX_VENV,
    PythonRuntime,
    Stage,
    bwrap_args,
    launcher_args,
    sandbox_env,
    verify_readable_by_others,
)
from ._errors import IsolationError, SandboxError
from ._limits import (
    DEGRADED_LAUNCHER,
    CgroupV1,
    Limits,
    allocate_uid,
    degraded_rlimit_args,
    release_uid,
)
from ._netns import NETNS_DIR, Network
from ._process import ProcessResult, SandboxedProcess
from ._tools import SYSTEM_PATH

# Root side, before the launcher: become a child subreaper, run the chain, reap everything.
# If the harness dies, the reaper SIGKILLs every process below it (the adopted namespace init
# included).  It watches its parent by polling rather than with PR_SET_PDEATHSIG, which would
# fire when the *thread* that started it ends.  Python ignores SIGPIPE and SIGXFSZ, and a
# harness started as a background job of a non-interactive shell ignores SIGINT and SIGQUIT;
# ignored dispositions survive exec, so the chain gets every default disposition back.
REAPER = """
import ctypes, os, signal, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit(125)
# The harness's pid comes from the harness: read here with getppid(), it would already be 1
# when the harness died while this interpreter was still starting, and nothing below would
# ever be killed.
parent = int(sys.argv[1])
if os.getppid() != parent:
    sys.exit(125)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
main = os.fork()
if main == 0:
    try:
        for sig in signal.valid_signals():  # every ignored signal, SIGINT/SIGQUIT included
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):  # SIGKILL, SIGSTOP
                pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)

def kill_below():
    children = {}
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo = list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

status = None
while True:
    try:
        pid, st = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == main:
        status = st
    elif pid == 0:
        if os.getppid() != parent:
            kill_below()
        signal.sigtimedwait([signal.SIGCHLD], 0.5)
code = os.waitstatus_to_exitcode(127 << 8 if status is None else status)
sys.exit(code if code >= 0 else 128 - code)
"""


def start_sandboxed(
    argv: Sequence[str], *, code_dir: Path, network: Network | None,
    env: Mapping[str, str] | None = None, limits: Limits | None = None,
    wall_timeout: float | None = None, runtime: PythonRuntime | None = None,
    unsafe_degraded: bool = False, degraded_reason: str | None = None,
    decoys: Mapping[str, bytes] | None = None,
) -> SandboxedProcess:
    """Start ``argv`` in the sandbox, with ``code_dir`` read-only at ``/app`` as its cwd.

    With a :class:`Network` (verified when it was opened) the run is fully isolated and
    ``argv`` names paths inside the sandbox.  With ``network=None`` it runs *unsafely* on the
    host, which must be asked for with ``unsafe_degraded=True`` and a ``degraded_reason``.
    Secrets go in ``env``, never in ``argv``.  Raises :class:`IsolationError`,
    :class:`InputError` or :class:`SandboxError`.
    """
    limits = limits or Limits()
    runtime = runtime or PythonRuntime.current()
    if not argv:
        raise InputError("empty command")
    if not code_dir.is_dir():
        raise InputError(f"code directory not found: {code_dir}")
    env = env or {}
    if network is None:
        if not (unsafe_degraded and degraded_reason):
            raise IsolationError("no isolated network given and unsafe_degraded not requested"
                                 " with a reason")
        return _start_degraded(list(argv), code_dir, env, limits, wall_timeout, runtime,
                               degraded_reason)
    if not network.verified or not os.path.exists(f"{NETNS_DIR}/{network.namespace}"):
        raise IsolationError("the network is not open and verified")
    verify_readable_by_others(code_dir)
    return _start_isolated(list(argv), code_dir, network, env, limits, wall_timeout, runtime,
                           decoys or {})


def _start_isolated(argv: list[str], code_dir: Path, network: Network, env: Mapping[str, str],
                    limits: Limits, wall_timeout: float | None,
                    runtime: PythonRuntime, decoys: Mapping[str, bytes]) -> SandboxedProcess:
    full_env = sandbox_env(env, path=f"{SANDBOX_VENV}/bin:{SYSTEM_PATH}", home=SANDBOX_TMP)
    uid = allocate_uid()
    cgroup = CgroupV1.create(limits)
    stage: Stage | None = None
    log_dir: Path | None = None
    info_read = info_write = -1
    try:
        stage = Stage(uid=uid, harness_host=network.harness_host, decoys=decoys)
        log_dir = Path(tempfile.mkdtemp(prefix="trz-log-"))
        info_read, info_write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(info_read, False)
        popen = _popen_isolated(argv, code_dir, network, full_env, limits, runtime, uid,
                                cgroup, stage, log_dir, info_write)
    except BaseException as e:
        for fd in (info_read, info_write):
            if fd >= 0:
                os.close(fd)
        if cgroup is not None:
            cgroup.remove()
        if stage is not None:
            stage.remove()
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)
        release_uid(uid)
        if isinstance(e, OSError):
            raise SandboxError(f"could not start the sandbox: {e}") from e
        raise
    os.close(info_write)
    return SandboxedProcess(popen, isolation="full", degraded_reason=None, log_dir=log_dir,
                            uid=uid, cgroup=cgroup, stage=stage, info_fd=info_read,
                            wall_timeout=wall_timeout)


def _popen_isolated(argv: list[str], code_dir: Path, network: Network, env: dict[str, str],
                    limits: Limits, runtime: PythonRuntime, uid: int, cgroup: CgroupV1 | None,
                    stage: Stage, log_dir: Path, info_fd: int) -> subprocess.Popen[bytes]:
    tools = network.tools
    command = [
        sys.executable, "-I", "-S", "-c", REAPER, str(os.getpid()),
        tools.unshare, "--mount", "--propagation", "private", "--",
        *network.in_namespace_argv([
            tools.sh, "-c", LAUNCH_SCRIPT, "trz-launch", tools.mount,
            *launcher_args(runtime=runtime, code_dir=code_dir, stage=stage,
                           cgroup_procs=cgroup.procs_files if cgroup else []),
            "--", tools.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--no-new-privs", "--", tools.prlimit, *limits.prlimit_args(), "--",
            *bwrap_args(bwrap=tools.bwrap, runtime=runtime, stage=stage, limits=limits,
                        info_fd=info_fd, command=argv),
        ]),
    ]
    with open(log_dir / "stdout", "wb") as out, open(log_dir / "stderr", "wb") as err:
        return subprocess.Popen(  # noqa: S603 - absolute tool paths, no shell
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
            pass_fds=(info_fd,), close_fds=True, cwd="/",
        )


def _start_degraded(argv: list[str], code_dir: Path, env: Mapping[str, str], limits: Limits,
                    wall_timeout: float | None, runtime: PythonRuntime,
                    reason: str) -> SandboxedProcess:
    log_dir = Path(tempfile.mkdtemp(prefix="trz-log-"))
    home = log_dir / "home"
    home.mkdir()
    bin_dir = f"{runtime.venv}/bin:" if runtime.venv else ""
    full_env = sandbox_env(env, path=f"{bin_dir}{SYSTEM_PATH}", home=str(home))
    program = shutil.which(argv[0], path=full_env["PATH"]) or argv[0]
    command = [sys.executable, "-I", "-S", "-c", DEGRADED_LAUNCHER,
               *degraded_rlimit_args(limits), program, *argv[1:]]
    try:
        with open(log_dir / "stdout", "wb") as out, open(log_dir / "stderr", "wb") as err:
            popen = subprocess.Popen(  # noqa: S603 - our interpreter and launcher, no shell
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env,
                cwd=code_dir, start_new_session=True, close_fds=True,
            )
    except OSError as e:
        shutil.rmtree(log_dir, ignore_errors=True)
        raise SandboxError(f"could not start the degraded process: {e}") from e
    return SandboxedProcess(popen, isolation="degraded", degraded_reason=reason, log_dir=log_dir,
                            uid=None, cgroup=None, stage=None, info_fd=None,
                            wall_timeout=wall_timeout)


def run_sandboxed(
    argv: Sequence[str], *, code_dir: Path, network: Network | None, timeout: float,
    env: Mapping[str, str] | None = None, limits: Limits | None = None,
    runtime: PythonRuntime | None = None, unsafe_degraded: bool = False,
    degraded_reason: str | None = None,
) -> ProcessResult:
    """Start, wait at most ``timeout`` seconds of wall clock, stop; as :func:`start_sandboxed`."""
    proc = start_sandboxed(argv, code_dir=code_dir, network=network, env=env, limits=limits,
                           wall_timeout=timeout, runtime=runtime,
                           unsafe_degraded=unsafe_degraded, degraded_reason=degraded_reason)
    proc.wait(timeout + 5.0)
    outcome = proc.stop()
    stdout, stderr = proc.read_output()
    return ProcessResult(outcome=outcome, stdout=stdout, stderr=stderr)
