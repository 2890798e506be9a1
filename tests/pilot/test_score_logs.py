"""Our ``score_logs.py`` against the published one (pilot §7 "BASIC SCORER SCOPE").

The reference is the published script itself, taken at run time from the pilot document (its
canonical source sits between ``View canonical source code`` and ``About the author``); it is
never copied into the repository.  Both scripts run as subprocesses with ``sys.executable`` and
must agree on stdout, byte for byte, and on the exit status, for every input.

The seed document is found through ``$TRIZ_SEEDS_DIR``, else in a ``shared/seeds/`` directory
above the repository, else in ``/work/shared/seeds``.  When it cannot be found the tests fail:
a differential test without its reference proves nothing, and must not pass by being skipped.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.scripts import score_logs

SEED_NAME = "003_1fe47d82ad10668c.txt"
SOURCE_START = "View canonical source code"
SOURCE_END = "About the author"
REPO_ROOT = Path(__file__).resolve().parents[2]
OURS = Path(score_logs.__file__).resolve()
FILES = ("scenarios.json", "http_results.jsonl", "smtp_events.jsonl")


# ------------------------------------------------------------------ the published reference


def find_seed_document(
    environ: dict[str, str] | os._Environ[str] = os.environ,
    repo_root: Path = REPO_ROOT,
    fallback: Path = Path("/work/shared/seeds"),
) -> Path:
    """The pilot document; raises FileNotFoundError naming every place that was tried."""
    candidates: list[Path] = []
    if environ.get("TRIZ_SEEDS_DIR"):
        candidates.append(Path(environ["TRIZ_SEEDS_DIR"]) / SEED_NAME)
    candidates += [d / "shared" / "seeds" / SEED_NAME for d in (repo_root, *repo_root.parents)]
    candidates.append(fallback / SEED_NAME)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = "\n  ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"pilot document {SEED_NAME} not found (set TRIZ_SEEDS_DIR); tried:\n  {tried}"
    )


def published_scorer_source(seed_text: str) -> str:
    """The canonical source of the published score_logs.py, as printed in the pilot document."""
    lines = seed_text.splitlines()
    stripped = [line.strip() for line in lines]
    if SOURCE_START not in stripped or SOURCE_END not in stripped:
        raise ValueError(f"the pilot document has no {SOURCE_START!r} ... {SOURCE_END!r} block")
    start = stripped.index(SOURCE_START) + 1
    end = stripped.index(SOURCE_END, start)
    return "\n".join(lines[start:end]).strip() + "\n"


def write_published_scorer(directory: Path) -> Path:
    """Extract the published script into ``directory``; the caller fails if it cannot."""
    path = directory / "published_score_logs.py"
    path.write_text(published_scorer_source(find_seed_document().read_text("utf-8")), "utf-8")
    return path


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return write_published_scorer(tmp_path_factory.mktemp("published"))
    except (FileNotFoundError, ValueError) as e:
        pytest.fail(f"cannot run the differential tests without the published scorer: {e}")


# ------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Run:
    stdout: bytes
    stderr: bytes
    exit: int


def run_script(script: Path, args: Sequence[str | Path]) -> Run:
    done = subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    return Run(done.stdout, done.stderr, done.returncode)


def write_case(directory: Path, contents: Sequence[bytes | None]) -> list[Path]:
    """Write the three inputs (``None``: leave the file missing) and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / name for name in FILES]
    for path, content in zip(paths, contents, strict=True):
        if content is not None:
            path.write_bytes(content)
    return paths


def assert_same(published: Path, args: Sequence[str | Path]) -> Run:
    theirs, ours = run_script(published, args), run_script(OURS, args)
    assert (ours.exit, ours.stdout) == (theirs.exit, theirs.stdout), (
        f"published exit {theirs.exit} stderr {theirs.stderr[-300:]!r}; "
        f"ours exit {ours.exit} stderr {ours.stderr[-300:]!r}"
    )
    return ours


# A driver that runs one script on many cases in one interpreter, as ``python script.py``
# would (argv, ``__main__``, SystemExit and uncaught exceptions mapped to the exit status).
DRIVER = r"""
import contextlib, io, json, runpy, sys

def run(script, args):
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = [script, *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:
                code = 1
    finally:
        sys.argv = saved
    return {"stdout": out.getvalue(), "exit": code}

script = sys.argv[1]
cases = json.load(sys.stdin)
json.dump([run(script, args) for args in cases], sys.stdout)
"""


