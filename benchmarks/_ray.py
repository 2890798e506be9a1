"""A Ray head node on this machine for the Ray backend's tests and benchmark (issue 16 item 4).

``ray start --head --block`` in a session of its own, advertising ``triz_harness`` so that the
service's harness actors may be placed on it; on exit the session's processes are stopped
through its process group (and only they: nothing else on the machine is touched).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_ray_head(cpus: int = 2, harness_slots: int = 2) -> Iterator[str]:
    """Yield the address (``127.0.0.1:port``) of a fresh Ray head with ``cpus`` CPUs and
    ``harness_slots`` of the ``triz_harness`` resource."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="trz-ray-", dir="/tmp")  # Ray's socket paths must be short
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={port}", f"--num-cpus={cpus}",
         f'--resources={{"triz_harness": {harness_slots}}}', f"--temp-dir={temp}",
         "--include-dashboard=false", "--disable-usage-stats",
         "--object-store-memory=200000000", "--node-ip-address=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while subprocess.run([str(RAY), "status", f"--address={address}"],
                             capture_output=True, check=False).returncode != 0:
            if head.poll() is not None:
                raise RuntimeError("ray start --head exited")
            if time.monotonic() > deadline:
                raise RuntimeError("the Ray head did not come up in 90 s")
            time.sleep(1)
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            # `ray start --block` often ignores SIGTERM for good: do not wait long for it.
            head.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=30)
        time.sleep(1)
        left = subprocess.run(["pgrep", "-s", str(head.pid)], capture_output=True, text=True,
                              check=False).stdout.split()
        for pid in left:  # only processes of the session started here
            os.kill(int(pid), signal.SIGKILL)
