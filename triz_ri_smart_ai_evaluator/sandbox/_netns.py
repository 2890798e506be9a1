"""The per-run network: an app namespace joined to the root namespace by a veth pair.

The root end of the veth carries the *harness host* address, where the harness binds its SMTP
receiver and where :class:`~._sink.Sink` listens; the app end carries the app address and a
default route via the harness host.  The nftables ruleset of :mod:`._nft` is loaded before any
link of the namespace comes up, and :meth:`Network.verify_isolation` proves it works (a probe
connection must land in the ``attempted`` set and in the sink) before :meth:`Network.open`
returns.  :meth:`Network.close` removes everything, whatever state set-up reached.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterable
from types import TracebackType

from ._addressing import claim_subnet, disable_ipv6, release_subnet
from ._errors import IsolationError, SandboxError
from ._nft import (
    ALLOWED_SET,
    ATTEMPTED_SET,
    TABLE,
    TABLE_FAMILY,
    AttemptedDestination,
    check_table,
    parse_set_elements,
    ruleset,
)
from ._sink import Sink, SinkConnection
from ._tools import Tools, kill_quietly, require_tools, run_tool

NETNS_DIR = "/run/netns"
#: One lock file per live namespace, held (flock) by the process that made it for as long as the
#: namespace is its own; the kernel drops the lock when that process dies, however it dies.
OWNER_DIR = "/run/triz-evaluator/netns"
_PREFIX = "trz-app-"

# Runs as root inside the app namespace (never inside the sandbox): one TCP connect to a
# non-allowed port on the harness host, one UDP datagram, and the IPv6 switch.
_PROBE = """
import json, socket, sys
host, port, nonce = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {}
try:
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(nonce.encode())
    out["tcp"] = "sent"
except OSError as e:
    out["tcp"] = repr(e)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(nonce.encode(), (host, port))
    out["udp"] = "sent"
except OSError as e:
    out["udp"] = repr(e)
try:
    with open("/proc/sys/net/ipv6/conf/all/disable_ipv6") as f:
        out["ipv6_disabled"] = f.read().strip() == "1"
except OSError:
    out["ipv6_disabled"] = True  # no IPv6 in this kernel