def run_batch(driver: Path, script: Path, cases: list[list[str]]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(driver), str(script)],
        input=json.dumps(cases).encode(),
        capture_output=True,
        timeout=120,
        check=True,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


# ------------------------------------------------------------------------- hand-made cases


def jsonl(*records: Any, sep: str = "\n") -> bytes:
    return (sep.join(json.dumps(r, ensure_ascii=False) for r in records) + sep).encode()


def doc(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=2).encode()


def S(sid: Any, valid: Any = True, **fields: Any) -> dict[str, Any]:
    base = {"name": "Zoë Ωμέγα", "email": "z@example.org", "message": "Hi\nthere", "phone": None}
    return {"id": sid, "valid": valid, **base, "run_token": f"tok-{sid}", **fields}


def H(sid: Any, status: Any) -> dict[str, Any]:
    return {"scenario_id": sid, "status_code": status, "body": {}, "started": 0, "finished": 1}


def E(scenario: dict[str, Any], **changes: Any) -> dict[str, Any]:
    event = {k: scenario.get(k) for k in ("name", "email", "message", "phone", "run_token")}
    return {"scenario_id": scenario["id"], **event, "recipients": ["to@x.org"], **changes}


V1, V2, V3, I1, I2 = S("v1"), S("v2", phone="+420 123"), S("v3"), S("i1", False), S("i2", False)
ALL_GOOD = (
    doc([V1, V2, I1]),
    jsonl(H("v1", 200), H("v2", 201), H("i1", 400)),
    jsonl(E(V1), E(V2)),
)

Contents = tuple[bytes | None, bytes | None, bytes | None]

# Inputs both scripts score (exit 0).
SCORED_CASES: dict[str, Contents] = {
    "all-pass": ALL_GOOD,
    "empty-scenario-list": (b"[]", b"", b""),
    "empty-object-document": (b"{}", b"", b""),
    "empty-string-document": (b'""', b"", b""),
    "only-valid": (doc([V1, V2]), jsonl(H("v1", 200), H("v2", 200)), jsonl(E(V1), E(V2))),
    "only-invalid": (doc([I1, I2]), jsonl(H("i1", 400), H("i2", 422)), b""),
    "thirds": (
        doc([V1, V2, V3, I1, I2]),
        jsonl(H("v1", 200), H("v2", 500), H("i1", 200)),
        jsonl(E(V1), E(V2, name="changed"), E(V2), E(I1)),
    ),
    "last-duplicate-scenario-wins": (
        doc([S("d", True), S("d", False), V1]),
        jsonl(H("d", 200), H("d", 400), H("v1", 200)),
        jsonl(E(V1)),
    ),
    "earlier-duplicate-needs-no-valid": (
        doc([{"id": "d", "name": "x"}, S("d", False), V1]),
        jsonl(H("v1", 200)),
        jsonl(E(V1)),
    ),
    "one-true-and-one-float-are-one-id": (
        doc([S(1), S(True, False), S(1.0), S(2, False)]),
        jsonl(H(True, 200), H(2.0, 400)),
        jsonl(E(S(1)), {"scenario_id": 2.0}),
    ),
    "events-without-scenario-id-meet-a-null-id": (
        doc([S(None), V1, I1]),
        jsonl(H(None, 200), H("v1", 200), H("i1", 400)),
        jsonl({k: v for k, v in E(S(None)).items() if k != "scenario_id"}, E(V1)),
    ),
    "event-without-scenario-id-alone": (ALL_GOOD[0], ALL_GOOD[1], ALL_GOOD[2] + b"{}\n"),
    "two-events-for-one-scenario": (ALL_GOOD[0], ALL_GOOD[1], ALL_GOOD[2] + jsonl(E(V1))),
    "event-for-unknown-scenario": (ALL_GOOD[0], ALL_GOOD[1], ALL_GOOD[2] + jsonl(E(S("zz")))),
    "odd-status-codes": (
        doc([S(f"v{i}") for i in range(7)] + [S(f"i{i}", False) for i in range(7)]),
        jsonl(
            *(H(f"v{i}", c) for i, c in enumerate([200.0, 299.9, True, "200", None, 1e308, 2**70])),
            *(H(f"i{i}", c) for i, c in enumerate([404.0, 4e2, False, "404", [404], -0.0, 499])),
        ),
        b"",
    ),
    "truthy-and-falsy-valid": (
        doc([S(f"s{i}", v) for i, v in enumerate(["no", "", 0, 2, [], [0], {}, {"a": 1}, None])]),
        b"",
        b"",
    ),
    "absent-null-empty-zero-false-all-match": (
        doc([S("v", name=None, email="", message=0, phone=False), I1]),
        jsonl(H("v", 200), H("i1", 400)),
        jsonl({"scenario_id": "v", "name": "", "email": [], "phone": {}}),
    ),
    "nan-ids-never-match": (
        b'[{"id": NaN, "valid": true}, {"id": NaN, "valid": false}]',
        b'{"scenario_id": NaN, "status_code": 200}\n',
        b'{"scenario_id": NaN}\n',
    ),
    "blank-and-whitespace-lines-crlf-and-lone-cr": (
        ALL_GOOD[0],
        b"\n  \n" + ALL_GOOD[1].replace(b"\n", b"\r\n") + b"\t\n\x0c\n\xc2\x85\n\xe3\x80\x80",
        ALL_GOOD[2].replace(b"\n", b"\r") + b"\r\n\r\n",
    ),
    "no-final-newline": (ALL_GOOD[0], ALL_GOOD[1].rstrip(b"\n"), ALL_GOOD[2].rstrip(b"\n")),
    "unicode-everywhere": (
        doc([S("ü", name="李小龍 👩🏽‍💻", message="שלום\u200f\u202e<script>"), S("ż", False)]),
        jsonl(H("ü", 200), H("ż", 400)),
        jsonl(E(S("ü", name="李小龍 👩🏽‍💻", message="שלום\u200f\u202e<script>"))),
    ),
}

