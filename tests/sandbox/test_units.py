"""The parts that do no I/O: the ruleset, its parsing, limits, environment and runtime rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.sandbox import AttemptedDestination, Limits, PythonRuntime
from triz_ri_smart_ai_evaluator.sandbox._bwrap import sandbox_env, verify_readable_by_others
from triz_ri_smart_ai_evaluator.sandbox._nft import check_table, parse_set_elements, ruleset
from triz_ri_smart_ai_evaluator.sandbox._process import _decode_status


def test_ruleset_names_host_ports_and_sink() -> None:
    text = ruleset(harness_host="10.213.4.1", app_port=8000, sink_port=40001,
                   allowed_tcp_ports=[2525, 2525, 25])
    assert "elements = { 25, 2525 }" in text
    assert "dnat ip to 10.213.4.1:40001" in text
    assert "ip saddr 10.213.4.1 tcp dport 8000 ct state new accept" in text
    assert "policy drop" in text


@pytest.mark.parametrize(
    ("host", "port"),
    [("10.213.4.1; flush ruleset", 8000), ("10.213.4.1", 0), ("10.213.4.1", 70000)],
)
def test_ruleset_rejects_what_is_not_an_address_or_port(host: str, port: int) -> None:
    with pytest.raises(ValueError, match=r"."):
        ruleset(harness_host=host, app_port=port, sink_port=40001, allowed_tcp_ports=[])


def test_set_elements_parse_plain_and_timeout_forms() -> None:
    listing = {"nftables": [{"metainfo": {}}, {"set": {"name": "attempted", "elem": [
        {"concat": ["198.51.100.7", "tcp", 80]},
        {"elem": {"val": {"concat": ["10.213.4.1", "udp", 53]}, "expires": 10}},
        {"concat": ["10.213.4.1", 132, 0]},
    ]}}]}
    assert parse_set_elements(json.dumps(listing)) == [
        AttemptedDestination("10.213.4.1", "sctp", 0),
        AttemptedDestination("10.213.4.1", "udp", 53),
        AttemptedDestination("198.51.100.7", "tcp", 80),
    ]


def test_empty_set_parses_to_nothing() -> None:
    assert parse_set_elements('{"nftables": [{"set": {"name": "attempted"}}]}') == []


def test_check_table_reports_missing_chains_and_sink_rule() -> None:
    listing = {"nftables": [{"set": {"name": "attempted"}},
                            {"chain": {"name": "filter_out", "type": "filter", "hook": "output",
                                       "policy": "accept"}}]}
    problems = check_table(json.dumps(listing), sink_port=40001)
    assert "set allowed_tcp missing" in problems
    assert "chain nat_out missing" in problems
    assert "chain filter_out has the wrong type, hook or policy" in problems
    assert "no dnat rule to the sink" in problems


@pytest.mark.parametrize("field", ["memory_bytes", "max_pids", "cpu_seconds", "open_files",
                                   "file_size_bytes", "tmp_size_bytes"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_limits_must_be_positive_integers(field: str, value: object) -> None:
    with pytest.raises(InputError, match=field):
        Limits(**{field: value})  # type: ignore[arg-type]


def test_limits_become_prlimit_options() -> None:
    args = Limits(memory_bytes=1 << 20, max_pids=8).prlimit_args()
    assert "--as=1048576" in args
    assert "--nproc=8" in args
    assert "--core=0" in args


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "GCONV_PATH",
                                  "GLIBC_TUNABLES", "BAD-NAME", "1X", ""])
def test_environment_refuses_loader_and_malformed_variables(name: str) -> None:
    with pytest.raises(InputError, match="not allowed"):
        sandbox_env({name: "x"}, path="/usr/bin", home="/tmp")


def test_environment_is_complete_and_caller_wins() -> None:
    env = sandbox_env({"SMTP_PASSWORD": "pw", "LANG": "C"}, path="/usr/bin", home="/tmp")
    assert env["SMTP_PASSWORD"] == "pw"
    assert env["LANG"] == "C"
    assert env["HOME"] == "/tmp"
    assert "PWD" not in env


def test_runtime_reads_the_venv(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /opt/py/3.11/bin\nversion = 3.11.7\n")
    runtime = PythonRuntime.from_venv(tmp_path)
    assert runtime.base_prefix == Path("/opt/py/3.11")
    assert runtime.sandbox_python() == "/venv/bin/python"
    assert runtime.needs_bind


def test_runtime_without_pyvenv_cfg_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"pyvenv\.cfg"):
        PythonRuntime.from_venv(tmp_path)


def test_code_dir_must_be_readable_by_others(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir(mode=0o755)
    code.chmod(0o755)
    secret = code / "app.py"
    secret.write_text("x = 1\n")
    secret.chmod(0o600)
    with pytest.raises(InputError, match=r"app\.py"):
        verify_readable_by_others(code)
    secret.chmod(0o644)
    verify_readable_by_others(code)


@pytest.mark.parametrize(
    ("rc", "isolation", "expected"),
    [(0, "full", (0, None)), (3, "full", (3, None)), (137, "full", (None, 9)),
     (-9, "degraded", (None, 9)), (137, "degraded", (137, None))],
)
def test_exit_status_decoding(rc: int, isolation: str, expected: tuple[int | None, ...]) -> None:
    assert _decode_status(rc, isolation) == expected  # type: ignore[arg-type]
