"""Reading SWE-bench-style predictions (issue 16 item 3): the three formats SWE-bench's harness
reads, and a malformed file refused whole, with the place and the problem, before anything is
recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance._cli import cli
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.integrations.swebench import read_predictions

CLASS = "defect_fix_delayed_confirmation"
PATCH = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"


def row(model: str = "model-a", patch: str | None = PATCH, **extra: object) -> dict[str, object]:
    return {"instance_id": CLASS, "model_patch": patch, "model_name_or_path": model, **extra}


def test_jsonl_list_and_dict_forms_read_alike(tmp_path: Path) -> None:
    rows = [row("model-a"), row("model-b", "")]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (tmp_path / "p.json").write_text(json.dumps(rows))
    (tmp_path / "d.json").write_text(json.dumps({CLASS: row("model-a")}))
    jsonl = read_predictions(tmp_path / "p.jsonl", CLASS)
    listed = read_predictions(tmp_path / "p.json", CLASS)
    assert [(p.model_name_or_path, p.model_patch) for p in jsonl] == [
        ("model-a", PATCH), ("model-b", "")]
    assert [(p.model_name_or_path, p.model_patch) for p in listed] == [
        (p.model_name_or_path, p.model_patch) for p in jsonl]
    assert jsonl[1].empty
    assert jsonl[0].where.endswith("p.jsonl:1")
    [keyed] = read_predictions(tmp_path / "d.json", CLASS)
    assert (keyed.instance_id, keyed.model_patch) == (CLASS, PATCH)


def test_a_null_patch_is_an_empty_patch_not_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps([row(patch=None), ]))
    [p] = read_predictions(tmp_path / "p.json", CLASS)
    assert p.empty


@pytest.mark.parametrize(("name", "text", "words"), [
    ("p.jsonl", '{"instance_id": 1, "model_name_or_path": "m"}\n', "p.jsonl:1: instance_id"),
    ("p.jsonl", json.dumps(row()) + "\n{not json\n", "p.jsonl:2"),
    ("p.json", json.dumps([row(), row()]), "again"),
    ("p.json", json.dumps([row(model="bad model name")]), "model_name_or_path"),
    ("p.json", json.dumps([{"instance_id": CLASS, "model_patch": PATCH}]),
     "missing model_name_or_path"),
    ("p.json", json.dumps([row(patch=7)]), "model_patch must be"),
    ("p.json", json.dumps([row(instance_id="django__django-11099")]), "not a task of"),
    ("p.json", json.dumps({CLASS: row(instance_id="other")}), "differs from its key"),
    ("p.json", json.dumps("a string"), "list or an object"),
    ("p.json", "[]", "no prediction"),
    ("p.json", '[{"instance_id": "a", "instance_id": "b"}]', "duplicate"),
    ("p.txt", json.dumps([row()]), ".jsonl or a .json"),
])
def test_malformed_predictions_are_refused_with_the_place(tmp_path: Path, name: str, text: str,
                                                          words: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        read_predictions(path, CLASS)
    assert words in caught.value.diagnostics()


def test_the_command_refuses_a_malformed_file_and_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(row()) + "\n" + json.dumps(row(model="x y")) + "\n")
    done = cli(tmp_path, "attempt", "import-predictions", path, "--run-id", "r1")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert "p.jsonl:2" in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ledger.db").exists(), "nothing recorded for a refused file"


def test_export_of_an_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    done = cli(tmp_path, "attempt", "export-report", "--run-id", "never")
    assert done.returncode == 2
    assert "no predictions were imported with run id 'never'" in done.stderr
