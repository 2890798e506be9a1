"""The bundled candidates stored as small patches (issue 14 item 5).

Every adversarial candidate is ``candidates/<name>/cheat.patch``, a diff against the reference's
tree; ``examples.candidate_diff`` rebuilds its full diff against the starting repository. Here:
the rebuilt diff applies with the harness's own ``prepare``; the tree differs from the reference's
exactly in the files the cheat names; it is the very tree the candidate had when it was stored as
a full diff (golden digests); the cheats stay short; a cheat that no longer applies is a clear
InputError. ``diff_trees``, the generator, is checked on its own: git's extended headers, the
missing final newline, and a round-trip property.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triz_ri_smart_ai_evaluator.errors import InputError
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form import examples
from triz_ri_smart_ai_evaluator.pilot_02_feedback_form.candidate import (
    Candidate,
    apply_patch,
    prepare,
    tree_entries,
)

EXAMPLES = {e.name: e for e in examples.bundled_candidates()}
ADVERSARIAL = sorted(n for n in EXAMPLES if n != examples.REFERENCE)

#: archive_digest of each candidate's tree as it was when every candidate was stored as a full
#: ``candidate.diff`` (before this change): rebuilding from reference + cheat must give the same
#: files, bytes and executable bits. A deliberate change to the reference or to a cheat changes
#: these; update them then, and only then.
TREE_DIGESTS = {
    "reference": "d513ce394ad61b2cf2232a0345969d68b90ae1dac12d5e8bed01836ba0c7cb13",
    "breaks_public_tests": "82ce49017d344302b5bb0f1db7e5888f11ee3118bd7e2d22ede67707d49ece61",
    "changing_tests": "72a0289b791992bdc6f9e05007a597cbcad9cc3ca5473f04a8840043ca66a9f3",
    "client_side_validation_only":
        "480dae78c66132c28949c6a8c226842577d26fffd09c5f281ae9a555f731a2c5",
    "duplicate_on_idle_flush": "ecb7b2694fafffb3ff75563fcffbbf21057c45b84f381c972144eb04593c8546",
    "envelope_sender_visitor": "22fa7de8a899ed0d16ce065281dae729f01f8fadf095fdf957e567b4d7a8ea37",
    "expose_secret": "8e58091d1c6541c0594dfc8e5a5b30da994b2fa6e94a721f98c5d716c1fe6372",
    "external_transmission": "5d469a08573143c283473491445381e12e0d228153ffae7ee9a7469c75c74332",
    "extra_field_recipient": "a69c157fd9b0549f159dd9992caee3fcabe2ece12b5fcd68a950f23bea7b81b2",
    "false_ui_success": "09c94201483aee042b224379fc39b1975c959794517dacdb3e50722fe2b36658",
    "field_loss": "6378d600d6d5b306bc7e7b5d86f6f07353fe10e5d9beb6b25a3f2ce39b0e4676",
    "hardcoded_public_values": "42f982343af6c1e1e4138483435b9a9f795c1d071dc1120713f2cc56435e1cd8",
    "honest_only_to_scripts": "0080db820b9622663cfdd4b18564c321e0d06695fdff70ef6f906738f2d41ec1",
    "test_aware": "a51805bc481926a137f451c5cbb768418f84c3a01f5c2cd9bc234c8c3e151910",
    "html_script_unsafe": "62f5a84e52beb3b2f9b1d3f4fa71202fd1953eef99ffe557fa89d6f0b5dad298",
    "mail_on_contact_view": "129cfa453eb9372abae7ff324cb158081f650d667da8c136ca15828140ed2a7b",
    "mail_on_invalid_new_token":
        "43c7108982543563b746f7a8868c6a278546e531129f675c20f2e77f98c50386",
    "obey_mark_pass": "8003e2cbb9859fc4e5fdd177c8bc96ca45efcf3c051a0183b2acaf7defb1fc42",
    "out_of_scope_modification":
        "b5b6409594be503015e9d11bebb83cbcc1f976347e98c8f20699738e23735cf5",
    "reading_expected_answers": "25fb3c64cbd30869ef8c04109306c47dc07334791bc8e382e402eb7efb6aec96",
    "replayed_token_header": "ca6f4b499c9214ef7177a3895ae3960e18f097404b678e351e6b583be79f6c0d",
    "reply_to_from_field": "c491220def770dbce02db3e374f0988f1a3aa7b2ebf95c9ddc410491a187cd15",
    "sender_as_visitor": "3610baf933717041e234fd39f441a91d2469fe7cbf1ed4bd2bfb48bee13182f0",
    "sent_flag_without_smtp": "fe571d876f0ade479c3255b303811bc61bac2fb0e8740c870da82d1d0ac55d28",
    "smtp_header_injection": "2b9e2322a941d984bce3dc81a35576f823f46e4be6fe6b7bbb6f55fbc3472af3",
    "truncates_long_message": "5b5f765a8ffbdc8033ed463176bc184d03b82cc01fe4daf65507cb794641056d",
    "wrong_recipient": "148279c166e36892227b86e99ba39d04ba6c314497aa2b0b69e3f0927bfe1e55",
}

#: A cheat a reviewer reads at a glance. A few attacks touch many sites (a second validation path
#: in the browser, an idle-flush thread, a header threaded through mailer and route); each has its
#: own bound so that growth is noticed, and is still a sixth of the full diff or less.
MAX_CHEAT_LINES = 80
LONGER_CHEATS = {
    "client_side_validation_only": 110,
    "duplicate_on_idle_flush": 105,
    "extra_field_recipient": 142,
    "reply_to_from_field": 161,
}


def cheat_files(patch: bytes) -> set[str]:
    """The paths a git-format patch names (``diff --git a/<p> b/<p>``)."""
    found = re.findall(rb"^diff --git a/(\S+) b/\S+$", patch, flags=re.MULTILINE)
    return {p.decode() for p in found}


def prepared(diff: bytes, where: Path) -> Candidate:
    """The diff materialised by the harness's own ``prepare``."""
    where.mkdir(parents=True)
    patch = where / "candidate.diff"
    patch.write_bytes(diff)
    return prepare(patch, where)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Candidate:
    diff = examples.candidate_diff(examples.REFERENCE)
    return prepared(diff, tmp_path_factory.mktemp("reference") / "work")


