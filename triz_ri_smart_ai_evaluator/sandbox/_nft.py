"""The app namespace's nftables ruleset and the reading of its records.  No I/O here.

Every new outbound connection is looked at once, in the NAT output hook, before anything can
leave: loopback passes, TCP to the harness host on an allow-listed port passes, everything else
is added to the ``attempted`` set (destination . protocol . port) and then TCP is redirected to
the sink on the harness host while UDP and other protocols are dropped by the filter chain.
IPv6 is dropped outright (it is also disabled in the namespace).  Inbound, only the harness host
may open connections, and only to the app port.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any, NamedTuple

TABLE_FAMILY = "inet"
TABLE = "trz"
ATTEMPTED_SET = "attempted"
ALLOWED_SET = "allowed_tcp"
_PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp", 33: "dccp", 132: "sctp"}


class AttemptedDestination(NamedTuple):
    """One destination the sandboxed code tried to reach (port 0 for port-less protocols)."""

    ip: str
    proto: str
    port: int


def ruleset(*, harness_host: str, app_port: int, sink_port: int,
            allowed_tcp_ports: list[int]) -> str:
    """The complete ruleset text for ``nft -f``, replacing any table of the same name."""
    host = str(ipaddress.IPv4Address(harness_host))
    for port in (app_port, sink_port, *allowed_tcp_ports):
        _check_port(port)
    allowed = ", ".join(str(p) for p in sorted(set(allowed_tcp_ports)))
    allowed_elements = f"elements = {{ {allowed} }}" if allowed else ""
    return f"""\
table {TABLE_FAMILY} {TABLE}
delete table {TABLE_FAMILY} {TABLE}
table {TABLE_FAMILY} {TABLE} {{
  set {ATTEMPTED_SET} {{
    type ipv4_addr . inet_proto . inet_service
    flags dynamic
    size 65535
  }}
  set {ALLOWED_SET} {{
    type inet_service
    {allowed_elements}
  }}
  chain nat_out {{
    type nat hook output priority -100; policy accept;
    oif "lo" accept
    meta nfproto != ipv4 accept
    ip daddr {host} tcp dport @{ALLOWED_SET} accept
    meta l4proto tcp add @{ATTEMPTED_SET} {{ ip daddr . meta l4proto . tcp dport }} \
dnat ip to {host}:{sink_port}
    meta l4proto udp add @{ATTEMPTED_SET} {{ ip daddr . meta l4proto . udp dport }}
    meta l4proto != {{ tcp, udp }} add @{ATTEMPTED_SET} {{ ip daddr . meta l4proto . 0 }}
  }}
  chain filter_out {{
    type filter hook output priority 0; policy drop;
    oif "lo" accept
    meta nfproto != ipv4 counter drop
    ct state established,related accept
    ip daddr {host} tcp dport @{ALLOWED_SET} ct state new accept
    ip daddr {host} tcp dport {sink_port} ct state new accept
    counter drop
  }}
  chain filter_in {{
    type filter hook input priority 0; policy drop;
    iif "lo" accept
    meta nfproto != ipv4 drop
    ct state established,related accept
    ip saddr {host} tcp dport {app_port} ct state new accept
  }}
}}
"""


def _check_port(port: int) -> None:
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"not a TCP port: {port!r}")


def parse_set_elements(nft_json: str) -> list[AttemptedDestination]:
    """The elements of ``nft -j list set`` output for the ``attempted`` set, sorted."""
    found: set[AttemptedDestination] = set()
    for item in json.loads(nft_json).get("nftables", []):
        nft_set = item.get("set")
        if not isinstance(nft_set, dict):
            continue
        for elem in nft_set.get("elem", []):
            found.add(_element(elem))
    return sorted(found)


def _element(elem: Any) -> AttemptedDestination:
    # Plain sets list {"concat": [...]}; sets with timeouts wrap it: {"elem": {"val": {...}}}.
    if isinstance(elem, dict) and "elem" in elem:
        elem = elem["elem"].get("val")
    if not (isinstance(elem, dict) and isinstance(elem.get("concat"), list)):
        raise ValueError(f"unexpected set element: {elem!r}")
    ip, proto, port = elem["concat"]
    name = _PROTOCOLS.get(proto, str(proto)) if isinstance(proto, int) else str(proto)
    return AttemptedDestination(str(ipaddress.IPv4Address(ip)), name, int(port))


def check_table(nft_json: str, *, sink_port: int) -> list[str]:
    """What is wrong with the loaded table (from ``nft -j list table``); empty when all holds."""
    chains: dict[str, dict[str, Any]] = {}
    sets: set[str] = set()
    rules: list[str] = []
    for item in json.loads(nft_json).get("nftables", []):
        if "chain" in item:
            chains[item["chain"]["name"]] = item["chain"]
        elif "set" in item:
            sets.add(item["set"]["name"])
        elif "rule" in item:
            rules.append(json.dumps(item["rule"]["expr"], sort_keys=True))
    problems = [f"set {name} missing" for name in (ATTEMPTED_SET, ALLOWED_SET) if name not in sets]
    expected = {"nat_out": ("nat", "accept"), "filter_out": ("filter", "drop"),
                "filter_in": ("filter", "drop")}
    for name, (kind, policy) in expected.items():
        chain = chains.get(name)
        if chain is None:
            problems.append(f"chain {name} missing")
        elif (chain.get("type"), chain.get("policy"), chain.get("hook")) != (
            kind, policy, "input" if name == "filter_in" else "output"
        ):
            problems.append(f"chain {name} has the wrong type, hook or policy")
    if not any('"dnat"' in rule and f'"port": {sink_port}' in rule for rule in rules):
        problems.append("no dnat rule to the sink")
    return problems
