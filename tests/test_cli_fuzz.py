"""``triz-eval`` on hostile input files (issue 10, defect classes 3, 4 and 5).

The regression tests are named after the attack: a duplicate key that would silently replace a
failed critical checklist item, nesting deep enough to exhaust the recursive parsers, numbers
that overflow or that Python's int limit refuses inside ``json.loads``, and the spellings of a
number the grammar refuses.  Each must be exit 2 with exactly one line on stderr naming the
file, never exit 70 (an internal error) and never a traceback.

The fuzz test drives the real entry point (``cli.main``) in process with ``sys.argv`` patched,
so that hundreds of examples stay fast; a few cases also run the installed script in a
subprocess, exactly as a user meets it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator import cli

REPO = Path(__file__).resolve().parents[1]
HONEST = REPO / "examples" / "signal" / "pilot_02_honest.json"
PILOT = "pilot_02_feedback_form"
TRIZ_EVAL = Path(sys.executable).parent / "triz-eval"
DEEP = 100_000


def honest() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(HONEST.read_text(encoding="utf-8"))
    return doc


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``cli.main`` in process: (exit code, stdout, stderr)."""
    old = sys.argv
    sys.argv = ["triz-eval", *argv]
    code: int | str | None = 0
    try:
        cli.main()
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    assert isinstance(code, int | None), code
    return code or 0, captured.out, captured.err