# Inputs the published script cannot score: both must exit 1 with nothing on stdout.
UNSCORABLE_CASES: dict[str, Contents] = {
    "missing-http-file": (ALL_GOOD[0], None, ALL_GOOD[2]),
    "missing-scenarios-file": (None, ALL_GOOD[1], ALL_GOOD[2]),
    "scenarios-not-json": (b"[{", ALL_GOOD[1], ALL_GOOD[2]),
    "scenarios-with-bom": (b"\xef\xbb\xbf" + ALL_GOOD[0], ALL_GOOD[1], ALL_GOOD[2]),
    "scenarios-bad-utf8": (b'[{"id": "\xff", "valid": true}]', b"", b""),
    "scenarios-a-number": (b"5", b"", b""),
    "scenarios-an-object-with-keys": (b'{"id": 1}', b"", b""),
    "scenario-not-an-object": (b"[[1]]", b"", b""),
    "scenario-without-id": (b'[{"valid": true}]', b"", b""),
    "scenario-with-list-id": (b'[{"id": [1], "valid": true}]', b"", b""),
    "scenario-without-valid": (doc([{"id": "x"}, I1]), b"", b""),
    "http-line-not-json": (ALL_GOOD[0], ALL_GOOD[1] + b"{oops}\n", ALL_GOOD[2]),
    "http-line-two-values": (ALL_GOOD[0], b'{"scenario_id": "v1"} {"x": 1}\n', b""),
    "http-line-without-scenario-id": (ALL_GOOD[0], ALL_GOOD[1] + b"{}\n", ALL_GOOD[2]),
    "http-line-with-object-id": (ALL_GOOD[0], b'{"scenario_id": {"a": 1}}\n', b""),
    "http-line-with-bom": (ALL_GOOD[0], b"\xef\xbb\xbf" + ALL_GOOD[1], ALL_GOOD[2]),
    "smtp-line-a-list": (ALL_GOOD[0], ALL_GOOD[1], ALL_GOOD[2] + b"[1]\n"),
    "smtp-line-with-list-id": (ALL_GOOD[0], ALL_GOOD[1], b'{"scenario_id": [1]}\n'),
    "smtp-line-split-by-vertical-tab": (ALL_GOOD[0], ALL_GOOD[1], b'{"a": 1}\x0b{"b": 2}\n'),
}


@pytest.mark.parametrize("name", sorted(SCORED_CASES))
def test_scored_case_matches_published(name: str, published: Path, tmp_path: Path) -> None:
    ours = assert_same(published, write_case(tmp_path, SCORED_CASES[name]))
    assert ours.exit == 0, ours.stderr