def test_every_folder_is_accounted_for() -> None:
    assert set(EXAMPLES) == set(TREE_DIGESTS)
    assert (examples.candidates_dir() / "reference" / examples.FULL_DIFF).is_file()
    for name in ADVERSARIAL:
        assert (examples.candidates_dir() / name / examples.CHEAT_PATCH).is_file(), name


def test_the_reference_is_its_stored_diff() -> None:
    stored = examples.candidates_dir() / "reference" / examples.FULL_DIFF
    assert EXAMPLES["reference"].diff == stored
    assert examples.candidate_diff("reference") == stored.read_bytes()


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_full_diff_is_reference_plus_cheat(
    name: str, reference: Candidate, tmp_path: Path
) -> None:
    full = examples.candidate_diff(name)
    got = prepared(full, tmp_path / "work")
    cheat = (examples.candidates_dir() / name / examples.CHEAT_PATCH).read_bytes()
    ref, mine = reference.entries, got.entries
    differs = {p for p in ref.keys() | mine.keys() if ref.get(p) != mine.get(p)}
    assert differs == cheat_files(cheat)
    assert got.digest == TREE_DIGESTS[name]


def test_the_reference_tree_is_unchanged(reference: Candidate) -> None:
    assert reference.digest == TREE_DIGESTS["reference"]


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_example_diff_is_the_built_diff(name: str) -> None:
    path = EXAMPLES[name].diff
    assert path.name == examples.FULL_DIFF
    assert path.read_bytes() == examples.candidate_diff(name)  # and it is deterministic


def test_cheats_are_short() -> None:
    lengths = {
        name: (examples.candidates_dir() / name / examples.CHEAT_PATCH).read_bytes().count(b"\n")
        for name in ADVERSARIAL
    }
    for name, lines in lengths.items():
        assert lines <= LONGER_CHEATS.get(name, MAX_CHEAT_LINES), (name, lines)
    for name, bound in LONGER_CHEATS.items():
        assert MAX_CHEAT_LINES < lengths[name] <= bound, "a stale exception: " + name


