"""What the sandboxed process sees: the filesystem, the interpreter, the environment.

How the interpreter gets in.  The venv's ``bin/python`` is a symlink into the base installation
(here ``/root/.pyenv/versions/3.11.7``), and ``/root`` is mode 700, so the unprivileged uid that
runs ``bwrap`` cannot even reach it (``bwrap`` resolves every bind source with ``realpath``, as
that uid, and ``--ro-bind-fd`` does not help for the same reason).  So a small launcher running
as root in a private mount namespace (``unshare --mount``) first bind-mounts the base
installation, the venv and the code directory onto empty directories of a per-run *stage*
directory that any uid can traverse; ``bwrap`` then binds those, read-only, to: the base
installation at its own path (so the venv's symlink and ``pyvenv.cfg`` ``home`` still hold),
the venv at ``/venv`` and the code at ``/app``.  The private mounts vanish with the namespace,
so nothing is ever mounted on the host.  Inside, ``/root`` holds only ``.pyenv/versions/<v>``.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ._limits import Limits

SANDBOX_VENV = "/venv"
SANDBOX_APP = "/app"
# Inside the sandbox these are private tmpfs mounts of the run, not the host's directories.
SANDBOX_TMP = "/tmp"  # noqa: S108
SANDBOX_SHM = "/dev/shm"  # noqa: S108
SANDBOX_HOSTNAME = "trz-sandbox"
# Read-only from the host, when present: TLS roots, the loader cache, time zone, names.
ETC_FROM_HOST = ("ssl", "ca-certificates", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
                 "localtime", "alternatives", "mime.types", "protocols", "services")
_ROOT_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The variables pass through the root-side launcher (unshare, nsenter, sh, mount) on their way
# into the sandbox: nothing that steers the dynamic loader, libc, libmount or a shell may pass.
_FORBIDDEN_ENV_PREFIXES = ("LD_", "GCONV_", "GLIBC_", "MALLOC_", "LIBMOUNT_", "LIBBLKID_",
                           "LIBSMARTCOLS_")
_FORBIDDEN_ENV_NAMES = frozenset({"ENV", "BASH_ENV", "IFS", "LOCPATH", "NLSPATH",
                                  "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN"})

# Runs as root in the new mount namespace, inside the app's network namespace: joins the
# run's cgroups, makes the stage binds, then execs setpriv -> prlimit -> bwrap.
LAUNCH_SCRIPT = r"""set -eu
mount_bin=$1; shift
while [ "$#" -gt 0 ]; do
  case "$1" in
    cg) printf '%s\n' "$$" > "$2"; shift 2 ;;
    bind) "$mount_bin" --bind "$2" "$3"; shift 3 ;;
    --) shift; exec "$@" ;;
    *) echo "trz launcher: unexpected argument" >&2; exit 125 ;;
  esac
done
echo "trz launcher: no command" >&2; exit 125
"""


@dataclass(frozen=True)
class PythonRuntime:
    """An interpreter installation and, optionally, a venv made from it."""

    base_prefix: Path
    """The installation as the venv names it (``pyvenv.cfg`` ``home``, minus ``/bin``)."""
    venv: Path | None = None

    @classmethod
    def current(cls) -> PythonRuntime:
        """The interpreter running this process (its venv when it runs in one)."""
        if sys.prefix != sys.base_prefix:
            return cls.from_venv(Path(sys.prefix))
        return cls(base_prefix=Path(sys.base_prefix))

    @classmethod
    def from_venv(cls, venv: Path) -> PythonRuntime:
        """Read ``pyvenv.cfg``; raises :class:`InputError` when it is missing or has no home."""
        try:
            lines = (venv / "pyvenv.cfg").read_text().splitlines()
        except OSError as e:
            raise InputError(f"not a venv (no pyvenv.cfg): {venv}") from e
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return cls(base_prefix=Path(value.strip()).parent, venv=venv.absolute())
        raise InputError(f"pyvenv.cfg of {venv} names no home")

    @property
    def needs_bind(self) -> bool:
        """Whether the installation lies outside ``/usr`` (which the sandbox has anyway)."""
        return not self.base_prefix.resolve().is_relative_to("/usr")

    def sandbox_python(self) -> str:
        """The interpreter's path inside the sandbox."""
        if self.venv is not None:
            return f"{SANDBOX_VENV}/bin/python"
        return str(self.base_prefix / "bin" / "python3")

    def host_python(self) -> str:
        """The interpreter's path on the host (degraded mode)."""
        if self.venv is not None:
            return str(self.venv / "bin" / "python")
        return str(self.base_prefix / "bin" / "python3")