@pytest.mark.parametrize("name", sorted(UNSCORABLE_CASES))
def test_unscorable_case_fails_like_published(name: str, published: Path, tmp_path: Path) -> None:
    ours = assert_same(published, write_case(tmp_path, UNSCORABLE_CASES[name]))
    assert ours.exit == 1
    assert ours.stdout == b""
    # The one intended difference: one line on stderr instead of a traceback.
    assert ours.stderr.decode().startswith("score_logs.py: error: ")
    assert ours.stderr.count(b"\n") == 1


@pytest.mark.parametrize("argc", [0, 1, 2, 4, 5])
def test_wrong_argument_count_matches_published(
    argc: int, published: Path, tmp_path: Path
) -> None:
    args = write_case(tmp_path, ALL_GOOD)
    args = (args * 2)[:argc]
    theirs, ours = run_script(published, args), run_script(OURS, args)
    assert ours == theirs
    assert ours.exit == 1
    assert ours.stderr.decode().strip() == score_logs.USAGE


def test_published_source_is_the_scorer(published: Path) -> None:
    source = published.read_text("utf-8")
    assert source.startswith("#!/usr/bin/env python3\n")
    assert score_logs.USAGE in source
    compile(source, str(published), "exec")


def test_seed_is_found_through_the_environment_first(tmp_path: Path) -> None:
    (tmp_path / SEED_NAME).write_text("x", "utf-8")
    found = find_seed_document({"TRIZ_SEEDS_DIR": str(tmp_path)}, tmp_path, tmp_path / "none")
    assert found == tmp_path / SEED_NAME


def test_seed_is_found_above_a_clone(tmp_path: Path) -> None:
    seeds = tmp_path / "shared" / "seeds"
    seeds.mkdir(parents=True)
    (seeds / SEED_NAME).write_text("x", "utf-8")
    clone = tmp_path / "ci" / "checkout"
    assert find_seed_document({}, clone, tmp_path / "none") == seeds / SEED_NAME


def test_missing_seed_is_an_error_naming_every_place_tried(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="TRIZ_SEEDS_DIR") as raised:
        find_seed_document({"TRIZ_SEEDS_DIR": str(tmp_path / "env")}, tmp_path, tmp_path / "fb")
    assert str(tmp_path / "env" / SEED_NAME) in str(raised.value)
    assert str(tmp_path / "fb" / SEED_NAME) in str(raised.value)


def test_extraction_needs_both_markers() -> None:
    with pytest.raises(ValueError, match="View canonical source code"):
        published_scorer_source("no code here\nAbout the author\n")


# ----------------------------------------------------------- nesting near the recursion limit


def _nested_case(where: str, depth: int) -> tuple[bytes, bytes, bytes]:
    nested = "[" * depth + "]" * depth
    scenarios = '[{"id": "a", "valid": true, "name": "x"}, {"id": "b", "valid": false}]'
    http, smtp = "", '{"scenario_id": "a", "name": "x"}\n'
    if where == "scenarios":
        scenarios = scenarios.replace('"x"', nested)
    elif where == "http":
        http = f'{{"scenario_id": "a", "status_code": {nested}}}\n'
    else:
        smtp = f'{{"scenario_id": "a", "name": {nested}}}\n'
    return scenarios.encode(), http.encode(), smtp.encode()


