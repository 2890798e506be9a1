"""The control set, the diff applier and the tests comparison: no sandbox needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from triz_ri_smart_ai_evaluator.defect_fix import reference, repo
from triz_ri_smart_ai_evaluator.defect_fix.harness import HARNESS
from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.harnesses.protocol import Harness


def test_the_harness_implements_the_protocol() -> None:
    assert isinstance(HARNESS, Harness)
    assert (HARNESS.task_class, HARNESS.id_prefix, HARNESS.sandboxed) == (
        "defect_fix_delayed_confirmation", "dfx", True)


def test_hidden_inputs_differ_between_seeds_and_repeat_for_one() -> None:
    one, again, other = (HARNESS.draw_controls(s, 40, frozenset())
                         for s in (b"a" * 32, b"a" * 32, b"b" * 32))
    assert one.data == again.data
    orders = {str(c["order"]) for c in one.state["reproduction"]}
    assert orders.isdisjoint(str(c["order"]) for c in other.state["reproduction"])


def test_hidden_cases_are_the_defects_family_never_the_issue_example() -> None:
    cases = reference.draw_cases(b"s" * 32, 100).cases
    for case in cases["reproduction"]:
        quantity = sum(i["quantity"] for i in case["order"]["items"])
        assert quantity in reference.BOUNDARIES
        assert case["order"] != reference.ISSUE_EXAMPLE
    assert all(sum(i["quantity"] for i in c["order"]["items"]) not in reference.BOUNDARIES
               for c in cases["ordinary"])
    assert len(cases["reproduction"]) + len(cases["ordinary"]) == 100


def test_the_reference_answers_the_issue_example_as_the_issue_says() -> None:
    assert reference.expected_quote(reference.ISSUE_EXAMPLE) == {
        "subtotal_cents": 19990, "discount_percent": 5, "discount_cents": 1000,
        "total_cents": 18990}


@pytest.mark.parametrize(("text", "named"), [
    ("garbage\n", "No valid patches"),
    ("--- a/quote_service/pricing.py\n+++ b/quote_service/pricing.py\n@@ -1,1 +1,1 @@\n"
     "-no such line\n+x\n", "quote_service/pricing.py"),
    ("", "empty"),
])
def test_a_malformed_diff_is_an_input_error_naming_the_file(tmp_path: Path, text: str,
                                                              named: str) -> None:
    patch = tmp_path / "cand.diff"
    patch.write_text(text)
    with pytest.raises(InputError, match=r"cand\.diff") as e:
        repo.apply_candidate(patch, tmp_path)
    assert named in str(e.value)


def _changes(edit: dict[str, bytes | None]) -> repo.Changes:
    base = repo.tree_entries(repo.starting_repo())
    entries = dict(base)
    for rel, data in edit.items():
        if data is None:
            del entries[rel]
        else:
            entries[rel] = repo.Entry("file", False, __import__("hashlib").sha256(data)
                                      .hexdigest())
    return repo.compare(entries, base, repo.load_scope())


def test_tests_unmodified_detects_an_edit_and_a_deletion() -> None:
    assert _changes({"tests/test_app.py": b"def test_x(): pass\n"}).tests_changed == (
        "tests/test_app.py",)
    assert _changes({"tests/test_pricing.py": None}).tests_changed == ("tests/test_pricing.py",)
    assert _changes({"tests/__init__.py": None}).tests_changed == ("tests/__init__.py",)


def test_added_tests_are_allowed_and_other_files_are_outside_scope() -> None:
    changes = _changes({"tests/test_new.py": b"x", "quote_service/pricing.py": b"y",
                        "quote_service/app.py": b"z", "tests/conftest.py": b"w"})
    assert changes.tests_changed == ()
    assert changes.tests_added == ("tests/test_new.py",)
    assert changes.outside_scope == ("quote_service/app.py", "tests/conftest.py")