def sandbox_env(env: Mapping[str, str], *, path: str, home: str) -> dict[str, str]:
    """The complete environment of the sandboxed process; nothing of the harness's leaks.

    Raises :class:`InputError` for a malformed name or value, or a loader variable.
    """
    for name, value in env.items():
        if not _ENV_NAME.match(name) or not isinstance(value, str) or "\0" in value:
            raise InputError(f"environment variable not allowed in the sandbox: {name!r}")
        if name.startswith(_FORBIDDEN_ENV_PREFIXES) or name in _FORBIDDEN_ENV_NAMES:
            raise InputError(f"environment variable not allowed in the sandbox: {name!r}")
    base = {"PATH": path, "HOME": home, "TMPDIR": home,
            "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return {**base, **env}


def verify_readable_by_others(code_dir: Path, *, max_entries: int = 100_000) -> None:
    """Raise :class:`InputError` unless every file and directory is world-readable.

    The sandbox runs as a uid of its own, so it can read only what "others" may read.
    """
    seen = 0
    for root, dirs, files in os.walk(code_dir):
        for name in [".", *dirs, *files]:
            path = os.path.join(root, name)
            st = os.lstat(path)
            need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & need != need:
                raise InputError(f"sandbox cannot read {path} (mode {stat.filemode(st.st_mode)});"
                                 " make the code directory readable by others (chmod -R o+rX)")
            seen += 1
        if seen > max_entries:
            raise InputError(f"code directory {code_dir} has more than {max_entries} entries")


class Stage:
    """The per-run directory holding the bind mount points and the generated ``/etc`` files."""

    def __init__(self, *, uid: int, harness_host: str,
                 decoys: Mapping[str, bytes] | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="trz-stage-"))
        self.path.chmod(0o755)
        for sub in ("mnt", "mnt/py", "mnt/venv", "mnt/app", "etc", "decoy"):
            # mkdir's mode is masked by the process umask, which another thread may have
            # narrowed at this moment: the mode is set explicitly (the sandbox uid reads them).
            (self.path / sub).mkdir(exist_ok=True)
            (self.path / sub).chmod(0o755)
        #: Read-only files shown inside the sandbox at chosen absolute paths: honeypots such as
        #: a decoy "expected answers" file whose canary must never come back out.
        self.decoys: list[tuple[Path, str]] = []
        for index, (target, data) in enumerate(sorted((decoys or {}).items())):
            if not target.startswith("/") or ".." in target.split("/"):
                raise InputError(f"decoy path must be absolute and plain: {target!r}")
            file = self.path / "decoy" / str(index)
            file.write_bytes(data)
            file.chmod(0o644)
            self.decoys.append((file, target))
        etc = {
            "passwd": f"root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:{uid}:{uid}::{SANDBOX_TMP}:"
                      "/usr/sbin/nologin\nnobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n",
            "group": f"root:x:0:\nsandbox:x:{uid}:\nnogroup:x:65534:\n",
            "hosts": f"127.0.0.1 localhost {SANDBOX_HOSTNAME}\n",
            # DNS goes to the harness host, where the ruleset records and refuses it.
            "resolv.conf": f"nameserver {harness_host}\noptions timeout:1 attempts:1\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
        }
        for name, text in etc.items():
            (self.path / "etc" / name).write_text(text)
            (self.path / "etc" / name).chmod(0o644)

    def mount_point(self, name: str) -> str:
        return str(self.path / "mnt" / name)

    def remove(self) -> None:
        # Only empty mount points here: the binds exist in the run's private mount namespace,
        # never in this one, so removing the tree cannot reach the code or the interpreter.
        shutil.rmtree(self.path, ignore_errors=True)


def launcher_args(*, runtime: PythonRuntime, code_dir: Path, stage: Stage,
                  cgroup_procs: list[str]) -> list[str]:
    """The arguments of :data:`LAUNCH_SCRIPT` before its ``--``."""
    args: list[str] = []
    for procs in cgroup_procs:
        args += ["cg", procs]
    if runtime.needs_bind:
        args += ["bind", str(runtime.base_prefix.resolve()), stage.mount_point("py")]
    if runtime.venv is not None:
        args += ["bind", str(runtime.venv.resolve()), stage.mount_point("venv")]
    args += ["bind", str(code_dir.resolve()), stage.mount_point("app")]
    return args


def system_dir_args() -> list[str]:
    """``/usr`` read-only, and ``/bin``, ``/lib``... as on the host (symlinks or binds)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args


def bwrap_args(*, bwrap: str, runtime: PythonRuntime, stage: Stage, limits: Limits,
               info_fd: int, command: list[str]) -> list[str]:
    """The ``bwrap`` command line.  It holds no secret: inside, it is ``/proc/1/cmdline``."""
    args = [
        bwrap,
        "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc",
        "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
        "--cap-drop", "ALL", "--hostname", SANDBOX_HOSTNAME,
        *system_dir_args(),
    ]
    for name in ETC_FROM_HOST:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in sorted((stage.path / "etc").iterdir()):
        args += ["--ro-bind", str(path), f"/etc/{path.name}"]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(limits.tmp_size_bytes), "--tmpfs", SANDBOX_SHM,
             "--size", str(limits.tmp_size_bytes), "--tmpfs", SANDBOX_TMP]
    if runtime.needs_bind:
        args += ["--ro-bind", stage.mount_point("py"), str(runtime.base_prefix)]
    if runtime.venv is not None:
        args += ["--ro-bind", stage.mount_point("venv"), SANDBOX_VENV]
    for file, target in stage.decoys:
        args += ["--ro-bind", str(file), target]
    args += ["--ro-bind", stage.mount_point("app"), SANDBOX_APP, "--chdir", SANDBOX_APP,
             "--info-fd", str(info_fd), "--remount-ro", "/", "--", *command]
    return args
