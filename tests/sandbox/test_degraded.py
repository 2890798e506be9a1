"""Without isolation nothing runs, unless asked for - and then every result says so."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.sandbox import make_code_dir
from triz_ri_smart_ai_evaluator.sandbox import (
    IsolationError,
    IsolationSupport,
    Limits,
    _box,
    open_sandbox,
    probe_isolation,
    run_sandboxed,
    start_sandboxed,
    wait_for_port,
)

REASON = "not running as root (test)"


@pytest.fixture
def no_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_box, "probe_isolation",
                        lambda: IsolationSupport(available=False, reason=REASON,
                                                 cgroup_limits=False))


def test_probe_answers_with_a_reason_or_availability() -> None:
    support = probe_isolation()
    assert support.available == (support.reason == "")


@pytest.mark.usefixtures("no_isolation")
def test_no_isolation_refuses_to_open_without_the_unsafe_opt_in() -> None:
    with pytest.raises(IsolationError, match="not available: not running as root"):
        open_sandbox()


def test_no_network_refuses_to_start_without_the_unsafe_opt_in(tmp_path: Path) -> None:
    code = make_code_dir(tmp_path)
    with pytest.raises(IsolationError, match="unsafe_degraded"):
        start_sandboxed(["true"], code_dir=code, network=None)
    with pytest.raises(IsolationError, match="unsafe_degraded"):
        start_sandboxed(["true"], code_dir=code, network=None,
                        unsafe_degraded=True)  # a reason is required too


@pytest.mark.usefixtures("no_isolation")
def test_degraded_sandbox_serves_on_loopback_and_says_so(tmp_path: Path) -> None:
    code = make_code_dir(tmp_path, {"index.html": "degraded\n"})
    with open_sandbox(unsafe_degraded=True) as box:
        assert (box.isolation, box.degraded_reason) == ("degraded", REASON)
        assert box.harness_host == box.app_address == "127.0.0.1"
        assert box.attempted_destinations() is None  # not measured, never an empty "clean"
        assert box.sink_connections() is None
        proc = box.start([box.python, "-m", "http.server", "--bind", "127.0.0.1",
                          str(box.app_port)], code_dir=code, wall_timeout=20)
        wait_for_port(box.app_address, box.app_port, 10, process=proc)
        with urllib.request.urlopen(box.url("/index.html"), timeout=5) as response:
            assert response.read() == b"degraded\n"
    assert proc.outcome is not None
    assert (proc.outcome.isolation, proc.outcome.degraded_reason) == ("degraded", REASON)


def test_degraded_run_keeps_rlimits_and_a_cleared_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_ONLY", "must-not-leak")
    source = ("import json, os, resource\n"
              "print(json.dumps({'env': sorted(os.environ), 'cwd': os.getcwd(),\n"
              "  'nofile': resource.getrlimit(resource.RLIMIT_NOFILE)[0],\n"
              "  'as': resource.getrlimit(resource.RLIMIT_AS)[0]}))")
    code = make_code_dir(tmp_path)
    result = run_sandboxed(["python", "-c", source], code_dir=code, network=None, timeout=20,
                           env={"APP_SECRET_KEY": "k"}, limits=Limits(open_files=100),
                           unsafe_degraded=True, degraded_reason=REASON)
    seen = json.loads(result.stdout)
    assert "HARNESS_ONLY" not in seen["env"]
    assert "APP_SECRET_KEY" in seen["env"]
    assert seen["cwd"] == str(code)
    assert seen["nofile"] == 100
    assert seen["as"] == Limits().memory_bytes
    assert result.outcome.isolation == "degraded"
    assert result.outcome.degraded_reason == REASON


def test_degraded_hang_is_killed_with_its_process_group(tmp_path: Path) -> None:
    source = "import subprocess, time\nsubprocess.Popen(['sleep', '600'])\ntime.sleep(600)"
    result = run_sandboxed(["python", "-c", source], code_dir=make_code_dir(tmp_path),
                           network=None, timeout=1.0, unsafe_degraded=True,
                           degraded_reason=REASON)
    assert result.outcome.ended == "timeout"
    assert result.outcome.signal == 9