@pytest.mark.parametrize("where", ["scenarios", "http", "smtp"])
def test_nesting_limit_matches_published(where: str, published: Path, tmp_path: Path) -> None:
    """The deepest JSON either script accepts is the same (CPython's recursion limit)."""

    def passes(depth: int) -> bool:
        return run_script(published, write_case(tmp_path, _nested_case(where, depth))).exit == 0

    low, high = 10, 30_000  # published passes at low, fails at high
    assert passes(low)
    assert not passes(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if passes(middle) else (low, middle)
    for depth in (low, high):
        assert_same(published, write_case(tmp_path, _nested_case(where, depth)))


# ------------------------------------------------------------------ generated (hypothesis)

ID_POOL = ["a", "b", "c", "ü", "", 1, 1.0, True, 0, False, None, 2.5, "1"]
ids = st.sampled_from(ID_POOL)
odd_values = st.sampled_from([None, "", 0, 0.0, False, True, 1, [], {}, ["x"], {"k": "v"}, " "])
texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(["Zoë", "李小龍", "Ωμέγα", "שלום", "a\nb", "<script>x</script>", "x\u200b"])
field_values = texts | odd_values
statuses = st.one_of(
    st.sampled_from([200, 201, 299, 300, 400, 404, 499, 500, 200.0, 404.0, 299.5, 400.5]),
    st.sampled_from([True, False, "200", "404", None, [200], {"c": 400}, -0.0, 10**20]),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308]),
    st.integers(-10, 1000),
    st.floats(150, 550),
)
valid_values = st.sampled_from([True, False, 0, 1, "", "no", [], [0], None, {}, 0.0, 2])
FIELDS = ("name", "email", "message", "phone")


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (a middle value: hypothesis favours the bounds)."""
    return st.integers(1, n).map(lambda drawn: drawn == n // 2 + 1)


@st.composite
def records(draw: st.DrawFn, required: dict[str, Any], optional: dict[str, Any]) -> dict:
    record = {key: draw(strategy) for key, strategy in required.items()}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            record[key] = draw(strategy)
    return record


def scenario_records() -> st.SearchStrategy[dict[str, Any]]:
    return records({"id": ids, "valid": valid_values}, dict.fromkeys(FIELDS, field_values))


@st.composite
def event_records(draw: st.DrawFn, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    if scenarios and not draw(one_in(4)):  # mostly a faithful or near-faithful copy
        scenario = draw(st.sampled_from(scenarios))
        event = {"scenario_id": scenario["id"], **{f: scenario.get(f) for f in FIELDS}}
        for field in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
            event[field] = draw(field_values)
        if draw(one_in(10)):
            del event["scenario_id"]
        return event
    return draw(records({}, {"scenario_id": ids, **dict.fromkeys(FIELDS, field_values)}))


BLANK_LINES = ["", " ", "\t", "  \t ", "\x0c", "\x1c", "\x85", "\u3000", "\u2028"]
LINE_ENDS = ["\n", "\n", "\n", "\r\n", "\r"]


@st.composite
def jsonl_bytes(draw: st.DrawFn, items: list[Any], corrupt: list[str]) -> bytes:
    ensure_ascii = draw(st.booleans())
    lines = [json.dumps(item, ensure_ascii=ensure_ascii) for item in items]
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(BLANK_LINES)))
    if corrupt and draw(one_in(15)):  # rarely: a line the published script rejects
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(corrupt)))
    out = "".join(line + draw(st.sampled_from(LINE_ENDS)) for line in lines)
    if draw(st.booleans()):
        out = out.rstrip("\r\n")
    return out.encode()


HTTP_CORRUPTIONS = ["{}", "[1]", '"x"', "{", '{"scenario_id": [1]}']
SMTP_CORRUPTIONS = ["[1]", "5", '{"a": 1} {"b": 2}', "\ufeff{}", "nul"]


@st.composite
def chaotic_logs(draw: st.DrawFn, scenarios: list[dict[str, Any]]) -> tuple[list, list]:
    """HTTP results and events with any ids, statuses and field values."""
    scenario_ids = st.sampled_from([s["id"] for s in scenarios]) if scenarios else ids
    result_fields = {"status_code": statuses, "body": field_values}
    http_items = draw(st.lists(records({"scenario_id": scenario_ids}, result_fields), max_size=9))
    http_items += draw(st.lists(records({"scenario_id": ids}, result_fields), max_size=2))
    return http_items, draw(st.lists(event_records(scenarios), max_size=10))


@st.composite
def faithful_logs(draw: st.DrawFn, scenarios: list[dict[str, Any]]) -> tuple[list, list]:
    """The logs of a correct candidate, then up to two slips (so scorer_pass is sometimes true)."""
    http_items: list[Any] = []
    events: list[Any] = []
    for scenario in scenarios:
        codes = [200, 201, 200.0] if scenario["valid"] else [400, 422, 404.0]
        status = draw(st.sampled_from(codes))
        http_items.append({"scenario_id": scenario["id"], "status_code": status})
        if scenario["valid"]:
            events.append({"scenario_id": scenario["id"], **{f: scenario.get(f) for f in FIELDS}})
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        slip = draw(st.sampled_from(["status", "drop", "repeat", "field", "extra"]))
        if slip == "status" and http_items:
            draw(st.sampled_from(http_items))["status_code"] = draw(statuses)
        elif slip == "drop" and events:
            events.remove(draw(st.sampled_from(events)))
        elif slip == "repeat" and events:
            events.append(dict(draw(st.sampled_from(events))))
        elif slip == "field" and events:
            draw(st.sampled_from(events))[draw(st.sampled_from(FIELDS))] = draw(field_values)
        elif slip == "extra" and scenarios:
            events.append({"scenario_id": draw(st.sampled_from(scenarios))["id"]})
    return http_items, events


@st.composite
def cases(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    """The three input files of one run: mostly scorable, sometimes not."""
    faithful = draw(st.booleans())
    if faithful:
        scenario = records({"id": ids, "valid": st.booleans()}, dict.fromkeys(FIELDS, field_values))
        scenarios = draw(st.lists(scenario, min_size=2, max_size=8, unique_by=lambda s: s["id"]))
    else:
        scenarios = draw(st.lists(scenario_records(), max_size=8))
    http_items, events = draw((faithful_logs if faithful else chaotic_logs)(scenarios))
    if scenarios and draw(one_in(20)):  # rarely: one scenario without "valid"
        draw(st.sampled_from(scenarios)).pop("valid")
    document = json.dumps(
        scenarios, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2]))
    )
    if draw(one_in(25)):
        document = draw(st.sampled_from(["{}", '""', "5", "null", "[1]", '[{"id": []}]', "[{"]))
    http = draw(jsonl_bytes(http_items, HTTP_CORRUPTIONS))
    smtp = draw(jsonl_bytes(events, SMTP_CORRUPTIONS))
    return document.encode(), http, smtp


BATCH = 8


@pytest.fixture(scope="module")
def batch_runner(
    published: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[list[tuple[bytes, bytes, bytes]]], None]:
    root = tmp_path_factory.mktemp("generated")
    driver = root / "driver.py"
    driver.write_text(DRIVER, "utf-8")
    counter = iter(range(10**9))

    def check(batch: list[tuple[bytes, bytes, bytes]]) -> None:
        argvs = [
            [str(p) for p in write_case(root / f"case{next(counter)}", case)] for case in batch
        ]
        theirs = run_batch(driver, published, argvs)
        ours = run_batch(driver, OURS, argvs)
        for case, expected, got in zip(batch, theirs, ours, strict=True):
            assert got == expected, f"case {case!r}"

    return check


@settings(
    max_examples=70,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(batch=st.lists(cases(), min_size=BATCH, max_size=BATCH))
def test_generated_inputs_match_published(
    batch: list[tuple[bytes, bytes, bytes]],
    batch_runner: Callable[[list[tuple[bytes, bytes, bytes]]], None],
) -> None:
    batch_runner(batch)


# ----------------------------------------------------------------------- the in-process API


def test_score_in_process_equals_the_command(published: Path, tmp_path: Path) -> None:
    contents = SCORED_CASES["thirds"]
    paths = write_case(tmp_path, contents)
    expected = run_script(published, paths).stdout.decode()
    scenarios = json.loads(contents[0])
    http_lines = contents[1].decode().splitlines(keepends=True)
    smtp_lines = contents[2].decode().splitlines(keepends=True)
    report = score_logs.score(scenarios, http_lines, smtp_lines)
    assert score_logs.render(report) == expected
    assert report["delivery"] == 1 / 3
    assert report["scorer_pass"] is False
    assert report["pilot_pass"] is None


def test_main_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert score_logs.main([str(p) for p in write_case(tmp_path, ALL_GOOD)]) == 0
    assert json.loads(capsys.readouterr().out)["scorer_pass"] is True
    assert score_logs.main(["only-one"]) == 1
    assert capsys.readouterr().err.strip() == score_logs.USAGE
    assert score_logs.main([str(tmp_path / "missing"), "b", "c"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("score_logs.py: error: cannot read")


def test_score_rejects_what_the_published_script_cannot_score() -> None:
    with pytest.raises(score_logs.ScoreInputError, match="no 'valid'"):
        score_logs.score([{"id": "x"}], [], [])
    with pytest.raises(score_logs.ScoreInputError, match="http_results line 2"):
        score_logs.score([], ["", "{}"], [])
    with pytest.raises(score_logs.ScoreInputError, match="smtp_events line 1"):
        score_logs.score([], [], ['{"scenario_id": [1]}'])


def test_score_leaves_the_garbage_collector_and_recursion_limit_as_found() -> None:
    import gc

    limit = sys.getrecursionlimit()
    assert gc.isenabled()
    score_logs.score([{"id": 1, "valid": True}], ['{"scenario_id": 1, "status_code": 200}'], [])
    assert gc.isenabled()
    assert sys.getrecursionlimit() == limit