def compute(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_main(["signal", "compute", "-t", PILOT, "-i", str(path)], capsys)


def one_error_line(result: tuple[int, str, str], path: Path) -> str:
    """Exit 2 and exactly one stderr line, naming the file."""
    code, _, err = result
    assert code == 2, (code, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("triz-eval: error: "), lines[0]
    assert str(path) in lines[0], lines[0]
    return lines[0]


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    for name in list(os.environ):
        if name.startswith("TRIZ_EVAL_"):
            monkeypatch.delenv(name)


def test_the_honest_example_still_computes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = compute(HONEST, capsys)
    assert code == 0, err
    assert out.startswith("S = ")


# -- duplicate keys (defect class 4) ---------------------------------------------------------

FAILED_THEN_PASSED = ('"no_false_success": {"state": "failed", "source": "smtp_receiver"}, '
                      '"no_false_success": {"state": "passed", "source": "smtp_receiver"}')


def _json_with_duplicate_item(tmp_path: Path) -> Path:
    doc = honest()
    del doc["checklist"]["no_false_success"]
    text = json.dumps(doc, indent=2)
    text = text.replace('"checklist": {', '"checklist": {' + FAILED_THEN_PASSED + ", ", 1)
    path = tmp_path / "inputs.json"
    path.write_text(text, encoding="utf-8")
    return path


def test_duplicate_checklist_item_in_json_cannot_hide_a_failed_critical_item(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _json_with_duplicate_item(tmp_path)
    line = one_error_line(compute(path, capsys), path)
    assert "duplicate key" in line
    assert "no_false_success" in line


def test_duplicate_state_inside_a_json_checklist_item_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HONEST.read_text(encoding="utf-8").replace(
        '"no_false_success": {\n      "state": "passed",',
        '"no_false_success": {\n      "state": "failed",\n      "state": "passed",', 1)
    assert text.count('"state": "failed"') == 1
    path = tmp_path / "inputs.json"
    path.write_text(text, encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "duplicate key" in line
    assert "'state'" in line


def test_duplicate_top_level_key_in_json_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HONEST.read_text(encoding="utf-8").replace(
        '\n  "claims": []', '\n  "claims": [],\n  "checklist": {}', 1)
    path = tmp_path / "inputs.json"
    path.write_text(text, encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "duplicate key 'checklist'" in line


def _yaml_text() -> str:
    return yaml.safe_dump(honest(), sort_keys=False)


def test_duplicate_checklist_item_in_yaml_cannot_hide_a_failed_critical_item(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _yaml_text().replace(
        "checklist:\n",
        "checklist:\n  no_false_success:\n    state: failed\n    source: smtp_receiver\n", 1)
    path = tmp_path / "inputs.yaml"
    path.write_text(text, encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "duplicate key" in line
    assert "checklist.no_false_success" in line
    # the line of the second (silently winning) occurrence
    second = [n for n, t in enumerate(text.splitlines(), 1) if t == "  no_false_success:"][1]
    assert f"{path}:{second}:" in line


def test_duplicate_state_inside_a_yaml_checklist_item_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _yaml_text().replace(
        "  no_false_success:\n    state: passed\n",
        "  no_false_success:\n    state: failed\n    state: passed\n", 1)
    assert "    state: failed\n" in text
    path = tmp_path / "inputs.yaml"
    path.write_text(text, encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "checklist.no_false_success.state: duplicate key" in line


def test_duplicate_top_level_key_in_yaml_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inputs.yaml"
    path.write_text(_yaml_text() + "checklist: {}\n", encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "checklist: duplicate key" in line


def test_yaml_keys_equal_only_after_construction_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``1`` and ``0x1`` are different text but the same key once read."""
    path = tmp_path / "inputs.yaml"
    path.write_text("costs: {1: '1', 0x1: '2'}\n", encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert "duplicate key" in line


# -- internal errors on bad input (defect class 5) and the number grammar (class 3) ----------

def _with_value(value_json: str) -> str:
    return HONEST.read_text(encoding="utf-8").replace('"40/40"', value_json, 1)


HOSTILE_JSON = {
    "deep_json_array": '{"claims": ' + "[" * DEEP + "]" * DEEP + "}",
    "deep_json_object": '{"a": ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "}",
    "deep_unclosed": "[" * DEEP,
    "integer_5000_digits": _with_value("9" * 5000),
    "integer_4000_digits": _with_value("9" * 4000),
    "float_5000_digits": _with_value("0." + "9" * 5000),
    "nan_constant": _with_value("NaN"),
    "infinity_constant": _with_value("-Infinity"),
    "float_1e309": _with_value("1e309"),
    "string_1e309": _with_value('"1e309"'),
    "string_underscore": _with_value('"1_000"'),
    "string_leading_space": _with_value('" 1"'),
    "string_plus": _with_value('"+1"'),
    "string_infinity": _with_value('"Infinity"'),
    "float_exponent": _with_value("1e-07"),
    "fraction_5000_digits": _with_value('"' + "9" * 5000 + "/1" + '"'),
    "decimal_overflow": _with_value('"' + "9" * 80 + '"'),
}
HOSTILE_YAML = {
    "deep_yaml_flow": "claims: " + "[" * DEEP + "]" * DEEP + "\n",
    "deep_yaml_block": "claims:\n" + "- " * DEEP + "x\n",
    "deep_yaml_mapping": "claims: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n",
    "yaml_alias_bomb": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c]\n",
    "yaml_integer_5000_digits": "costs: {sandbox_seconds: " + "9" * 5000 + "}\n",
    "yaml_bad_date": "claims: [2020-02-30]\n",
    "yaml_exponent_float": "costs: {sandbox_seconds: 1.0e+400}\n",
    "yaml_nan": "costs: {sandbox_seconds: .nan}\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_hostile_json_is_one_line_exit_2(name: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(HOSTILE_JSON[name], encoding="utf-8")
    one_error_line(compute(path, capsys), path)


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_hostile_yaml_is_one_line_exit_2(name: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(HOSTILE_YAML[name], encoding="utf-8")
    one_error_line(compute(path, capsys), path)


def test_deep_nesting_names_the_line_and_the_limit(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{\n"claims":\n' + "[" * DEEP + "]" * DEEP + "}", encoding="utf-8")
    line = one_error_line(compute(path, capsys), path)
    assert f"{path}:3: nested deeper than 64 levels" in line


# -- the real script, in a subprocess --------------------------------------------------------

@pytest.mark.parametrize("name", ["deep_json_array", "integer_5000_digits", "nan_constant",
                                  "string_1e309", "deep_yaml_flow", "yaml_alias_bomb"])
def test_the_installed_script_exits_2_with_one_line(name: str, tmp_path: Path) -> None:
    text = HOSTILE_JSON.get(name) or HOSTILE_YAML[name]
    path = tmp_path / (f"{name}.json" if name in HOSTILE_JSON else f"{name}.yaml")
    path.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    env["COLUMNS"] = "300"
    proc = subprocess.run([str(TRIZ_EVAL), "signal", "compute", "-t", PILOT, "-i", str(path)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    one_error_line((proc.returncode, proc.stdout, proc.stderr), path)


def test_the_installed_script_refuses_a_duplicate_checklist_item(tmp_path: Path) -> None:
    path = _json_with_duplicate_item(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIZ_EVAL_")}
    proc = subprocess.run([str(TRIZ_EVAL), "signal", "compute", "-t", PILOT, "-i", str(path)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    line = one_error_line((proc.returncode, proc.stdout, proc.stderr), path)
    assert "no_false_success" in line


# -- fuzz --------------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(),
    st.integers(-(10**6000), 10**6000),
    st.floats(),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e309", "-0", "1E400", "0.1e-400"]),
    st.text(alphabet="0123456789.-+eE_/ ", min_size=1, max_size=50),
    st.from_regex(r"-?[0-9]{1,60}(\.[0-9]{1,60})?", fullmatch=True),
    st.from_regex(r"-?[0-9]{1,45}/[0-9]{1,45}", fullmatch=True),
)
scalars = st.one_of(st.none(), st.booleans(), st.text(max_size=20), numbers)
keys = st.sampled_from(["value", "state", "source", "degree", "checklist", "measurements",
                        "costs", "claims", "delivery", "evidence", "performed", "x"])


trees = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.lists(st.tuples(keys, children), min_size=1, max_size=4),  # a mapping, as pairs:
    max_leaves=12,                                                   # duplicates allowed
)


def _is_mapping(tree: Any) -> bool:
    return isinstance(tree, list) and bool(tree) and all(isinstance(p, tuple) for p in tree)


def _big_int_text(value: int) -> str:
    # str() of an int past Python's 4,300-digit limit raises, here as in json.loads
    return str(value) if abs(value) < 10**4000 else "9" * 4500


def _json_text(tree: Any) -> str:
    """JSON text of a tree, written by hand: duplicate keys, NaN and huge ints are kept."""
    if _is_mapping(tree):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json_text(v)}" for k, v in tree) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(_json_text(v) for v in tree) + "]"
    if isinstance(tree, str) and tree in {"NaN", "Infinity", "-Infinity"}:
        return tree  # the bare constants Python's json accepts
    if isinstance(tree, float):
        return repr(tree) if tree == tree and abs(tree) != float("inf") else "NaN"
    if isinstance(tree, int) and not isinstance(tree, bool):
        return _big_int_text(tree)
    return json.dumps(tree)


def _yaml_text_of(tree: Any) -> str:
    """YAML flow text of a tree, written by hand (duplicate keys kept)."""
    if _is_mapping(tree):
        return "{" + ", ".join(f"{k}: {_yaml_text_of(v)}" for k, v in tree) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(_yaml_text_of(v) for v in tree) + "]"
    if isinstance(tree, bool) or tree is None:
        return json.dumps(tree)
    if isinstance(tree, int):
        return _big_int_text(tree)
    if isinstance(tree, float):
        return repr(tree) if tree == tree and abs(tree) != float("inf") else ".nan"
    return json.dumps(tree)  # a double-quoted YAML scalar


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, str]:
    """(suffix, text): a JSON or YAML document, often the real input's shape with numbers
    spliced in, sometimes an arbitrary tree, sometimes deeply nested."""
    kind = draw(st.sampled_from(["json", "yaml"]))
    text_of = _json_text if kind == "json" else _yaml_text_of
    shape = draw(st.sampled_from(["tree", "deep", "honest", "honest-number", "honest-number"]))
    if shape == "tree":
        return kind, text_of(draw(trees))
    if shape == "deep":
        depth = draw(st.integers(1, 3000))
        opener = draw(st.sampled_from(["[", "{", "- "]))
        if opener == "- ":
            return "yaml", "claims:\n" + "- " * depth + "x\n"
        if opener == "[":
            return kind, '{"claims": ' + "[" * depth + "]" * depth + "}"
        return kind, '{"claims": [' + '{"a": ' * depth + "1" + "}" * depth + "]}"
    doc = honest()
    spliced: dict[str, str] = {}
    if shape == "honest-number":
        for slot in draw(st.lists(st.sampled_from(["delivery", "recovery", "cost"]),
                                  min_size=1, max_size=3, unique=True)):
            spliced[f"__{slot}__"] = text_of(draw(numbers))
            if slot == "cost":
                doc["costs"]["sandbox_seconds"] = f"__{slot}__"
            else:
                doc["measurements"][slot]["value"] = f"__{slot}__"
    text = json.dumps(doc) if kind == "json" else yaml.safe_dump(doc, sort_keys=False)
    for placeholder, literal in spliced.items():
        text = text.replace(f'"{placeholder}"' if kind == "json" else placeholder, literal)
    return kind, text


@settings(max_examples=80, deadline=None,
          suppress_health_check=(HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large))
@given(document=documents())
def test_fuzz_any_document_is_exit_0_or_one_line_exit_2(
        document: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suffix, text = document
    path = tmp_path / f"input.{suffix}"
    path.write_text(text, encoding="utf-8")
    code, out, err = compute(path, capsys)
    assert code in (0, 2), (code, err, text[:300])
    assert "Traceback" not in err
    if code == 2:
        one_error_line((code, out, err), path)
    else:
        assert out.startswith("S = "), out
