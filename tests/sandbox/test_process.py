"""The sandboxed process: what it sees, what it may do, and that it always ends cleanly."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox import Snapshot, assert_nothing_left, make_code_dir, require_isolation
from triz_ri_smart_ai_evaluator.sandbox import (
    Limits,
    Network,
    ProcessResult,
    run_sandboxed,
    start_sandboxed,
)
from triz_ri_smart_ai_evaluator.sandbox._limits import MiB

PY = "/venv/bin/python"


@pytest.fixture
def isolated() -> Iterator[Network]:
    """A fresh network per test, and proof afterwards that nothing of the run is left."""
    require_isolation()
    before = Snapshot.take()
    with Network() as net:
        yield net
    assert_nothing_left(before)


def run_py(net: Network, code_dir: Path, source: str, *args: str,
           **kwargs: object) -> ProcessResult:
    timeout = kwargs.pop("timeout", 20.0)
    return run_sandboxed([PY, "-c", source, *args], code_dir=code_dir, network=net,
                         timeout=timeout, **kwargs)  # type: ignore[arg-type]


VIEW = """
import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
out = {
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "cap_eff": status["CapEff"].strip(), "cap_prm": status["CapPrm"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "root": sorted(os.listdir("/")), "work": os.path.exists("/work"),
    "root_home": sorted(os.listdir("/root")), "cwd": os.getcwd(),
    "tmp": os.listdir("/tmp"), "secret_visible": os.path.exists(os.environ["SECRET_PATH"]),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}
for target in ("/app/new_file", "/app/README", "/etc/passwd", "/new_top_level"):
    try:
        open(target, "a").close()
        out[target] = "written"
    except OSError as e:
        out[target] = e.strerror
with open("/tmp/scratch", "w") as f:
    out["tmp_write"] = f.write("ok")
print(json.dumps(out))
"""


def test_sandbox_sees_nothing_of_the_harness_and_has_no_privileges(
    isolated: Network, tmp_path: Path
) -> None:
    secret = tmp_path / "control_set_secret.json"
    secret.write_text('{"seed": "do-not-leak"}')
    secret.chmod(0o644)
    code = make_code_dir(tmp_path)
    # World-writable on the host, so only the read-only mount can refuse the writes.
    code.chmod(0o777)
    (code / "README").chmod(0o666)
    result = run_py(isolated, code, VIEW, env={"SECRET_PATH": str(secret)})
    view = json.loads(result.stdout)
    assert view["uid"] != 0
    assert view["gid"] != 0
    assert view["groups"] in ([], [view["gid"]])
    assert view["cap_eff"] == view["cap_prm"] == "0000000000000000"
    assert view["no_new_privs"] == "1"
    assert view["work"] is False
    assert view["secret_visible"] is False
    assert view["root_home"] == [".pyenv"]  # only the interpreter, at its own path
    assert view["root"] == sorted(["app", "bin", "dev", "etc", "lib", "lib64", "proc", "root",
                                   "sbin", "tmp", "usr", "venv"])
    assert view["cwd"] == "/app"
    assert view["tmp"] == []
    assert view["/app/new_file"] == view["/app/README"] == "Read-only file system"
    assert view["/new_top_level"] == "Read-only file system"
    assert view["/etc/passwd"] in ("Read-only file system", "Permission denied")
    assert view["tmp_write"] == 2
    assert view["pids"][0] == 1  # its own pid namespace
    assert len(view["pids"]) <= 3


def test_no_signal_disposition_of_the_harness_is_inherited(isolated: Network,
                                                            tmp_path: Path) -> None:
    # The harness (Python) ignores SIGPIPE and SIGXFSZ, and a harness started as a background
    # job of a non-interactive shell (as run-tests.sh starts the sandbox tests) also ignores
    # SIGINT and SIGQUIT; exec would pass all of that on.  Ignore those two here as well.
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        result = run_sandboxed(["grep", "SigIgn", "/proc/self/status"],
                               code_dir=make_code_dir(tmp_path), network=isolated, timeout=20)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert result.stdout.split() == [b"SigIgn:", b"0000000000000000"]


CMDLINES = """
import glob, json, os
lines = []
for path in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        lines.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
print(json.dumps({"cmdlines": lines, "env_has_secret": "SMTP_PASSWORD" in os.environ}))
"""


def test_secret_passed_in_the_environment_is_in_no_visible_cmdline(
    isolated: Network, tmp_path: Path
) -> None:
    password = "pw-7f3a9c21e4"  # a test value
    result = run_py(isolated, make_code_dir(tmp_path), CMDLINES,
                    env={"SMTP_PASSWORD": password})
    seen = json.loads(result.stdout)
    assert seen["env_has_secret"] is True
    assert any("bwrap" in line for line in seen["cmdlines"])  # /proc/1 is bwrap: it is visible
    assert not any(password in line for line in seen["cmdlines"])


FORK_BOMB = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.001)
"""


def test_fork_bomb_is_held_to_the_pid_limit_and_fully_removed(
    isolated: Network, tmp_path: Path
) -> None:
    proc = start_sandboxed([PY, "-c", FORK_BOMB], code_dir=make_code_dir(tmp_path),
                           network=isolated, limits=Limits(max_pids=64), wall_timeout=2.0)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, len(proc.sandbox_pids()))
        time.sleep(0.05)
    outcome = proc.stop()
    assert outcome.ended == "timeout"
    # 64 in the run's pids group; the reaper and the root-side chain are outside it.
    assert 8 < peak <= 64 + 2
    assert proc.sandbox_pids() == set()


