"""Helpers shared by the sandbox tests: code directories and a check that nothing is left over.

The isolation tests use real namespaces, veths, nftables, cgroups and bwrap, and need root.
Everything they send goes to loopback or to addresses the test's own Network created; the one
"public" destination (198.51.100.7, TEST-NET-2) is used only after the network's isolation was
verified, and it is redirected to the sink before it can leave the app namespace.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.sandbox import probe_isolation
from triz_ri_smart_ai_evaluator.sandbox._limits import UID_BASE

CGROUP_DIRS = (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/pids"))


@functools.cache
def _support() -> tuple[bool, str]:
    support = probe_isolation()
    return support.available, support.reason


def require_isolation() -> None:
    """Skip (loudly, -ra) when full isolation cannot be had: not root, no bwrap..."""
    available, reason = _support()
    if not available:
        pytest.skip(f"sandbox isolation not available here: {reason}")


def make_code_dir(parent: Path, files: dict[str, str] | None = None) -> Path:
    """A world-readable code directory (the sandbox's uid reads it as "other")."""
    code = parent / "code"
    code.mkdir(mode=0o755)
    code.chmod(0o755)
    for name, text in (files or {"README": "candidate\n"}).items():
        path = code / name
        path.write_text(text)
        path.chmod(0o644)
    return code


@dataclass(frozen=True)
class Snapshot:
    """Everything with a ``trz`` name, and every sandbox-uid process, at one moment."""

    netns: frozenset[str]
    links: frozenset[str]
    cgroups: frozenset[str]
    tmp: frozenset[str]
    mounts: frozenset[str]
    processes: frozenset[int]

    @classmethod
    def take(cls) -> Snapshot:
        netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
        cgroups = [str(p) for base in CGROUP_DIRS if base.exists()
                   for p in base.rglob("trz-*")]
        with open("/proc/self/mountinfo") as f:
            mounts = [line for line in f if "trz" in line]
        return cls(
            netns=frozenset(n for n in netns if n.startswith("trz")),
            links=frozenset(n for n in os.listdir("/sys/class/net") if n.startswith("trz")),
            cgroups=frozenset(cgroups),
            tmp=frozenset(n for n in os.listdir("/tmp") if n.startswith(("trz-stage-",
                                                                         "trz-log-"))),
            mounts=frozenset(mounts),
            processes=frozenset(_sandbox_uid_processes()),
        )

    def new_since(self, before: Snapshot) -> dict[str, set[str] | set[int]]:
        """What exists now and did not before (empty when a test cleaned up after itself)."""
        found: dict[str, set[str] | set[int]] = {}
        for name in ("netns", "links", "cgroups", "tmp", "mounts", "processes"):
            extra = set(getattr(self, name)) - set(getattr(before, name))
            if extra:
                found[name] = extra
        return found


def _sandbox_uid_processes() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if UID_BASE <= uid < UID_BASE + (1 << 24):
                found.add(int(entry))
    return found


def assert_nothing_left(before: Snapshot) -> None:
    left = Snapshot.take().new_since(before)
    assert left == {}, f"left behind: {left}"