print(json.dumps(out))
"""


class Network:
    """A verified, recording network for one run.  Use as a context manager.

    Raises :class:`SandboxError` when set-up fails and :class:`IsolationError` when the
    isolation cannot be verified; in both cases everything made so far is removed.
    """

    def __init__(self, *, app_port: int = 8000, allowed_tcp_ports: Iterable[int] = (),
                 tools: Tools | None = None) -> None:
        self.tools = tools or require_tools()
        self.app_port = app_port
        self.allowed_tcp_ports = sorted(set(allowed_tcp_ports))
        tag = secrets.token_hex(4)
        self.namespace = f"{_PREFIX}{tag}"
        self.host_interface = _host_interface(self.namespace)
        self.app_interface = f"trza{tag[:6]}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.harness_host = ""
        self.app_address = ""
        self.sink: Sink | None = None
        self.verified = False
        """True once :meth:`verify_isolation` passed, until :meth:`close`."""
        self._created = False
        self._closed = False
        self._owner: int | None = None  # the fd of the held owner lock

    # -- life cycle ---------------------------------------------------------------------------

    def __enter__(self) -> Network:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def open(self) -> Network:
        """Create, load the ruleset, verify.  Raises on any failure, after cleaning up.

        Namespaces that runs killed before their own clean-up left behind are removed first
        (:func:`sweep_abandoned`)."""
        with contextlib.suppress(SandboxError, OSError):  # left for the next run to retry
            sweep_abandoned(self.tools)
        try:
            self._create()
            self.verify_isolation()
        except BaseException:
            with contextlib.suppress(SandboxError):
                self.close()
            raise
        return self

    def _create(self) -> None:
        ip = self.tools.ip
        self.subnet = claim_subnet(self.tools)
        host, app = list(self.subnet.hosts())
        self.harness_host, self.app_address = str(host), str(app)
        self._created = True
        self._owner = _hold_owner_lock(self.namespace)
        run_tool([ip, "netns", "add", self.namespace])
        run_tool([ip, "link", "add", self.host_interface, "type", "veth", "peer", "name",
                  self.app_interface, "netns", self.namespace])
        disable_ipv6(self.host_interface)
        batch = (f"addr add {host}/{self.subnet.prefixlen} dev {self.host_interface}\n"
                 f"link set {self.host_interface} up\n")
        run_tool([ip, "-batch", "-"], stdin=batch.encode())
        self.sink = Sink(self.harness_host).start()
        rules = ruleset(harness_host=self.harness_host, app_port=self.app_port,
                        sink_port=self.sink.port, allowed_tcp_ports=self.allowed_tcp_ports)
        # IPv6 off and the ruleset loaded while every link of the namespace is still down.
        script = ('for f in /proc/sys/net/ipv6/conf/*/disable_ipv6; do '
                  '[ -e "$f" ] && echo 1 > "$f"; done; exec "$0" -f -')
        run_tool(self._in_namespace([self.tools.sh, "-c", script, self.tools.nft]),
                 stdin=rules.encode())
        batch = (f"addr add {app}/{self.subnet.prefixlen} dev {self.app_interface}\n"
                 f"link set {self.app_interface} up\nlink set lo up\n"
                 f"route add default via {host}\n")
        run_tool([ip, "-n", self.namespace, "-batch", "-"], stdin=batch.encode())

    def close(self) -> None:
        """Kill what runs in the namespace, delete it, the veth and the sink.  Idempotent.

        Raises :class:`SandboxError` if something could not be removed.
        """
        if self._closed:
            return
        self._closed = True
        self.verified = False
        if self.sink is not None:
            self.sink.close()
        problems = _remove(self.tools, self.namespace, kill=self._created)
        if self._owner is not None:
            if not problems:
                _drop_owner_lock(self.namespace)
            os.close(self._owner)  # still there after a failed removal: a later sweep retries
            self._owner = None
        if self.subnet is not None:
            release_subnet(self.subnet)
        if problems:
            raise SandboxError("network tear-down incomplete: " + "; ".join(problems))

    # -- what the harness uses ----------------------------------------------------------------

    def allow_tcp_port(self, port: int) -> None:
        """Let the app open TCP connections to ``harness_host:port`` (e.g. the SMTP port)."""
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"not a TCP port: {port!r}")
        self._nft("add", "element", TABLE_FAMILY, TABLE, ALLOWED_SET, f"{{ {port} }}")
        self.allowed_tcp_ports = sorted({*self.allowed_tcp_ports, port})

    def attempted_destinations(self) -> list[AttemptedDestination]:
        """Every non-allowed destination the namespace tried to reach, read from nftables."""
        out = self._nft("-j", "list", "set", TABLE_FAMILY, TABLE, ATTEMPTED_SET)
        return parse_set_elements(out)

    def sink_connections(self) -> tuple[SinkConnection, ...]:
        """The redirected TCP connections that reached the sink."""
        return self.sink.connections() if self.sink is not None else ()

    def pids(self) -> set[int]:
        """Processes whose network namespace is this one."""
        return _namespace_pids(self.namespace)

    def in_namespace_argv(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that it runs (as the caller's user) in the app namespace."""
        return self._in_namespace(argv)

    # -- verification -------------------------------------------------------------------------

    def verify_isolation(self) -> None:
        """Prove the ruleset is loaded and records and redirects.  Raises :class:`IsolationError`.

        A probe in the namespace connects to a non-allowed port of the harness host: the
        destination must appear in the ``attempted`` set and the connection must reach the sink
        (not the port it asked for).  A UDP datagram must be recorded and refused.  The probe's
        own records are removed afterwards.
        """
        self.verified = False
        if self.sink is None or not self._created or self._closed:
            raise IsolationError("network isolation not set up")
        try:
            self._verify()
        except SandboxError as e:  # a missing table or namespace is a failed verification
            raise IsolationError(f"isolation of {self.namespace} not verified: "
                                 f"{e.message}") from e
        self.verified = True

    def _verify(self) -> None:
        assert self.sink is not None
        problems = check_table(self._nft("-j", "list", "table", TABLE_FAMILY, TABLE),
                               sink_port=self.sink.port)
        taken = {self.sink.port, self.app_port, *self.allowed_tcp_ports}
        port = secrets.choice([p for p in range(20000, 30000) if p not in taken])
        nonce = f"trz-probe-{secrets.token_hex(8)}"
        done = run_tool(self._in_namespace([sys.executable, "-I", "-S", "-c", _PROBE,
                                            self.harness_host, str(port), nonce]))
        probe = json.loads(done.stdout)
        if probe.get("tcp") != "sent":
            problems.append(f"probe TCP connection was not redirected: {probe.get('tcp')}")
        if probe.get("udp") == "sent":
            problems.append("probe UDP datagram was not refused")
        if not probe.get("ipv6_disabled"):
            problems.append("IPv6 is enabled in the app namespace")
        want = {AttemptedDestination(self.harness_host, "tcp", port),
                AttemptedDestination(self.harness_host, "udp", port)}
        if not want <= set(self.attempted_destinations()):
            problems.append("probe destinations missing from the attempted set")
        if probe.get("tcp") == "sent" and not self._sink_saw(nonce.encode()):
            problems.append("probe connection did not reach the sink")
        if problems:
            raise IsolationError(f"isolation of {self.namespace} not verified: "
                                 + "; ".join(problems))
        self._nft("delete", "element", TABLE_FAMILY, TABLE, ATTEMPTED_SET,
                  f"{{ {self.harness_host} . tcp . {port}, {self.harness_host} . udp . {port} }}")
        self.sink.forget(lambda record: record.received == nonce.encode())

    def _sink_saw(self, data: bytes, timeout: float = 3.0) -> bool:
        assert self.sink is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(record.received == data for record in self.sink.connections()):
                return True
            time.sleep(0.002)
        return False

    # -- helpers ------------------------------------------------------------------------------

    def _in_namespace(self, argv: list[str]) -> list[str]:
        return [self.tools.nsenter, f"--net={NETNS_DIR}/{self.namespace}", "--", *argv]

    def _nft(self, *args: str) -> str:
        done = run_tool(self._in_namespace([self.tools.nft, *args]))
        return done.stdout.decode()



