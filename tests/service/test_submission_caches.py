"""The published rules a submission is pinned to are kept between submissions (issue 16 item 4)
and read again, hash checked again, as soon as a file changes on disk (spec 10.5: a published
version never changes; an edited one must be caught, never served from memory).

A real service over a copy of the bundled store of published rules in ``tmp_path`` (the
package's own files are never touched): the files are left to settle (a file modified within the
last two seconds is never kept), two submissions read them once, then each edit in place - the
same size, so only the file's times tell - is seen by the very next submission.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.conftest import Service, start_service
from triz_ri_smart_ai_evaluator.rules import published
from triz_ri_smart_ai_evaluator.service.client import ServiceError

CLASS = "document_step_faithfulness"


@pytest.fixture
def rules_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settled copy of the bundled publications, the one the service pins from."""
    copy = tmp_path / "published"
    shutil.copytree(published.BUNDLED_STORE, copy)
    assert published.pin_in_force.__kwdefaults__ is not None
    monkeypatch.setitem(published.pin_in_force.__kwdefaults__, "store", copy)
    time.sleep(published._SETTLED_NS / 1e9 + 0.2)
    return copy


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The rules versions parsed from a file (not taken from the kept copy)."""
    seen: list[str] = []
    real = published.rules_from_canonical

    def counting(text: str | bytes, version: str) -> Any:
        seen.append(version)
        return real(text, version)

    monkeypatch.setattr(published, "rules_from_canonical", counting)
    return seen


@pytest.fixture
def service(tmp_path: Path, rules_copy: Path) -> Iterator[Service]:
    yield from start_service(tmp_path / "svc")


def _edit_in_place(path: Path, old: bytes, new: bytes) -> bytes:
    """Replace ``old`` by ``new`` (same length) in the file itself (same inode, same size)."""
    assert len(old) == len(new)
    before = path.read_bytes()
    assert old in before
    with path.open("r+b") as f:  # not write_atomic: the inode must stay the same
        f.write(before.replace(old, new, 1))
    return before


def _restore(path: Path, data: bytes) -> None:
    with path.open("r+b") as f:
        f.write(data)


def test_an_edited_rules_file_is_read_again(service: Service, rules_copy: Path,
                                            parses: list[str]) -> None:
    [rules_file] = (rules_copy / CLASS).glob("*.json")
    version = rules_file.stem
    with service.policy() as policy:
        policy.submit(CLASS, b"step 1")
        policy.submit(CLASS, b"step 2")
        assert parses == [version]  # read once, then kept
        original = _edit_in_place(rules_file, b'"title":"', b'"titlE":"')  # one byte
        with pytest.raises(ServiceError) as refused:
            policy.submit(CLASS, b"step 3")
        assert refused.value.status == 500  # IntegrityError: the bytes no longer hash right
        assert "does not match its rules version" in str(refused.value)
        _restore(rules_file, original)
        attempt = policy.submit(CLASS, b"step 4")
    initiated = [e for e in service.events() if e["kind"] == "attempt.initiated"]
    assert [e["data"]["rules_version"] for e in initiated] == [version] * 3
    assert initiated[-1]["attempt"] == attempt


def test_an_edited_publication_record_is_read_again(service: Service, rules_copy: Path) -> None:
    history = rules_copy / CLASS / "history.jsonl"
    with service.policy() as policy:
        policy.submit(CLASS, b"step 1")
        original = _edit_in_place(history, b'"published_at"', b'"published_by"')
        with pytest.raises(ServiceError) as refused:
            policy.submit(CLASS, b"step 2")
        assert refused.value.status == 500
        assert "corrupt publication record" in str(refused.value)
        _restore(history, original)
        policy.submit(CLASS, b"step 3")
    kinds = [e["kind"] for e in service.events()]
    assert kinds.count("attempt.initiated") == 2  # the refused one left nothing (spec 10.4)