MEMORY_HOG = """
import os, sys
children = int(sys.argv[1])
for _ in range(children):
    if os.fork() == 0:
        break
hog = []
while True:
    hog.append(b"\\x01" * (16 << 20))
"""


@pytest.mark.parametrize("children", [0, 3], ids=["one-process", "four-processes"])
def test_memory_hog_is_held_to_the_memory_limit(isolated: Network, tmp_path: Path,
                                                children: int) -> None:
    limit = 512 * MiB
    result = run_py(isolated, make_code_dir(tmp_path), MEMORY_HOG, str(children),
                    limits=Limits(memory_bytes=limit), timeout=20.0)
    outcome = result.outcome
    # One process meets RLIMIT_AS (MemoryError); four together meet the cgroup (OOM kill).
    assert outcome.ended in ("exited", "signaled")
    assert outcome.exit_code != 0
    assert outcome.peak_memory_bytes is not None
    assert outcome.peak_memory_bytes <= limit
    if children:
        assert outcome.oom_killed
    else:
        assert b"MemoryError" in result.stderr


def test_hang_is_killed_at_the_wall_clock_timeout(isolated: Network, tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_py(isolated, make_code_dir(tmp_path),
                    "import threading; threading.Event().wait()", timeout=1.0)
    assert result.outcome.ended == "timeout"
    assert result.outcome.signal == 9
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("source", "ended", "exit_code", "signal"),
    [("import sys; sys.exit(3)", "exited", 3, None),
     ("raise RuntimeError('candidate crashed')", "exited", 1, None),
     ("import os; os.abort()", "signaled", None, 6)],
    ids=["exit-3", "exception", "abort"],
)
def test_crash_is_recorded(isolated: Network, tmp_path: Path, source: str, ended: str,
                           exit_code: int | None, signal: int | None) -> None:
    result = run_py(isolated, make_code_dir(tmp_path), source)
    assert (result.outcome.ended, result.outcome.exit_code, result.outcome.signal) == (
        ended, exit_code, signal)
    assert result.outcome.isolation == "full"


def test_leftover_background_children_die_with_the_command(isolated: Network,
                                                           tmp_path: Path) -> None:
    source = ("import subprocess\n"
              "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
              "print('parent exits')")
    result = run_py(isolated, make_code_dir(tmp_path), source)
    assert result.outcome.exit_code == 0
    assert result.stdout == b"parent exits\n"


def test_stop_with_grace_lets_the_command_handle_sigterm(isolated: Network,
                                                         tmp_path: Path) -> None:
    source = ("import signal, sys, threading\n"
              "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
              "print('ready', flush=True)\nthreading.Event().wait()")
    proc = start_sandboxed([PY, "-c", source], code_dir=make_code_dir(tmp_path),
                           network=isolated)
    deadline = time.monotonic() + 10
    while b"ready" not in proc.read_output()[0] and time.monotonic() < deadline:
        time.sleep(0.02)
    outcome = proc.stop(grace_seconds=5.0)
    assert (outcome.ended, outcome.exit_code) == ("killed", 0)


def test_stop_from_another_thread_while_waiting(isolated: Network, tmp_path: Path) -> None:
    proc = start_sandboxed(["sleep", "600"], code_dir=make_code_dir(tmp_path), network=isolated)
    threading.Timer(0.3, proc.stop).start()
    outcome = proc.wait(10)
    assert outcome is not None
    assert outcome.ended == "killed"


CRASHING_HARNESS = """
import json, os, sys
from pathlib import Path
from triz_ri_smart_ai_evaluator.sandbox import Network, start_sandboxed
net = Network().open()
proc = start_sandboxed(["sleep", "600"], code_dir=Path(sys.argv[1]), network=net)
print(json.dumps({"namespace": net.namespace, "link": net.host_interface, "uid": proc.uid,
                  "cgroups": [str(p) for p in proc._cgroup.dirs.values()] if proc._cgroup else [],
                  "stage": str(proc._stage.path) if proc._stage else None,
                  "logs": str(proc._log_dir)}), flush=True)
os.kill(os.getpid(), 9)  # the harness dies without cleaning anything up
"""


def test_harness_crash_takes_the_sandbox_down(tmp_path: Path) -> None:
    require_isolation()
    code = make_code_dir(tmp_path)
    done = subprocess.run([sys.executable, "-c", CRASHING_HARNESS, str(code)],
                          capture_output=True, timeout=60, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    left = json.loads(done.stdout)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and uid_processes(left["uid"]):
            time.sleep(0.05)
        assert uid_processes(left["uid"]) == set()
        # Regression: a harness that died while the reaper was still starting left the launch
        # chain running (bwrap appeared in the run's cgroups a moment later and stayed).
        time.sleep(1.5)
        assert uid_processes(left["uid"]) == set()
        for path in left["cgroups"]:
            assert (Path(path) / "cgroup.procs").read_text().split() == []
    finally:  # what only a live harness would have removed
        subprocess.run(["ip", "link", "del", left["link"]], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", left["namespace"]], check=False)
        for path in left["cgroups"]:
            rmdir_when_empty(Path(path))
        shutil.rmtree(left["stage"], ignore_errors=True)
        shutil.rmtree(left["logs"], ignore_errors=True)


def rmdir_when_empty(cgroup: Path, timeout: float = 10.0) -> None:
    """Remove a cgroup once the kernel has reaped its last task.

    The sandbox's root-owned bwrap parent can still be exiting when the
    candidate's uid has no process left, and v1 refuses rmdir (EBUSY) while
    any task, even a zombie, is charged to the group.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def uid_processes(uid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.add(int(entry))
    return found