def _host_interface(namespace: str) -> str:
    return f"trzh{namespace.removeprefix(_PREFIX)[:6]}"


def _namespace_pids(namespace: str) -> set[int]:
    """Processes whose network namespace is ``namespace``."""
    try:
        ns = os.stat(f"{NETNS_DIR}/{namespace}")
    except OSError:
        return set()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                st = os.stat(f"/proc/{entry}/ns/net")
                if (st.st_dev, st.st_ino) == (ns.st_dev, ns.st_ino):
                    found.add(int(entry))
    return found


def _kill_namespace_processes(namespace: str, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        pids = _namespace_pids(namespace)
        if not pids:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in pids:
            kill_quietly(pid, signal.SIGKILL)
        time.sleep(0.01)


def _remove(tools: Tools, namespace: str, *, kill: bool = True) -> list[str]:
    """Kill what runs in ``namespace``, delete its host veth end and the namespace; what could
    not be removed, as messages (nothing raised)."""
    problems: list[str] = []
    if kill and not _kill_namespace_processes(namespace):
        problems.append(f"processes still in {namespace}")
    host_interface = _host_interface(namespace)
    if os.path.exists(f"/sys/class/net/{host_interface}"):
        try:
            run_tool([tools.ip, "link", "del", host_interface])
        except SandboxError as e:
            problems.append(e.message)
    if os.path.exists(f"{NETNS_DIR}/{namespace}"):
        try:
            run_tool([tools.ip, "netns", "del", namespace])
        except SandboxError as e:
            problems.append(e.message)
    return problems


def _hold_owner_lock(namespace: str) -> int:
    """Create and lock ``namespace``'s owner file; the fd (close-on-exec: no child inherits
    the ownership) is held until the namespace is gone.  Raises OSError."""
    os.makedirs(OWNER_DIR, mode=0o700, exist_ok=True)
    fd = os.open(f"{OWNER_DIR}/{namespace}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def _drop_owner_lock(namespace: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"{OWNER_DIR}/{namespace}")


def sweep_abandoned(tools: Tools) -> list[str]:
    """Remove the app namespaces (and their veths and processes) of runs that died without
    closing them, SIGKILL or an OOM kill: those whose owner lock nobody holds.  A namespace
    with no owner file is left alone (made by a version without owner locks, or closing right
    now).  An owner file whose namespace someone else deleted is removed too.  Returns the
    names removed; one that could not be removed is left for a later sweep."""
    names: set[str] = set()
    for folder in (NETNS_DIR, OWNER_DIR):
        with contextlib.suppress(FileNotFoundError):
            names.update(n for n in os.listdir(folder) if n.startswith(_PREFIX))
    removed = []
    for name in sorted(names):
        try:
            fd = os.open(f"{OWNER_DIR}/{name}", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            if not _remove(tools, name):
                _drop_owner_lock(name)
                removed.append(name)
        finally:
            os.close(fd)
    return removed
