"""Addresses for the per-run networks: a free /30 of 10.213.0.0/16 for each run, no IPv6."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import threading

from ._errors import SandboxError
from ._tools import Tools, run_tool

SANDBOX_PREFIX = ipaddress.IPv4Network("10.213.0.0/16")
_claimed: set[ipaddress.IPv4Network] = set()
_claim_lock = threading.Lock()


def disable_ipv6(interface: str) -> None:
    """Turn IPv6 off on a root-namespace interface (no link-local address, no traffic)."""
    path = f"/proc/sys/net/ipv6/conf/{interface}/disable_ipv6"
    if os.path.exists(path):
        with open(path, "w") as f:
            f.write("1")


def claim_subnet(tools: Tools) -> ipaddress.IPv4Network:
    """A random /30 of :data:`SANDBOX_PREFIX` that no route, address or other run uses."""
    used: list[ipaddress.IPv4Network] = []
    for argv in ([tools.ip, "-j", "-4", "route", "show", "table", "all"],
                 [tools.ip, "-j", "-4", "addr", "show"]):
        for entry in json.loads(run_tool(argv).stdout or b"[]"):
            dsts = [entry.get("dst")] + [
                f"{a['local']}/{a.get('prefixlen', 32)}" for a in entry.get("addr_info", [])]
            for dst in dsts:
                if dst and dst != "default":
                    with contextlib.suppress(ValueError):
                        used.append(ipaddress.IPv4Network(dst, strict=False))
    blocks = SANDBOX_PREFIX.num_addresses // 4
    with _claim_lock:
        for _ in range(64):
            base = SANDBOX_PREFIX.network_address + 4 * secrets.randbelow(blocks)
            subnet = ipaddress.IPv4Network(f"{base}/30")
            if subnet in _claimed or any(subnet.overlaps(u) for u in used):
                continue
            _claimed.add(subnet)
            return subnet
    raise SandboxError(f"no free /30 left in {SANDBOX_PREFIX}")


def release_subnet(subnet: ipaddress.IPv4Network) -> None:
    """Make a run's /30 available again (after its veth is gone)."""
    with _claim_lock:
        _claimed.discard(subnet)