def copy_of(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "candidates"
    for name in ("reference", *names):
        shutil.copytree(examples.candidates_dir() / name, root / name)
    return root


def test_a_cheat_that_does_not_apply_is_an_input_error(tmp_path: Path) -> None:
    root = copy_of(tmp_path, "field_loss")
    cheat = root / "field_loss" / examples.CHEAT_PATCH
    text = cheat.read_text(encoding="utf-8")
    # A context line the reference's mailer.py does not have: the hunk no longer applies.
    first_context = next(line for line in text.splitlines()[4:] if line.startswith(" "))
    cheat.write_text(text.replace(first_context, " # not in the reference", 1), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        examples.candidate_diff("field_loss", root=root)
    message = str(caught.value)
    assert "bundled candidate field_loss" in message
    assert str(cheat) in message
    assert "feedback_app/mailer.py" in message
    assert "does not apply to the reference candidate's tree" in message
    example = examples.Example("field_loss", root / "field_loss", "field_fidelity", "metric", "")
    with pytest.raises(InputError, match="bundled candidate field_loss"):
        _ = example.diff


def test_a_folder_with_both_forms_or_neither_is_an_input_error(tmp_path: Path) -> None:
    root = copy_of(tmp_path, "field_loss", "wrong_recipient")
    shutil.copyfile(root / "reference" / examples.FULL_DIFF, root / "field_loss" / "candidate.diff")
    (root / "wrong_recipient" / examples.CHEAT_PATCH).unlink()
    with pytest.raises(InputError, match=r"field_loss: .* exactly one of .*found \["):
        examples.candidate_diff("field_loss", root=root)
    with pytest.raises(InputError, match=r"wrong_recipient: .*found neither"):
        examples.candidate_diff("wrong_recipient", root=root)


# --- diff_trees ------------------------------------------------------------------------------


def write_tree(
    root: Path, files: dict[str, bytes], executable: frozenset[str] = frozenset()
) -> Path:
    root.mkdir(parents=True)
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o755 if rel in executable else 0o644)
    return root


def round_trip(before: Path, after: Path, work: Path) -> bytes:
    """diff_trees(before, after) applied to a copy of ``before`` must give ``after``."""
    patch = examples.diff_trees(before, after)
    copy = work / "applied"
    shutil.copytree(before, copy)
    if patch:
        apply_patch(patch, copy, where="test", onto="the test tree")
    assert tree_entries(copy) == tree_entries(after)
    return patch


CASES = {
    "modified": ({"a.py": b"1\n2\n3\n"}, {"a.py": b"1\nTWO\n3\n"}, frozenset[str](), b"@@ -1,3"),
    "new file": ({}, {"d/new.py": b"x\n"}, frozenset(), b"new file mode 100644\n--- /dev/null"),
    "deleted file": ({"gone.py": b"x\n"}, {}, frozenset(), b"deleted file mode 100644"),
    "empty new file": ({}, {"empty.txt": b""}, frozenset(), b"new file mode 100644\n"),
    "mode only": ({"run.sh": b"echo\n"}, {"run.sh": b"echo\n"}, frozenset({"run.sh"}),
                  b"old mode 100644\nnew mode 100755\n"),
    "no final newline added": ({"a": b"x"}, {"a": b"x\ny"}, frozenset(),
                               b"-x\n\\ No newline at end of file\n+x\n+y\n\\ No newline"),
    "lone carriage return": ({"a": b"x\ry\n"}, {"a": b"x\rz\n"}, frozenset(), b"+x\rz\n"),
}


@pytest.mark.parametrize("case", CASES)
def test_diff_trees_writes_what_git_applies(case: str, tmp_path: Path) -> None:
    old, new, executable, expected = CASES[case]
    before = write_tree(tmp_path / "before", old)
    after = write_tree(tmp_path / "after", new, executable)
    assert expected in round_trip(before, after, tmp_path)


def test_identical_trees_give_an_empty_diff(tmp_path: Path) -> None:
    before = write_tree(tmp_path / "before", {"a": b"x\n"})
    after = write_tree(tmp_path / "after", {"a": b"x\n"})
    assert examples.diff_trees(before, after) == b""


@pytest.mark.parametrize(
    ("files", "message"),
    [({"bin": b"\x00\x01"}, "binary file"), ({"a b.py": b"x\n"}, "a path git would quote")],
)
def test_diff_trees_refuses_what_it_cannot_write(
    files: dict[str, bytes], message: str, tmp_path: Path
) -> None:
    before = write_tree(tmp_path / "before", {})
    after = write_tree(tmp_path / "after", files)
    with pytest.raises(InputError, match=message):
        examples.diff_trees(before, after)


def test_diff_trees_refuses_a_symlink(tmp_path: Path) -> None:
    before = write_tree(tmp_path / "before", {"a": b"x\n"})
    after = write_tree(tmp_path / "after", {"a": b"x\n"})
    (after / "link").symlink_to("a")
    with pytest.raises(InputError, match="a symlink"):
        examples.diff_trees(before, after)


_LINES = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\r\n", b"\n", b"d"]), max_size=12)
_TREES = st.dictionaries(st.sampled_from(["x.py", "sub/y.txt", "z"]), _LINES.map(b"".join))


@settings(max_examples=40, deadline=None)
@given(old=_TREES, new=_TREES)
def test_diff_trees_round_trips(old: dict[str, bytes], new: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory(prefix="triz-diff-trees-") as work:
        before = write_tree(Path(work) / "before", old)
        after = write_tree(Path(work) / "after", new)
        round_trip(before, after, Path(work))
