"""Can full isolation be had on this machine?  Measured by trying, not assumed."""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass

from ._bwrap import system_dir_args
from ._errors import SandboxError
from ._limits import cgroup_v1_usable
from ._nft import ruleset
from ._tools import Tools, find_tools, run_tool


@dataclass(frozen=True)
class IsolationSupport:
    """The answer of :func:`probe_isolation`.

    ``available`` means a :class:`~._netns.Network` and ``bwrap`` can be used; ``reason`` says
    why not (empty when available).  ``cgroup_limits`` tells whether run-wide memory and pids
    limits are enforced by cgroup v1; without them only per-process rlimits hold.
    """

    available: bool
    reason: str
    cgroup_limits: bool


def probe_isolation() -> IsolationSupport:
    """Check root, the tools, netns + nftables, and unprivileged user namespaces for bwrap.

    Makes and removes a throw-away ``trz-probe-*`` namespace; never raises for a missing
    capability (that is the answer), only returns it.
    """
    if os.geteuid() != 0:
        return IsolationSupport(False, "not running as root (netns, veth and nftables need it)",
                                False)
    tools = find_tools()
    if isinstance(tools, tuple):
        return IsolationSupport(False, f"tools not found: {', '.join(tools)}", False)
    for check in (_check_netns, _check_bwrap):
        problem = check(tools)
        if problem:
            return IsolationSupport(False, problem, False)
    return IsolationSupport(True, "", cgroup_v1_usable())


def _check_netns(tools: Tools) -> str:
    name = f"trz-probe-{secrets.token_hex(4)}"
    try:
        run_tool([tools.ip, "netns", "add", name])
    except SandboxError as e:
        return f"cannot create a network namespace: {e.message}"
    try:
        rules = ruleset(harness_host="10.213.0.1", app_port=8000, sink_port=9,
                        allowed_tcp_ports=[25])
        run_tool([tools.nsenter, f"--net=/run/netns/{name}", "--", tools.nft, "-f", "-"],
                 stdin=rules.encode())
    except SandboxError as e:
        return f"nftables ruleset (dynamic set, nat) cannot be loaded: {e.message}"
    finally:
        with contextlib.suppress(SandboxError):
            run_tool([tools.ip, "netns", "del", name])
    return ""


def _check_bwrap(tools: Tools) -> str:
    # bwrap runs unprivileged: it needs user namespaces for an ordinary uid.
    uid = str(0x6A000000 - 1)
    try:
        run_tool([tools.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                  "--no-new-privs", "--", tools.bwrap, "--unshare-user", "--disable-userns",
                  "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                  "--cap-drop", "ALL", *system_dir_args(), "--proc", "/proc", "--dev", "/dev",
                  "--", "true"])
    except SandboxError as e:
        return f"bwrap cannot run as an unprivileged uid (user namespaces?): {e.message}"
    return ""
